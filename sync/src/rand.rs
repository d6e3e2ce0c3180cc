//! A cheap per-thread random number source, for back-off delays and `select!`'s
//! choice among ready arms.

use std::cell::Cell;

thread_local! {
    static RNG: Cell<u32> = const { Cell::new(0) };
}

/// A xorshift32 step on a per-thread state. `#[inline(never)]`: called from
/// coroutines, which may migrate between threads (see goro-runtime's caveats).
#[inline(never)]
pub(crate) fn rand() -> u32 {
    RNG.with(|r| {
        let mut x = r.get();
        if x == 0 {
            // Seed from the state's address, distinct per thread.
            x = (r as *const Cell<u32> as usize as u32) | 1;
        }
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        r.set(x);
        x
    })
}
