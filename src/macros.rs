/// Spawns a coroutine, like Go's `go` statement, and returns its
/// [`JoinHandle`](crate::JoinHandle).
///
/// ```
/// let (a, b) = (goro::go!(|| 1), goro::go!(move || 2));
/// assert_eq!(a.join().unwrap() + b.join().unwrap(), 3);
/// ```
///
/// # Panics
///
/// If no stack can be allocated; use [`Builder::spawn`](crate::Builder::spawn) to get
/// the error instead.
#[macro_export]
macro_rules! go {
    ($f:expr) => {
        $crate::spawn($f)
    };
}
