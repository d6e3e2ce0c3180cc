//! `slow_server MS [WORKERS]`: answers every HTTP request after MS milliseconds with its
//! path (see `goro_ecosystem::serve`).

fn main() {
    let mut args = std::env::args().skip(1);
    let ms: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: slow_server MS [WORKERS]");
    let workers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    goro_ecosystem::raise_fd_limit();
    goro_ecosystem::serve(std::time::Duration::from_millis(ms), workers)
}
