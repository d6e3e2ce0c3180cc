//! Go by Example: TCP Server, with its netcat client: the server answers each
//! connection on a goroutine of its own. Go serves for ever; the port stops once
//! the client has its answer. The output is the client's (netcat's).

use crate::out::Out;
use goro::net::{TcpListener, TcpStream};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;

fn handle_connection(conn: TcpStream) {
    let mut reader = BufReader::new(&conn);
    let mut message = String::new();
    if let Err(err) = reader.read_line(&mut message) {
        eprintln!("Read error: {err}");
        return;
    }

    let ack_msg = message.trim().to_uppercase();
    let response = format!("ACK: {ack_msg}\n");
    if let Err(err) = (&conn).write_all(response.as_bytes()) {
        eprintln!("Server write error: {err}");
    }
} // defer conn.Close()

fn server(listener: Arc<TcpListener>) {
    for conn in &*listener {
        match conn {
            Ok(conn) => {
                goro::go!(move || handle_connection(conn));
            }
            // Go logs the error and goes on; here every accept fails once main has
            // closed the listener, which is how this server stops.
            Err(_) => break,
        }
    }
}

pub fn main(out: &Out) {
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = listener.local_addr().unwrap();
    let l = listener.clone();
    let srv = goro::go!(move || server(l));

    // $ echo "Hello from netcat" | nc localhost 8090
    let mut nc = TcpStream::connect(addr).unwrap();
    nc.write_all(b"Hello from netcat\n").unwrap();
    let mut answer = String::new();
    nc.read_to_string(&mut answer).unwrap();
    out.print(answer);

    listener.close();
    srv.join().unwrap();
}
