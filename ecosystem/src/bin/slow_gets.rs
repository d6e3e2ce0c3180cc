//! `slow_gets MODE N URL_BASE`: N concurrent GETs of `URL_BASE/<id>` (id 0..N) with one
//! shared reqwest client, every answer checked (its body must be its id); the load of
//! `compare`'s `slow_gets` rows (bench/src/harness/orchestrate.rs), against a
//! `slow_server` child. MODE:
//!
//! - `goro`: N coroutines (`goro::go!`), each `goro::tokio::block_on(the request)`;
//! - `recipe`: the old recipe, N coroutines each `goro::blocking(|| handle.block_on(..))`
//!   on a tokio multi-thread runtime of its own (one OS thread per request in flight;
//!   past `GORO_MAX_THREADS`, default 10 000, goro stops the process: a result too);
//! - `tokio`: pure tokio, N `tokio::spawn`ed tasks on a multi-thread runtime.
//!
//! The tokio runtimes of `recipe` and `tokio` have `GORO_MAXPROCS` workers (default 2),
//! as goro has Ps. Prints one JSON line, `{"mode", "n", "wall_ms", "req_per_s",
//! "peak_threads", "peak_rss_kib", "cpu_ms", "errors"}`, and exits 1 if any answer is wrong (or
//! missing). `wall_ms` runs from the first spawn to the last answer checked;
//! `peak_threads` is the most threads the process had meanwhile (sampled every ms,
//! the sampler's own thread not counted), `peak_rss_kib` its VmHWM at the end, `cpu_ms`
//! its CPU time (user + system) over the run, runtime start-up left out (the sampler's
//! included, a few ms).

use std::time::{Duration, Instant};

use goro_ecosystem::{raise_fd_limit, ThreadPeak};

/// One GET: its body, or why there is none.
async fn get(client: &reqwest::Client, url: &str) -> Result<String, String> {
    let resp = client.get(url).send().await.map_err(|e| e.to_string())?;
    let resp = resp.error_for_status().map_err(|e| e.to_string())?;
    resp.text().await.map_err(|e| e.to_string())
}

/// Whether request `id` was answered right; says why not on stderr (the first few).
/// How many of the coroutines' checks failed (a panicked one counts as failed).
fn wrong_answers(handles: Vec<goro::JoinHandle<bool>>) -> u64 {
    handles
        .into_iter()
        .map(|h| h.join().unwrap_or(false))
        .filter(|ok| !ok)
        .count() as u64
}

fn check(id: u64, got: Result<String, String>, shown: &std::sync::atomic::AtomicUsize) -> bool {
    let want = id.to_string();
    let why = match got {
        Ok(body) if body == want => return true,
        Ok(body) => format!("body {body:?}, expected {want:?}"),
        Err(e) => e,
    };
    if shown.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 5 {
        eprintln!("slow_gets: request {id}: {why}");
    }
    false
}

static SHOWN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("a reqwest client")
}

/// `GORO_MAXPROCS`, default 2: the tokio runtimes' worker count.
fn procs() -> usize {
    std::env::var("GORO_MAXPROCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(2)
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(procs())
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The wrong answers, and the time from the first spawn to the last check.
type Outcome = (u64, Duration);

fn goro_mode(n: u64, base: &str) -> Outcome {
    // Start goro's scheduler and its tokio runtime before the clock, as Go's runtime
    // and pure tokio's are started before theirs.
    goro::go!(|| goro::tokio::block_on(async {}))
        .join()
        .unwrap();
    let client = client();
    let t = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|id| {
            let (client, url) = (client.clone(), format!("{base}/{id}"));
            goro::go!(move || check(id, goro::tokio::block_on(get(&client, &url)), &SHOWN))
        })
        .collect();
    (wrong_answers(handles), t.elapsed())
}

fn recipe_mode(n: u64, base: &str) -> Outcome {
    goro::go!(|| ()).join().unwrap();
    let rt = tokio_runtime();
    let client = client();
    let t = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|id| {
            let (client, url) = (client.clone(), format!("{base}/{id}"));
            let handle = rt.handle().clone();
            goro::go!(move || {
                let got = goro::blocking(|| handle.block_on(get(&client, &url)));
                check(id, got, &SHOWN)
            })
        })
        .collect();
    let wrong = wrong_answers(handles);
    let elapsed = t.elapsed();
    rt.shutdown_background();
    (wrong, elapsed)
}

fn tokio_mode(n: u64, base: &str) -> Outcome {
    let rt = tokio_runtime();
    let client = client();
    let base = base.to_owned();
    let outcome = rt.block_on(async move {
        let t = Instant::now();
        let tasks: Vec<_> = (0..n)
            .map(|id| {
                let (client, url) = (client.clone(), format!("{base}/{id}"));
                tokio::spawn(async move { check(id, get(&client, &url).await, &SHOWN) })
            })
            .collect();
        let mut wrong = 0;
        for task in tasks {
            if !task.await.unwrap_or(false) {
                wrong += 1;
            }
        }
        (wrong, t.elapsed())
    });
    rt.shutdown_background();
    outcome
}

/// The CPU time (user + system) of this process so far, ms.
fn cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage for our own process.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return f64::NAN;
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

/// This process's peak resident set (VmHWM), KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let v = s.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
            v.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or(0)
}

fn main() {
    raise_fd_limit();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, n, base) = match &args[..] {
        [mode, n, base] if n.parse::<u64>().is_ok() => (
            mode.as_str(),
            n.parse::<u64>().unwrap(),
            base.trim_end_matches('/'),
        ),
        _ => {
            eprintln!("usage: slow_gets goro|recipe|tokio N URL_BASE");
            std::process::exit(2);
        }
    };
    let run = match mode {
        "goro" => goro_mode,
        "recipe" => recipe_mode,
        "tokio" => tokio_mode,
        _ => {
            eprintln!("slow_gets: no mode {mode:?} (goro, recipe or tokio)");
            std::process::exit(2);
        }
    };
    let peak = ThreadPeak::start();
    let cpu0 = cpu_ms();
    let (wrong, wall) = run(n, base);
    let cpu = cpu_ms() - cpu0;
    // The sampler's own thread is not the contender's.
    let peak_threads = peak.peak().saturating_sub(1);
    drop(peak);
    let wall_ms = wall.as_secs_f64() * 1e3;
    println!(
        "{{\"mode\":\"{mode}\",\"n\":{n},\"wall_ms\":{wall_ms:.3},\"req_per_s\":{:.1},\
         \"peak_threads\":{peak_threads},\"peak_rss_kib\":{},\"cpu_ms\":{cpu:.1},\
         \"errors\":{wrong}}}",
        n as f64 / wall.as_secs_f64(),
        peak_rss_kib()
    );
    if wrong > 0 {
        eprintln!("slow_gets: {wrong} of {n} answers wrong or missing");
        std::process::exit(1);
    }
}
