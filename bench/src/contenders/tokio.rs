//! The tokio contender: the comparison's workloads ([`tasks`]) on tokio's multi-thread
//! runtime (`worker_threads` = [`common::procs`]), each workload's body in a task of its own,
//! with `tokio::sync::Mutex` (a waiting task is parked, not its thread), `task::yield_now`,
//! `time::sleep` (its wheel rounds a deadline up to the next 1 ms tick: sleep lateness
//! measures that) and, for echo, `tokio::net` (a task per connection). Channels: no
//! rendezvous one, so `mpsc::channel(1)` (chain and chainbuf are then one program), and a
//! `oneshot` per parked task for spawn-and-park ([`Tasks::once`]).

use std::future::Future;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::Contender;
use crate::workloads::tasks::{self, Tasks};
use crate::workloads::{self as common, Workload};

/// The runtime every workload runs on.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(common::procs())
        .enable_all()
        .build()
}

/// tokio.
pub struct Tokio;

impl Contender for Tokio {
    fn name(&self) -> &'static str {
        "tokio"
    }
    fn supports(&self, w: &Workload) -> bool {
        // The async suite's pure-tokio client is ecosystem/'s `slow_gets tokio`.
        super::in_comparison(w) || w.suite == common::Suite::Async
    }
    fn note(&self, w: &Workload) -> Option<&'static str> {
        matches!(w.name(), "chain" | "chainbuf" | "sieve" | "pingpong")
            .then_some("no rendezvous channel: tokio::sync::mpsc::channel(1)")
    }
    fn run(&self, w: &Workload) -> common::Outcome {
        let rt = runtime().map_err(|e| format!("tokio: cannot build the runtime: {e}"))?;
        let name = w.name();
        let outcome = rt.block_on(async move {
            match tokio::spawn(tasks::run::<Tokio>(name)).await {
                Ok(outcome) => outcome.unwrap_or_else(|| Err(format!("no tokio workload {name}"))),
                Err(e) => Err(format!("tokio: the workload task failed: {e}")),
            }
        });
        rt.shutdown_background();
        outcome
    }
    fn serve(&self, addr: std::net::SocketAddr) -> std::io::Result<()> {
        runtime()?.block_on(async {
            let listener = TcpListener::bind(addr).await?;
            super::listening(listener.local_addr()?)?;
            loop {
                match listener.accept().await {
                    Ok((conn, _)) => drop(tokio::spawn(echo(conn))),
                    Err(e) => {
                        // EMFILE and the like: back off instead of spinning.
                        eprintln!("compare serve tokio: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        })
    }
}

/// The sending half of a tokio channel: `mpsc`, or a `oneshot` until it is used.
pub enum Tx<T> {
    Many(mpsc::Sender<T>),
    Once(Option<oneshot::Sender<T>>),
}

/// The receiving half of [`Tx`].
pub enum Rx<T> {
    Many(mpsc::Receiver<T>),
    Once(Option<oneshot::Receiver<T>>),
}

impl Tasks for Tokio {
    type Handle<T: Send + 'static> = JoinHandle<T>;
    type Tx<T: Send + 'static> = Tx<T>;
    type Rx<T: Send + 'static> = Rx<T>;
    type Mutex = tokio::sync::Mutex<u64>;
    fn spawn<T: Send + 'static, F: Future<Output = T> + Send + 'static>(
        f: impl FnOnce() -> F + Send + 'static,
    ) -> Result<JoinHandle<T>, String> {
        Ok(tokio::spawn(f()))
    }
    async fn join<T: Send + 'static>(h: JoinHandle<T>) -> Result<T, String> {
        h.await.map_err(|e| format!("tokio: a task failed: {e}"))
    }
    /// Capacity `cap.max(1)`: tokio has no rendezvous channel.
    fn channel<T: Send + 'static>(cap: usize) -> (Tx<T>, Rx<T>) {
        let (tx, rx) = mpsc::channel(cap.max(1));
        (Tx::Many(tx), Rx::Many(rx))
    }
    fn once<T: Send + 'static>() -> (Tx<T>, Rx<T>) {
        let (tx, rx) = oneshot::channel();
        (Tx::Once(Some(tx)), Rx::Once(Some(rx)))
    }
    async fn send<T: Send + 'static>(tx: &mut Tx<T>, v: T) -> bool {
        match tx {
            Tx::Many(tx) => tx.send(v).await.is_ok(),
            Tx::Once(tx) => tx.take().is_some_and(|tx| tx.send(v).is_ok()),
        }
    }
    async fn recv<T: Send + 'static>(rx: &mut Rx<T>) -> Option<T> {
        match rx {
            Rx::Many(rx) => rx.recv().await,
            Rx::Once(rx) => rx.take()?.await.ok(),
        }
    }
    async fn yield_now(times: usize) {
        for _ in 0..times {
            tokio::task::yield_now().await;
        }
    }
    fn sleep(d: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }
    fn mutex() -> tokio::sync::Mutex<u64> {
        tokio::sync::Mutex::new(0)
    }
    async fn increment(m: &tokio::sync::Mutex<u64>, times: usize) {
        for _ in 0..times {
            *m.lock().await += 1;
        }
    }
    async fn count(m: &tokio::sync::Mutex<u64>) -> u64 {
        *m.lock().await
    }
}

/// Echoes one connection (TCP_NODELAY, a 16 KiB buffer) until EOF or an error.
async fn echo(mut conn: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if conn.set_nodelay(true).is_err() {
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n @ 1..) = conn.read(&mut buf).await {
        if conn.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
