//! Go by Example: Context. Go's program is an HTTP server whose `/hello` handler
//! waits 10 s for its answer unless the request's context ends first; `curl`
//! interrupted with Ctrl-C closes the connection, and net/http cancels the request's
//! context when it sees the connection close.
//!
//! The port is a small HTTP/1.1 server on `goro::net` that does what net/http does
//! for this: one coroutine per connection, the request's context cancelled by a
//! coroutine that reads the connection and sees it close (and after the handler
//! returns). The interrupted `curl` is a client that sends the request and closes
//! its connection a moment later. Go serves for ever; the port closes its listener
//! once the request has been handled.

use crate::out::Out;
use goro::chan::Chan;
use goro::context::{self, Context};
use goro::net::{TcpListener, TcpStream};
use goro::sync::WaitGroup;
use goro::time::after;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

const SECOND: Duration = Duration::from_millis(50);

/// Go's `defer f()`.
struct Defer<F: FnMut()>(F);

impl<F: FnMut()> Drop for Defer<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

fn hello(out: &Out, mut w: &TcpStream, ctx: &Context) {
    out.println("server: hello handler started");
    let _ended = Defer(|| out.println("server: hello handler ended"));

    goro::select! {
        recv(after(10 * SECOND)) -> _ => {
            let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n");
        }
        recv(ctx.done()) -> _ => {
            let err = ctx.err().unwrap();
            out.println(format!("server: {err}"));
            let body = format!("{err}\n");
            let _ = write!(
                w,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    }
}

/// Reads a request's head and returns its path.
fn read_request(mut conn: &TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > 64 * 1024 {
            return None;
        }
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let line = head.lines().next()?;
    line.split(' ').nth(1).map(str::to_string)
}

fn serve_conn(out: &Out, conn: TcpStream) {
    let conn = Arc::new(conn);
    let Some(path) = read_request(&conn) else {
        return;
    };
    // The request's context: cancelled when the client closes the connection (a
    // read sees the end), and once the handler has returned.
    let (ctx, cancel) = context::background().with_cancel();
    let watched = conn.clone();
    let watcher = goro::go!(move || {
        let mut b = [0u8; 1];
        let _ = (&*watched).read(&mut b);
        cancel.cancel();
    });
    if path == "/hello" {
        hello(out, &conn, &ctx);
    } else {
        let _ = (&*conn).write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
    conn.close(); // the watcher's read ends
    let _ = watcher.join();
}

/// Serves until the listener is closed, then waits for the connections in flight.
/// Each handled request is reported on `served` (where Go's user watches the output).
fn serve(out: Out, listener: Arc<TcpListener>, served: Chan<()>) {
    let conns = WaitGroup::new();
    for conn in &*listener {
        let Ok(conn) = conn else {
            break; // closed
        };
        let (o, s) = (out.clone(), served.clone());
        conns.go(move || {
            serve_conn(&o, conn);
            s.send(());
        });
    }
    conns.wait();
}

pub fn main(out: &Out) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = Arc::new(listener);
    let served = Chan::<()>::new(1);
    let (o, l, s) = (out.clone(), listener.clone(), served.clone());
    let server = goro::go!(move || serve(o, l, s));

    // $ curl localhost:8090/hello, then Ctrl-C shortly after.
    let mut curl = TcpStream::connect(addr).unwrap();
    curl.write_all(b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    goro::time::sleep(SECOND);
    drop(curl);

    // Wait until the request is handled, then stop serving.
    served.recv();
    listener.close();
    server.join().unwrap();
}
