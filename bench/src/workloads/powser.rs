//! Power series as streams: every series is a coroutine that hands out its rational
//! coefficients one at a time, on demand, over channels, and every operation on series
//! (sum, product, derivative, integral, reciprocal, exponential, substitution) is a
//! coroutine reading from the coroutines of its operands.
//!
//! The idea is Doug McIlroy's ("Squinting at Power Series"), and this is a Rust port of
//! the structure of Go's `test/chan/powser1.go` (the `Powser` of the GOMAXPROCS 1.5
//! scheduler benchmarks, golang.org/s/go15gomaxprocs): a series is a pair of unbuffered
//! channels, one for requests and one for the coefficients; `split` makes two series
//! out of one with a growing family of coroutines; `get2` reads two series at once with
//! `select!`. A run computes the series of Go's test plus tan x, and checks ten
//! coefficients of each against exact rationals.
//!
//! `cargo run --release -p goro-bench --example powser` prints the coefficients and the
//! time per coefficient fetched from a stream.
//!
//! Differences from Go's program: every run has its own context ([`Ctx`]) that
//! records the channels and coroutines it creates, so that [`Ctx::shutdown`] can close
//! all of them and wait for every coroutine to end (Go's program just exits, leaving
//! them blocked); series are not shared between checks (each check builds its own
//! `Ones`); the end-of-series mark is sent once (Go's `Integ` sends it twice); and the
//! run also computes tan x = sin x / cos x, with sin and cos defined by each other
//! (sin = ∫cos, cos = 1 - ∫sin), which exercises `Recip`.
//!
//! The `Powser` workload of the `chan` suite, `benches/chan.rs` and the example time
//! [`run`].

use std::fmt;
use std::ops::{Add, Mul, Neg};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, RecvError, SendError, Sender};

// ---- rationals ----

/// A rational number in lowest terms with a positive denominator; a zero denominator
/// marks the end of a finite series ([`Rat::END`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Rat {
    num: i64,
    den: i64,
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i64::try_from(a).expect("gcd overflow")
}

impl Rat {
    /// 0.
    pub const ZERO: Rat = Rat { num: 0, den: 1 };
    /// 1.
    pub const ONE: Rat = Rat { num: 1, den: 1 };
    /// The end of a finite series.
    pub const END: Rat = Rat { num: 1, den: 0 };

    /// num / den in lowest terms.
    ///
    /// # Panics
    ///
    /// If `den` is zero.
    pub fn new(num: i64, den: i64) -> Rat {
        assert!(den != 0, "rational with a zero denominator");
        let g = gcd(num, den);
        let (num, den) = (num / g, den / g);
        if den < 0 {
            Rat {
                num: -num,
                den: -den,
            }
        } else {
            Rat { num, den }
        }
    }

    /// The integer n.
    pub fn int(n: i64) -> Rat {
        Rat { num: n, den: 1 }
    }

    /// Whether this is the end mark.
    pub fn is_end(self) -> bool {
        self.den == 0
    }

    /// 1 / self.
    ///
    /// # Panics
    ///
    /// If self is zero.
    pub fn recip(self) -> Rat {
        assert!(self.num != 0, "reciprocal of zero");
        Rat::new(self.den, self.num)
    }
}

/// Panics on overflow, which would make the coefficients wrong.
fn checked(x: Option<i64>) -> i64 {
    x.expect("rational arithmetic overflowed i64")
}

impl Add for Rat {
    type Output = Rat;
    fn add(self, o: Rat) -> Rat {
        debug_assert!(!self.is_end() && !o.is_end());
        let g = gcd(self.den, o.den);
        let (a, b) = (self.den / g, o.den / g);
        let num =
            checked(checked(self.num.checked_mul(b)).checked_add(checked(o.num.checked_mul(a))));
        Rat::new(num, checked(self.den.checked_mul(b)))
    }
}

impl Mul for Rat {
    type Output = Rat;
    fn mul(self, o: Rat) -> Rat {
        debug_assert!(!self.is_end() && !o.is_end());
        // Cancel across first, so the products stay small; the result is then in
        // lowest terms already.
        let g1 = gcd(self.num, o.den);
        let g2 = gcd(o.num, self.den);
        let num = checked((self.num / g1).checked_mul(o.num / g2));
        let den = checked((self.den / g2).checked_mul(o.den / g1));
        Rat { num, den }
    }
}

impl Neg for Rat {
    type Output = Rat;
    fn neg(self) -> Rat {
        Rat {
            num: -self.num,
            den: self.den,
        }
    }
}

impl fmt::Display for Rat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_end() {
            write!(f, "end")
        } else if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

// ---- streams ----

/// The reading end of a series: send a request, receive the next coefficient.
#[derive(Clone)]
pub struct Series {
    req: Sender<()>,
    dat: Receiver<Rat>,
}

/// The writing end of a series: receive a request, send the next coefficient.
#[derive(Clone)]
struct Feed {
    req: Receiver<()>,
    dat: Sender<Rat>,
}

/// A channel of the context was closed: the computation is being torn down.
#[derive(Debug)]
pub struct Closed;

impl<T> From<SendError<T>> for Closed {
    fn from(_: SendError<T>) -> Closed {
        Closed
    }
}

impl From<RecvError> for Closed {
    fn from(_: RecvError) -> Closed {
        Closed
    }
}

type Res<T = ()> = Result<T, Closed>;

/// What one computation created, so that it can be torn down: every channel (to close)
/// and every coroutine (to join); and the count of coefficients fetched from streams.
#[derive(Clone)]
pub struct Ctx {
    inner: Arc<Inner>,
}

struct Inner {
    gets: AtomicU64,
    reg: goro::sync::Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    closed: bool,
    signals: Vec<Sender<()>>,
    data: Vec<Sender<Rat>>,
    coroutines: Vec<goro::JoinHandle<()>>,
}

impl Default for Ctx {
    fn default() -> Self {
        Ctx::new()
    }
}

impl Ctx {
    /// An empty context.
    pub fn new() -> Ctx {
        Ctx {
            inner: Arc::new(Inner {
                gets: AtomicU64::new(0),
                reg: goro::sync::Mutex::new(Registry::default()),
            }),
        }
    }

    /// Coefficients fetched from streams so far (by `get` and `get2`, in every
    /// coroutine of the context).
    pub fn gets(&self) -> u64 {
        self.inner.gets.load(Ordering::Relaxed)
    }

    /// An unbuffered signal channel, closed at shutdown.
    fn signal(&self) -> (Sender<()>, Receiver<()>) {
        let (tx, rx) = channel(0);
        let mut reg = self.inner.reg.lock();
        if reg.closed {
            tx.close();
        } else {
            reg.signals.push(tx.clone());
        }
        (tx, rx)
    }

    /// A new series: its writing and reading ends.
    fn series(&self) -> (Feed, Series) {
        let (req_tx, req_rx) = channel(0);
        let (dat_tx, dat_rx) = channel(0);
        {
            let mut reg = self.inner.reg.lock();
            if reg.closed {
                req_tx.close();
                dat_tx.close();
            } else {
                reg.signals.push(req_tx.clone());
                reg.data.push(dat_tx.clone());
            }
        }
        (
            Feed {
                req: req_rx,
                dat: dat_tx,
            },
            Series {
                req: req_tx,
                dat: dat_rx,
            },
        )
    }

    /// Starts a coroutine of the computation; it ends when `f` returns (normally or
    /// because a channel closed).
    fn go(&self, f: impl FnOnce(Ctx) -> Res + Send + 'static) {
        let ctx = self.clone();
        let h = goro::go!(move || {
            // `Closed` is the normal way out at shutdown.
            let _ = f(ctx);
        });
        self.inner.reg.lock().coroutines.push(h);
    }

    /// Closes every channel of the computation, which ends every coroutine (each one
    /// returns at its next or current channel operation), and waits for all of them.
    /// Fails if one panicked. Call it from a coroutine (it parks while joining).
    pub fn shutdown(&self) -> Result<(), String> {
        let (signals, data) = {
            let mut reg = self.inner.reg.lock();
            reg.closed = true;
            (
                std::mem::take(&mut reg.signals),
                std::mem::take(&mut reg.data),
            )
        };
        for s in &signals {
            s.close();
        }
        for s in &data {
            s.close();
        }
        // Coroutines started during the tear-down are joined too.
        loop {
            let batch = std::mem::take(&mut self.inner.reg.lock().coroutines);
            if batch.is_empty() {
                return Ok(());
            }
            for h in batch {
                h.join()
                    .map_err(|_| "powser: a series coroutine panicked".to_string())?;
            }
        }
    }

    fn count(&self, n: u64) {
        self.inner.gets.fetch_add(n, Ordering::Relaxed);
    }
}

/// Fetches the next coefficient of `s` (Go: `get`).
fn get(ctx: &Ctx, s: &Series) -> Res<Rat> {
    s.req.send(())?;
    let v = s.dat.recv()?;
    ctx.count(1);
    Ok(v)
}

/// Waits for a request on `f` and answers it with `v` (Go: `put`).
fn put(f: &Feed, v: Rat) -> Res {
    f.req.recv()?;
    f.dat.send(v)?;
    Ok(())
}

/// Where `get2` is with one of its two series.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The request is still to be sent.
    Ask,
    /// Requested; the coefficient is still to be received.
    Wait,
    /// Received.
    Done,
}

/// Which operation of `get2` completed: series 0 or 1, the request or the datum.
enum Step {
    Asked(usize),
    Got(usize, Rat),
}

/// Fetches one coefficient from each of two series at once, in whatever order they
/// come (Go: `getn` with n = 2, a select over the two requests and the two data
/// channels, a nil channel standing for a finished operation). With both series
/// pending this is a two-arm `select!`, with one a plain operation.
fn get2(ctx: &Ctx, a: &Series, b: &Series) -> Res<[Rat; 2]> {
    let s = [a, b];
    let mut phase = [Phase::Ask; 2];
    let mut out = [Rat::ZERO; 2];
    for _ in 0..4 {
        let step = match (phase[0], phase[1]) {
            (Phase::Done, Phase::Done) => unreachable!("get2: four steps make two gets"),
            (p, Phase::Done) => single(s[0], p, 0)?,
            (Phase::Done, p) => single(s[1], p, 1)?,
            (p0, p1) => both(s, [p0, p1])?,
        };
        match step {
            Step::Asked(i) => phase[i] = Phase::Wait,
            Step::Got(i, v) => {
                out[i] = v;
                phase[i] = Phase::Done;
            }
        }
    }
    ctx.count(2);
    Ok(out)
}

/// One pending operation of `get2`, done directly.
fn single(s: &Series, p: Phase, i: usize) -> Res<Step> {
    Ok(match p {
        Phase::Ask => {
            s.req.send(())?;
            Step::Asked(i)
        }
        _ => Step::Got(i, s.dat.recv()?),
    })
}

/// Two pending operations of `get2`: whichever completes first.
fn both(s: [&Series; 2], p: [Phase; 2]) -> Res<Step> {
    Ok(match p {
        [Phase::Ask, Phase::Ask] => goro::select! {
            send(s[0].req, ()) -> r => { r?; Step::Asked(0) },
            send(s[1].req, ()) -> r => { r?; Step::Asked(1) },
        },
        [Phase::Ask, _] => goro::select! {
            send(s[0].req, ()) -> r => { r?; Step::Asked(0) },
            recv(s[1].dat) -> r => Step::Got(1, r?),
        },
        [_, Phase::Ask] => goro::select! {
            recv(s[0].dat) -> r => Step::Got(0, r?),
            send(s[1].req, ()) -> r => { r?; Step::Asked(1) },
        },
        _ => goro::select! {
            recv(s[0].dat) -> r => Step::Got(0, r?),
            recv(s[1].dat) -> r => Step::Got(1, r?),
        },
    })
}

/// Answers every request on `to` with the next coefficient of `from`.
fn copy(ctx: &Ctx, from: &Series, to: &Feed) -> Res {
    loop {
        to.req.recv()?;
        let v = get(ctx, from)?;
        to.dat.send(v)?;
    }
}

// ---- split: one series read by two consumers at their own pace ----

/// One generation of a split (Go: `dosplit`): waits for the first request on either
/// output, fetches one coefficient from `input`, starts the next generation (which
/// serves further requests), and delivers the coefficient to both outputs — first to
/// the one that asked, then, once the previous generation is done (`wait`), to the
/// other. `out[0]` is the output the newest generation serves.
fn split_generation(ctx: Ctx, input: Series, mut out: [Feed; 2], wait: Receiver<()>) -> Res {
    let mut both = false;
    let mut swap = false;
    goro::select! {
        recv(out[0].req) -> r => r?,
        recv(wait) -> r => {
            r?;
            both = true;
            goro::select! {
                recv(out[0].req) -> r => r?,
                recv(out[1].req) -> r => { r?; swap = true; },
            }
        },
    }
    if swap {
        out.swap(0, 1);
    }
    input.req.send(())?;
    let (release, next_wait) = ctx.signal();
    {
        let (input, out) = (input.clone(), out.clone());
        ctx.go(move |ctx| split_generation(ctx, input, out, next_wait));
    }
    let v = input.dat.recv()?;
    ctx.count(1);
    out[0].dat.send(v)?;
    if !both {
        wait.recv()?;
    }
    out[1].req.recv()?;
    out[1].dat.send(v)?;
    release.send(())?;
    Ok(())
}

/// Makes the writing ends `out` copies of `input` (Go: `split`). Blocks until the first
/// generation has taken its start signal.
fn split_into(ctx: &Ctx, input: Series, out: [Feed; 2]) -> Res {
    let (release, wait) = ctx.signal();
    ctx.go(move |ctx| split_generation(ctx, input, out, wait));
    release.send(())?;
    Ok(())
}

/// Two copies of `u` (Go: `Split`).
fn split(ctx: &Ctx, u: Series) -> [Series; 2] {
    let (f0, s0) = ctx.series();
    let (f1, s1) = ctx.series();
    ctx.go(move |ctx| split_into(&ctx, u, [f0, f1]));
    [s0, s1]
}

// ---- series and operations ----

/// c, c, c, ... (Go: `Rep`).
pub fn rep(ctx: &Ctx, c: Rat) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |_| loop {
        put(&z, c)?;
    });
    zs
}

/// 1/(1-x) = 1 + x + x² + ...
pub fn ones(ctx: &Ctx) -> Series {
    rep(ctx, Rat::ONE)
}

/// 2/(1-x).
pub fn twos(ctx: &Ctx) -> Series {
    rep(ctx, Rat::int(2))
}

/// U + V.
pub fn add(ctx: &Ctx, u: Series, v: Series) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| loop {
        z.req.recv()?;
        let [a, b] = get2(&ctx, &u, &v)?;
        match (a.is_end(), b.is_end()) {
            (false, false) => z.dat.send(a + b)?,
            (true, false) => {
                z.dat.send(b)?;
                return copy(&ctx, &v, &z);
            }
            (false, true) => {
                z.dat.send(a)?;
                return copy(&ctx, &u, &z);
            }
            (true, true) => {
                z.dat.send(Rat::END)?;
                return Ok(());
            }
        }
    });
    zs
}

/// c·U.
pub fn cmul(ctx: &Ctx, c: Rat, u: Series) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| loop {
        z.req.recv()?;
        let a = get(&ctx, &u)?;
        if a.is_end() {
            z.dat.send(Rat::END)?;
            return Ok(());
        }
        z.dat.send(c * a)?;
    });
    zs
}

/// U - V.
pub fn sub(ctx: &Ctx, u: Series, v: Series) -> Series {
    let minus_v = cmul(ctx, -Rat::ONE, v);
    add(ctx, u, minus_v)
}

/// c + x·U.
pub fn shift(ctx: &Ctx, c: Rat, u: Series) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| {
        put(&z, c)?;
        copy(&ctx, &u, &z)
    });
    zs
}

/// U·V. With U = u + x·UU and V = v + x·VV:
/// U·V = u·v + x·(u·VV + v·UU) + x²·UU·VV.
pub fn mul(ctx: &Ctx, u: Series, v: Series) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| {
        z.req.recv()?;
        let [a, b] = get2(&ctx, &u, &v)?;
        if a.is_end() || b.is_end() {
            z.dat.send(Rat::END)?;
            return Ok(());
        }
        z.dat.send(a * b)?;
        let [uu0, uu1] = split(&ctx, u);
        let [vv0, vv1] = split(&ctx, v);
        let av = cmul(&ctx, a, vv0);
        let bu = cmul(&ctx, b, uu0);
        let w = add(&ctx, av, bu);
        z.req.recv()?;
        let first = get(&ctx, &w)?;
        z.dat.send(first)?;
        let rest = mul(&ctx, uu1, vv1);
        let tail = add(&ctx, w, rest);
        copy(&ctx, &tail, &z)
    });
    zs
}

/// dU/dx.
pub fn diff(ctx: &Ctx, u: Series) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| {
        z.req.recv()?;
        let a = get(&ctx, &u)?;
        if !a.is_end() {
            for i in 1.. {
                let a = get(&ctx, &u)?;
                if a.is_end() {
                    break;
                }
                z.dat.send(Rat::int(i) * a)?;
                z.req.recv()?;
            }
        }
        z.dat.send(Rat::END)?;
        Ok(())
    });
    zs
}

/// c + ∫U dx.
pub fn integ(ctx: &Ctx, c: Rat, u: Series) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| {
        put(&z, c)?;
        for i in 1.. {
            z.req.recv()?;
            let a = get(&ctx, &u)?;
            if a.is_end() {
                z.dat.send(Rat::END)?;
                return Ok(());
            }
            z.dat.send(Rat::new(1, i) * a)?;
        }
        Ok(())
    });
    zs
}

/// 1/U. With U = u + x·UU and 1/U = z + x·ZZ: z = 1/u and ZZ = -z·UU·(z + x·ZZ), a
/// series defined by itself, fed back through a split.
pub fn recip(ctx: &Ctx, u: Series) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| {
        let (f0, s0) = ctx.series();
        let (f1, s1) = ctx.series();
        z.req.recv()?;
        let r = get(&ctx, &u)?.recip();
        z.dat.send(r)?;
        let minus_ruu = cmul(&ctx, -r, u);
        let fed_back = shift(&ctx, r, s0);
        let zz = mul(&ctx, minus_ruu, fed_back);
        split_into(&ctx, zz, [f0, f1])?;
        copy(&ctx, &s1, &z)
    });
    zs
}

/// exp(U) for U with a zero constant term (the constant term is ignored, as in Go):
/// Z = exp(U) satisfies Z' = Z·U', so Z = 1 + ∫Z·U' dx, fed back through a split.
pub fn exp(ctx: &Ctx, u: Series) -> Res<Series> {
    let (f0, s0) = ctx.series();
    let (f1, s1) = ctx.series();
    let du = diff(ctx, u);
    let prod = mul(ctx, s0, du);
    let z = integ(ctx, Rat::ONE, prod);
    split_into(ctx, z, [f0, f1])?;
    Ok(s1)
}

/// U(c·xⁿ): coefficient i of U times cⁱ, followed by n - 1 zeros.
pub fn mon_subst(ctx: &Ctx, u: Series, c0: Rat, n: usize) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| {
        let mut c = Rat::ONE;
        loop {
            z.req.recv()?;
            let a = get(&ctx, &u)?;
            if a.is_end() {
                z.dat.send(Rat::END)?;
                return Ok(());
            }
            z.dat.send(a * c)?;
            c = c * c0;
            for _ in 1..n {
                z.req.recv()?;
                z.dat.send(Rat::ZERO)?;
            }
        }
    });
    zs
}

/// (sin x, cos x), defined by each other: sin = ∫cos, cos = 1 - ∫sin.
pub fn sin_cos(ctx: &Ctx) -> Res<(Series, Series)> {
    let (sin_f0, sin_s0) = ctx.series();
    let (sin_f1, sin_s1) = ctx.series();
    let (cos_f0, cos_s0) = ctx.series();
    let (cos_f1, cos_s1) = ctx.series();
    let sin = integ(ctx, Rat::ZERO, cos_s0);
    split_into(ctx, sin, [sin_f0, sin_f1])?;
    let minus_sin = cmul(ctx, -Rat::ONE, sin_s0);
    let cos = integ(ctx, Rat::ONE, minus_sin);
    split_into(ctx, cos, [cos_f0, cos_f1])?;
    Ok((sin_s1, cos_s1))
}

// ---- the run ----

/// Coefficients checked per series (Go's N).
pub const TERMS: usize = 10;

/// One computed series: its name and first coefficients.
pub type Computed = (&'static str, Vec<Rat>);

/// The series of one run and their expected first [`TERMS`] coefficients.
fn expected() -> Vec<(&'static str, Vec<Rat>)> {
    let n = TERMS as i64;
    let r = Rat::new;
    // exp(x/(1-x)) = Σ a(k) xᵏ / k!, with a(0) = a(1) = 1 and
    // a(k) = (2k-1)·a(k-1) - (k-1)(k-2)·a(k-2) (OEIS A000262).
    let mut a = vec![1i64, 1];
    for k in 2..n {
        a.push((2 * k - 1) * a[k as usize - 1] - (k - 1) * (k - 2) * a[k as usize - 2]);
    }
    let mut fact = 1i64;
    let exp: Vec<Rat> = (0..n)
        .map(|k| {
            if k > 0 {
                fact *= k;
            }
            r(a[k as usize], fact)
        })
        .collect();
    vec![
        ("ones", vec![Rat::ONE; 5]),
        ("ones+twos", vec![Rat::int(3); TERMS]),
        ("d/dx ones", (1..=n).map(Rat::int).collect()),
        (
            "∫ones",
            (0..n)
                .map(|k| if k == 0 { Rat::ZERO } else { r(1, k) })
                .collect(),
        ),
        ("-1·twos", vec![Rat::int(-2); TERMS]),
        ("ones-twos", vec![Rat::int(-1); TERMS]),
        ("ones·ones", (1..=n).map(Rat::int).collect()),
        ("exp(ones)", exp),
        (
            "atan",
            (0..n)
                .map(|k| match k % 4 {
                    1 => r(1, k),
                    3 => r(-1, k),
                    _ => Rat::ZERO,
                })
                .collect(),
        ),
        (
            "tan",
            vec![
                Rat::ZERO,
                Rat::ONE,
                Rat::ZERO,
                r(1, 3),
                Rat::ZERO,
                r(2, 15),
                Rat::ZERO,
                r(17, 315),
                Rat::ZERO,
                r(62, 2835),
            ],
        ),
    ]
}

/// Reads the first `n` coefficients of `s`.
fn take(ctx: &Ctx, s: &Series, n: usize) -> Res<Vec<Rat>> {
    (0..n).map(|_| get(ctx, s)).collect()
}

/// Computes the run's series in `ctx` (Go's test, plus tan x).
fn compute(ctx: &Ctx) -> Res<Vec<Computed>> {
    let n = TERMS;
    let mut out = Vec::new();
    out.push(("ones", take(ctx, &ones(ctx), 5)?));
    let s = add(ctx, ones(ctx), twos(ctx));
    out.push(("ones+twos", take(ctx, &s, n)?));
    let s = diff(ctx, ones(ctx));
    out.push(("d/dx ones", take(ctx, &s, n)?));
    let s = integ(ctx, Rat::ZERO, ones(ctx));
    out.push(("∫ones", take(ctx, &s, n)?));
    let s = cmul(ctx, -Rat::ONE, twos(ctx));
    out.push(("-1·twos", take(ctx, &s, n)?));
    let s = sub(ctx, ones(ctx), twos(ctx));
    out.push(("ones-twos", take(ctx, &s, n)?));
    let s = mul(ctx, ones(ctx), ones(ctx));
    out.push(("ones·ones", take(ctx, &s, n)?));
    let s = exp(ctx, ones(ctx))?;
    out.push(("exp(ones)", take(ctx, &s, n)?));
    // atan x = ∫ 1/(1+x²) dx, and 1/(1+x²) is ones with x replaced by -x².
    let s = integ(ctx, Rat::ZERO, mon_subst(ctx, ones(ctx), -Rat::ONE, 2));
    out.push(("atan", take(ctx, &s, n)?));
    let (sin, cos) = sin_cos(ctx)?;
    let s = mul(ctx, sin, recip(ctx, cos));
    out.push(("tan", take(ctx, &s, n)?));
    Ok(out)
}

/// The result of one run.
pub struct PowserRun {
    /// Each series and its coefficients.
    pub series: Vec<Computed>,
    /// Time to compute them (tear-down not included).
    pub elapsed: Duration,
    /// Coefficients fetched from streams, in all coroutines.
    pub gets: u64,
}

/// Computes and checks the series, in a fresh context which it then tears down. Call
/// it from a coroutine. Only the computation is timed. Fails if a coefficient is wrong
/// (or a coroutine panicked).
pub fn run() -> Result<PowserRun, String> {
    let ctx = Ctx::new();
    let start = Instant::now();
    let computed = compute(&ctx);
    let elapsed = start.elapsed();
    let gets = ctx.gets();
    ctx.shutdown()?;
    let series = computed.map_err(|Closed| "powser: a channel closed early".to_string())?;
    check(&series)?;
    Ok(PowserRun {
        series,
        elapsed,
        gets,
    })
}

/// Compares the computed coefficients with the expected ones, exactly.
pub fn check(series: &[Computed]) -> Result<(), String> {
    let want = expected();
    if series.len() != want.len() {
        return Err(format!(
            "powser: {} series computed, {} expected",
            series.len(),
            want.len()
        ));
    }
    for ((name, got), (wname, want)) in series.iter().zip(&want) {
        if name != wname || got != want {
            let show = |v: &[Rat]| {
                v.iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            return Err(format!(
                "powser: {name}: got {}, expected ({wname}) {}",
                show(got),
                show(want)
            ));
        }
    }
    Ok(())
}
