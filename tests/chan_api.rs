//! The std-shaped channel API (issue 18): unbounded channels (sends that never wait,
//! memory given back once drained), from coroutines and plain threads.
//!
//! Memory is measured through a counting global allocator that keeps, per thread, the
//! bytes allocated minus the bytes freed: a test that allocates and frees on one plain
//! thread sees only its own allocations, whatever the other tests do meanwhile.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use common::with_timeout;
use goro::chan::{after, channel, never, unbounded, SendError, Sender, TryRecvError};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

// ---- the counting allocator ----

/// The system allocator, counting each thread's live bytes in [`LIVE_BYTES`].
struct Counting;

thread_local! {
    /// Bytes this thread allocated minus the bytes it freed (a block freed on another
    /// thread than the one that allocated it moves bytes between the two counts).
    /// `const` and without a destructor, so reading it never allocates.
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // try_with: during a thread's teardown the count may be gone; that is no loss.
    let _ = LIVE_BYTES.try_with(|c| c.set(c.get() + delta));
}

fn live_bytes() -> isize {
    LIVE_BYTES.with(|c| c.get())
}

// SAFETY: every method forwards to `System` with the caller's arguments, so `System`'s
// guarantees are ours; the bookkeeping touches only a thread-local counter and never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller keeps GlobalAlloc::alloc's contract, which System's needs.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in alloc.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from System, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in dealloc, and the caller keeps realloc's contract on `new_size`.
        let q = unsafe { System.realloc(ptr, layout, new_size) };
        if !q.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// ---- helpers ----

/// Runs `check` on the calling plain thread, then on a coroutine.
fn on_thread_and_coroutine(check: fn()) {
    check();
    goro::go!(check).join().unwrap();
}

// ---- unbounded ----

/// 100 000 sends from four coroutines and a plain thread, with nobody receiving, all
/// complete; then every value arrives once, each sender's in the order it sent them.
#[test]
fn unbounded_sends_never_wait() {
    with_timeout(T, || {
        const PER_SENDER: u32 = 20_000;
        const SENDERS: usize = 5;
        let (tx, rx) = unbounded::<(usize, u32)>();
        assert_eq!((tx.capacity(), rx.capacity()), (usize::MAX, usize::MAX));
        let send = |tx: Sender<(usize, u32)>, s: usize| {
            move || {
                for i in 0..PER_SENDER {
                    tx.send((s, i)).unwrap();
                }
            }
        };
        let coroutines: Vec<_> = (0..SENDERS - 1)
            .map(|s| goro::go!(send(tx.clone(), s)))
            .collect();
        let thread = std::thread::spawn(send(tx.clone(), SENDERS - 1));
        // Nobody receives until every sender has finished: none of them may wait.
        coroutines.into_iter().for_each(|h| h.join().unwrap());
        thread.join().unwrap();
        assert_eq!(rx.len(), SENDERS * PER_SENDER as usize);
        drop(tx);
        let received = goro::go!(move || {
            let mut next = [0u32; SENDERS];
            for (s, i) in rx.iter() {
                assert_eq!(i, next[s], "sender {s} out of order");
                next[s] += 1;
            }
            next
        });
        assert_eq!(received.join().unwrap(), [PER_SENDER; SENDERS]);
    });
}

/// A drained unbounded channel gives its buffer's memory back, round after round; and
/// a bounded channel allocates as it fills, never its capacity up front nor past it.
#[test]
fn unbounded_memory_is_given_back_when_drained() {
    with_timeout(T, || {
        // All on this plain thread: LIVE_BYTES sees just these allocations.
        let (tx, rx) = unbounded::<u64>();
        let base = live_bytes();
        for round in 0..3u64 {
            for i in 0..100_000 {
                tx.send(round * 100_000 + i).unwrap();
            }
            let grown = live_bytes() - base;
            assert!(
                grown >= 800_000,
                "round {round}: 100 000 u64 in {grown} bytes?"
            );
            for i in 0..100_000 {
                assert_eq!(rx.try_recv(), Ok(round * 100_000 + i));
            }
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            let kept = live_bytes() - base;
            assert!(
                kept < 4096,
                "round {round}: a drained channel kept {kept} of {grown} bytes"
            );
        }

        // A huge capacity costs nothing until used (it used to reserve it: an
        // allocation failure, or for usize::MAX a capacity-overflow panic).
        let base = live_bytes();
        let (big_tx, big_rx) = channel::<u64>(1 << 40);
        let (max_tx, max_rx) = channel::<u64>(usize::MAX);
        assert!(
            live_bytes() - base < 4096,
            "a channel reserved its capacity"
        );
        assert_eq!(max_tx.capacity(), usize::MAX);
        big_tx.send(1).unwrap();
        max_tx.send(2).unwrap();
        assert_eq!((big_rx.recv(), max_rx.recv()), (Ok(1), Ok(2)));

        // A bounded buffer grows to its capacity and not past it (600 slots, not
        // the 1024 that doubling would give), and is full there.
        let (tx, rx) = channel::<u64>(600);
        let base = live_bytes();
        for i in 0..600 {
            tx.try_send(i).unwrap();
        }
        assert!(tx.try_send(600).unwrap_err().is_full());
        let used = live_bytes() - base;
        assert!(
            (600 * 8..=600 * 8 + 1024).contains(&used),
            "600 u64 buffered in {used} bytes"
        );
        assert_eq!(rx.iter().take(600).count(), 600);
    });
}

/// `select!` on an unbounded channel: a send arm is always ready (nobody receiving),
/// a receive arm parks until a value comes, and a closed channel fails the send arm.
#[test]
fn unbounded_in_select() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let (tx, rx) = unbounded::<u32>();
            for i in 0..1000 {
                goro::select! {
                    send(tx, i) -> r => r.unwrap(),
                    default => panic!("an unbounded send arm is always ready"),
                }
            }
            // Without a default too, beside an arm that is never ready.
            goro::select! {
                send(tx, 1000) -> r => r.unwrap(),
                recv(never::<u8>()) -> _ => unreachable!(),
            }
            assert_eq!(rx.len(), 1001);
            assert!(rx.try_iter().take(1001).eq(0..=1000));

            // A receive arm waits for a sender on a plain thread, then on a coroutine.
            for sender_on_thread in [true, false] {
                let tx2 = tx.clone();
                let send_later = move || {
                    goro::time::sleep(Duration::from_millis(5));
                    tx2.send(7).unwrap();
                };
                let h: Box<dyn FnOnce() + Send> = if sender_on_thread {
                    let h = std::thread::spawn(send_later);
                    Box::new(move || h.join().unwrap())
                } else {
                    let h = goro::go!(send_later);
                    Box::new(move || h.join().unwrap())
                };
                let got = goro::select! {
                    recv(rx) -> v => v,
                    recv(after(Duration::from_secs(60))) -> _ => panic!("no value in 60 s"),
                };
                assert_eq!(got, Ok(7));
                h();
            }

            drop(rx);
            goro::select! {
                send(tx, 9) -> r => assert_eq!(r, Err(SendError(9))),
                default => panic!("a closed channel's send arm is ready"),
            }
        });
    });
}
