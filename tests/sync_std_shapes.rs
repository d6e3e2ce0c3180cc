//! std's exact shapes in goro::sync and goro::chan: what code written against
//! `std::sync` (and std's own tests, rewritten onto goro) needs to compile and behave
//! the same. Each test names the std test or std API it follows; most of them are
//! checked by the compiler, so without the fix this file does not build.

mod common;

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe, RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{on_thread_and_coroutine, with_timeout};
use goro::chan::{channel, Receiver, Sender};
use goro::sync::{
    Barrier, Cond, LazyLock, Mutex, MutexGuard, Notify, Once, OnceLock, OnceState, RwLock,
    RwLockReadGuard, RwLockWriteGuard,
};

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}

/// std's types are `UnwindSafe` and `RefUnwindSafe`; goro's counterparts are too, so a
/// `&goro::sync::Mutex` crosses `catch_unwind` without `AssertUnwindSafe`.
#[test]
fn unwind_safe_where_std_is() {
    unwind_safe::<Mutex<Vec<u8>>>();
    unwind_safe::<MutexGuard<'static, Vec<u8>>>();
    unwind_safe::<RwLock<Vec<u8>>>();
    unwind_safe::<RwLockReadGuard<'static, Vec<u8>>>();
    unwind_safe::<RwLockWriteGuard<'static, Vec<u8>>>();
    unwind_safe::<Cond>();
    unwind_safe::<Barrier>();
    unwind_safe::<Notify>();
    unwind_safe::<Once>();
    unwind_safe::<OnceLock<u8>>();
    unwind_safe::<Sender<Vec<u8>>>();
    unwind_safe::<Receiver<Vec<u8>>>();
}

/// std's `check_barrier_is_ref_unwind_safe` (library/std/tests/sync/barrier.rs), and
/// the same for the locks: a closure that borrows them is `UnwindSafe` as it is.
#[test]
fn check_barrier_is_ref_unwind_safe() {
    let barrier = Barrier::new(1);
    let mutex = Mutex::new(1);
    let lock = RwLock::new(2);
    let cond = Cond::new();
    let (tx, rx) = channel::<i32>(1);
    let r = catch_unwind(|| {
        barrier.wait();
        *mutex.lock() += 1;
        *lock.write() += 1;
        cond.notify_all();
        tx.send(3).unwrap();
        rx.recv().unwrap()
    });
    assert_eq!(r.unwrap(), 3);
    assert_eq!((*mutex.lock(), *lock.read()), (2, 3));
}

/// std's `test_rwlock_covariant` shape: a read guard is covariant in `T`, so a guard of
/// `&'long i32` can be used where `&'short i32` is wanted.
#[test]
fn rwlock_read_guard_is_covariant() {
    fn same<'a>(guard: RwLockReadGuard<'_, &'a i32>, other: &'a i32) -> i32 {
        **guard + *other
    }
    static ONE: i32 = 1;
    let lock: RwLock<&'static i32> = RwLock::new(&ONE);
    let two = 2; // lives shorter than 'static
    assert_eq!(same(lock.read(), &two), 3);
}

/// std's `dropck` test of OnceLock (library/std/tests/sync/once_lock.rs): a cell may
/// hold a reference that dies before the cell does.
#[test]
fn oncelock_dropck() {
    let cell = OnceLock::new();
    {
        let s = String::new();
        cell.set(&s).unwrap();
    }
}

/// std's message for a LazyLock whose initialiser panicked, on every later use.
#[test]
fn lazylock_poisoned_says_what_std_says() {
    let lazy: LazyLock<i32> = LazyLock::new(|| panic!("the first initialiser fails"));
    assert!(catch_unwind(AssertUnwindSafe(|| *lazy)).is_err());
    let second = catch_unwind(AssertUnwindSafe(|| *lazy)).unwrap_err();
    assert_eq!(
        goro::panic_message(&*second),
        "LazyLock instance has previously been poisoned"
    );
}

/// std's `test_invalid_named_thread` (which expects a panic): goro's builder reports
/// the NUL as a typed error instead, which `.unwrap()` turns into a panic.
#[test]
fn name_with_a_nul_is_invalid_input() {
    let err = goro::Builder::new()
        .name("ab\0")
        .spawn(|| {})
        .expect_err("a name with a NUL must be refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("null bytes"), "{err}");
    let ok = goro::Builder::new().name("ab").spawn(|| 1).unwrap();
    assert_eq!(ok.join().unwrap(), 1);
}

/// Go's channels are comparable: two ends are equal when they belong to one channel,
/// and they hash alike.
#[test]
// Equality and hash are the channel's address, which its interior state never changes.
#[allow(clippy::mutable_key_type)]
fn channel_ends_compare_and_hash_by_channel() {
    let (a, ra) = channel::<u8>(1);
    let (b, rb) = channel::<u8>(1);
    assert_eq!(a, a.clone());
    assert_ne!(a, b);
    assert_eq!(ra, ra.clone());
    assert_ne!(ra, rb);
    let senders: HashSet<Sender<u8>> = [a.clone(), a.clone(), b.clone()].into_iter().collect();
    assert_eq!(senders.len(), 2);
    assert!(senders.contains(&b));
    let receivers: HashSet<Receiver<u8>> = [ra.clone(), rb.clone(), rb].into_iter().collect();
    assert_eq!(receivers.len(), 2);
    assert!(receivers.contains(&ra));
}

/// std's `RwLockWriteGuard::downgrade` (its `test_rwlock_downgrade` shape): the
/// writer's value is what the reader sees, no writer gets in between, and readers
/// that queued behind the writer are let in.
#[test]
fn rwlock_downgrade_lets_readers_in_and_no_writer() {
    on_thread_and_coroutine(T, || {
        let lock = Arc::new(RwLock::new(0u32));
        let mut w = lock.write();
        // A reader and a writer queue behind the write hold.
        let l = lock.clone();
        let reader = goro::go!(move || *l.read());
        let l = lock.clone();
        let writer = goro::go!(move || {
            *l.write() += 100;
        });
        goro::time::sleep(Duration::from_millis(20));
        *w = 7;
        let r = RwLockWriteGuard::downgrade(w);
        assert_eq!(*r, 7);
        assert_eq!(
            reader.join().unwrap(),
            7,
            "the queued reader sees the writer's value"
        );
        assert!(
            lock.try_write().is_none(),
            "no writer while the downgraded hold lives"
        );
        assert_eq!(*r, 7);
        drop(r);
        writer.join().unwrap();
        assert_eq!(*lock.read(), 107);
    });
}

/// Many rounds of write, downgrade, read against writers: each downgraded reader sees
/// its own write.
#[test]
fn stress_rwlock_downgrade() {
    with_timeout(T, || {
        let lock = Arc::new(RwLock::new(0u64));
        let hs: Vec<_> = (0..8u64)
            .map(|i| {
                let l = lock.clone();
                goro::go!(move || {
                    for n in 0..500u64 {
                        let mut w = l.write();
                        let mine = i * 1_000_000 + n;
                        *w = mine;
                        let r = RwLockWriteGuard::downgrade(w);
                        assert_eq!(*r, mine);
                        if n % 16 == 0 {
                            goro::yield_now();
                            assert_eq!(*r, mine);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// std's `Once::call_once_force` and `OnceState`: goro's Once is never poisoned, so
/// the function runs once and the state says so.
#[test]
fn once_call_once_force() {
    let once = Once::new();
    let runs = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        once.call_once_force(|s: &OnceState| {
            assert!(!s.is_poisoned());
            runs.fetch_add(1, Ordering::SeqCst);
            panic!("a panic counts as done (Go's rule)");
        })
    }));
    assert!(r.is_err());
    once.call_once_force(|_| {
        runs.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(once.is_completed());
}

/// std's `Once::wait` (its `wait` test shape): waiters on coroutines and threads park
/// or block until some caller runs the function, and then all go on.
#[test]
fn once_wait_until_another_runs_it() {
    with_timeout(T, || {
        let once = Arc::new(Once::new());
        let done = Arc::new(AtomicUsize::new(0));
        let coroutines: Vec<_> = (0..20)
            .map(|_| {
                let (o, d) = (once.clone(), done.clone());
                goro::go!(move || {
                    o.wait();
                    assert_eq!(d.load(Ordering::SeqCst), 1, "the function's effects");
                })
            })
            .collect();
        let (o, d) = (once.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            o.wait_force();
            assert_eq!(d.load(Ordering::SeqCst), 1);
        });
        goro::time::sleep(Duration::from_millis(20));
        once.call_once(|| {
            done.store(1, Ordering::SeqCst);
        });
        for c in coroutines {
            c.join().unwrap();
        }
        thread.join().unwrap();
        once.wait(); // done: returns at once
    });
}

/// std's `OnceLock::wait`: waiters get the value a later `set` puts in; after `take`
/// they wait again.
#[test]
fn oncelock_wait_until_set() {
    with_timeout(T, || {
        let cell = Arc::new(OnceLock::new());
        let waiters: Vec<_> = (0..20)
            .map(|_| {
                let c = cell.clone();
                goro::go!(move || *c.wait())
            })
            .collect();
        goro::time::sleep(Duration::from_millis(20));
        cell.set(5u32).unwrap();
        for w in waiters {
            assert_eq!(w.join().unwrap(), 5);
        }
        let mut cell = Arc::try_unwrap(cell).unwrap();
        assert_eq!(cell.take(), Some(5));
        let cell = Arc::new(cell);
        let c = cell.clone();
        let waiter = goro::go!(move || *c.wait());
        goro::time::sleep(Duration::from_millis(10));
        let waiter = match waiter.join_timeout(Duration::ZERO) {
            Ok(v) => panic!("returned {v:?} from an emptied cell"),
            Err(still_waiting) => still_waiting,
        };
        cell.set(6).unwrap();
        assert_eq!(waiter.join().unwrap(), 6);
    });
}
