//! A chat-shaped server prints its own coroutine dump: 200 clients connected, each
//! served by a coroutine parked in a socket read, a hub in a `select!`, an acceptor.
//! The dump groups the 200 alike coroutines into one entry, with their stack and where
//! they were spawned (docs/guide.md, "Configuration and debugging").
//!
//! ```text
//! cargo run --release --example dump
//! ```

use goro::chan::{channel, Receiver, Sender};
use goro::net::{TcpListener, TcpStream};
use std::io::Read;
use std::time::Duration;

fn serve_client(mut conn: TcpStream, to_hub: Sender<String>) {
    let mut buf = [0u8; 512];
    while let Ok(n) = conn.read(&mut buf) {
        if n == 0
            || to_hub
                .send(String::from_utf8_lossy(&buf[..n]).into())
                .is_err()
        {
            return;
        }
    }
}

fn broadcast(from_clients: Receiver<String>, quit: Receiver<()>) {
    loop {
        goro::select! {
            recv(from_clients) -> msg => if msg.is_err() { return },
            recv(quit) -> _ => return,
        }
    }
}

fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (to_hub, from_clients) = channel::<String>(16);
    let (_quit_tx, quit) = channel::<()>(0);
    goro::Builder::new()
        .name("hub")
        .spawn(move || broadcast(from_clients, quit))
        .unwrap();
    let hub = to_hub.clone();
    goro::Builder::new()
        .name("acceptor")
        .spawn(move || {
            for conn in listener.incoming() {
                let hub = hub.clone();
                goro::go!(move || serve_client(conn.unwrap(), hub));
            }
        })
        .unwrap();
    let clients: Vec<_> = (0..200)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    print!("{}", goro::debug::dump());
    drop(clients);
}
