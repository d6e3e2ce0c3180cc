//! Timer channels: [`after`], [`tick`], [`never`], and [`Ticker`].
//!
//! They are channels of capacity 1 fed by runtime timers (`goro_runtime::time::
//! RawTimer`), whose functions do a non-blocking send: a tick that finds the channel
//! full is dropped, as Go's ticker drops ticks a slow reader misses. They never close.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use goro_runtime::time::{RawTimer, WeakRawTimer};

use super::{channel_keep_open, Receiver, RecvError, Sender};

/// A channel that receives the current time once, after `d` (Go: `time.After`).
pub fn after(d: Duration) -> Receiver<Instant> {
    let (tx, rx) = channel_keep_open(1);
    // The timer holds the sender; once it has fired it is dropped with it.
    let t = RawTimer::new(move || {
        let _ = tx.try_send(Instant::now());
    });
    t.reset(d);
    rx
}

/// A channel that receives the time every `d`, dropping ticks a slow reader misses
/// (Go: `time.Tick`). The ticking stops once every receiver is dropped.
///
/// # Panics
///
/// If `d` is zero.
pub fn tick(d: Duration) -> Receiver<Instant> {
    assert!(!d.is_zero(), "non-positive interval for tick");
    let (tx, rx) = channel_keep_open(1);
    let me: Arc<OnceLock<WeakRawTimer>> = Arc::default();
    let me2 = me.clone();
    let t = RawTimer::new(move || {
        if tx.receiver_count() == 0 {
            if let Some(w) = me2.get() {
                w.stop();
            }
            return;
        }
        let _ = tx.try_send(Instant::now());
    });
    let _ = me.set(t.downgrade());
    t.reset_at(start_after(d), Some(d));
    rx
}

/// A channel that never receives anything (Go: a nil channel in a select).
pub fn never<T>() -> Receiver<T> {
    let (tx, rx) = channel_keep_open(1);
    drop(tx);
    rx
}

fn start_after(d: Duration) -> Instant {
    Instant::now()
        .checked_add(d)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(1 << 40))
}

/// A ticker: a channel that receives the time every period (Go: `time.Ticker`), with
/// Go 1.23's guarantee that once [`stop`](Ticker::stop) or [`reset`](Ticker::reset)
/// returns, no tick from before it can be received.
pub struct Ticker {
    rx: Receiver<Instant>,
    shared: Arc<Shared>,
}

struct Shared {
    tx: Sender<Instant>,
    /// Held by a firing while it sends, and by stop/reset while they drain: a firing
    /// that started before a stop either sends before the drain or sees the new
    /// generation and sends nothing.
    state: Mutex<State>,
}

struct State {
    /// Bumped by every stop and reset; a timer fires for the generation it was armed in.
    generation: u64,
    timer: Option<RawTimer>,
}

impl Ticker {
    /// A ticker firing every `period`, the first time `period` from now.
    ///
    /// # Panics
    ///
    /// If `period` is zero ("non-positive interval for Ticker::new", as Go's NewTicker).
    pub fn new(period: Duration) -> Ticker {
        assert!(!period.is_zero(), "non-positive interval for Ticker::new");
        let (tx, rx) = channel_keep_open(1);
        let shared = Arc::new(Shared {
            tx,
            state: Mutex::new(State {
                generation: 0,
                timer: None,
            }),
        });
        let t = Ticker { rx, shared };
        t.rearm(period);
        t
    }

    /// Waits for the next tick and returns its time.
    pub fn recv(&self) -> Instant {
        match self.rx.recv() {
            Ok(t) => t,
            Err(RecvError) => unreachable!("a ticker's channel never closes"),
        }
    }

    /// The channel the ticks arrive on (for `select!`).
    pub fn receiver(&self) -> &Receiver<Instant> {
        &self.rx
    }

    /// Stops the ticker; no tick from before this call will be received.
    pub fn stop(&self) {
        let mut st = self.lock();
        if let Some(t) = st.timer.take() {
            t.stop();
        }
        st.generation += 1;
        self.drain();
    }

    /// Makes the ticker fire every `period` from now on; no tick from before this call
    /// will be received.
    ///
    /// # Panics
    ///
    /// If `period` is zero ("non-positive interval for Ticker::reset").
    pub fn reset(&self, period: Duration) {
        assert!(!period.is_zero(), "non-positive interval for Ticker::reset");
        self.rearm(period);
    }

    fn rearm(&self, period: Duration) {
        let mut st = self.lock();
        if let Some(t) = st.timer.take() {
            t.stop();
        }
        st.generation += 1;
        self.drain();
        let generation = st.generation;
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let t = RawTimer::new(move || {
            let Some(shared) = weak.upgrade() else { return };
            let st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.generation == generation {
                let _ = shared.tx.try_send(Instant::now());
            }
        });
        t.reset_at(start_after(period), Some(period));
        st.timer = Some(t);
    }

    fn drain(&self) {
        while self.rx.try_recv().is_ok() {}
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Ticker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticker").finish_non_exhaustive()
    }
}
