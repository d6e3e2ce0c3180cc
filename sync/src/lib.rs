//! goro-sync: synchronisation for goro coroutines and threads alike.
//!
//! This crate will hold the semaphore hash table and the primitives built on it —
//! `Mutex`, `RwLock`, `WaitGroup`, `Once`, `Cond`, `Semaphore` — and the channels with
//! `select!` (the sync and channels issues). Everything here blocks through
//! `goro_runtime::park` only, never through scheduler internals, which is what makes it
//! work from coroutines and plain threads in any mix.
//!
//! Until those land, the crate only re-exports the park API it will be built on.

pub use goro_runtime::park;
