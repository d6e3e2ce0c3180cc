//! Power series as streams, after McIlroy's "Squinting at Power Series": Go's
//! `test/chan/powser1.go` (`Powser` of golang.org/s/go15gomaxprocs; Go's twin for `compare`
//! is in `bench/go/chan.go`). Each series, and each operation on series, is a coroutine
//! handing out coefficients on request over two unbuffered channels. A run checks ten
//! coefficients of each series.
//!
//! Unlike Go: a run's `Context` records its channels and coroutines so that the tear-down
//! can close and join them all (Go's program just exits); each check builds its own
//! `Ones`; the end mark is sent once (Go's `Integ` sends it twice); tan x exercises `Recip`.

use std::fmt;
use std::ops::{Add, Mul, Neg};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, Sender};

/// A rational in lowest terms, denominator > 0; `Rat::END` (denominator 0) ends a series.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Rat {
    num: i64,
    den: i64,
}

impl Rat {
    const ZERO: Rat = Rat { num: 0, den: 1 };
    const ONE: Rat = Rat { num: 1, den: 1 };
    const END: Rat = Rat { num: 1, den: 0 };

    /// num / den in lowest terms (i128: wide enough for the unreduced results of `+` and
    /// `*`). Panics if `den` is zero or the result overflows i64.
    fn new(num: i128, den: i128) -> Rat {
        assert!(den != 0, "rational with a zero denominator");
        let (mut a, mut b) = (num, den);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        // a is the gcd up to its sign; dividing by g makes the denominator positive.
        let g = a.abs() * den.signum();
        let fit = |x: i128| i64::try_from(x / g).expect("rational arithmetic overflowed i64");
        let (num, den) = (fit(num), fit(den));
        Rat { num, den }
    }

    fn wide(self) -> (i128, i128) {
        (self.num.into(), self.den.into())
    }

    fn is_end(self) -> bool {
        self.den == 0
    }

    fn recip(self) -> Rat {
        assert!(self.num != 0, "reciprocal of zero");
        Rat::new(self.den.into(), self.num.into())
    }
}

impl Add for Rat {
    type Output = Rat;
    fn add(self, o: Rat) -> Rat {
        let ((a, b), (c, d)) = (self.wide(), o.wide());
        Rat::new(a * d + c * b, b * d)
    }
}

impl Mul for Rat {
    type Output = Rat;
    fn mul(self, o: Rat) -> Rat {
        let ((a, b), (c, d)) = (self.wide(), o.wide());
        Rat::new(a * c, b * d)
    }
}

impl Neg for Rat {
    type Output = Rat;
    fn neg(self) -> Rat {
        Rat::new(-i128::from(self.num), self.den.into())
    }
}

impl fmt::Display for Rat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.num, self.den) {
            (_, 0) => write!(f, "end"),
            (n, 1) => write!(f, "{n}"),
            (n, d) => write!(f, "{n}/{d}"),
        }
    }
}

/// The reading end of a series: send a request, receive the next coefficient.
#[derive(Clone)]
struct Series {
    req: Sender<()>,
    dat: Receiver<Rat>,
}

/// The writing end of a series: receive a request, send the next coefficient.
#[derive(Clone)]
struct Feed {
    req: Receiver<()>,
    dat: Sender<Rat>,
}

/// Any channel error (converted by `?`): the run is being torn down.
struct Closed;

impl<E: std::error::Error> From<E> for Closed {
    fn from(_: E) -> Closed {
        Closed
    }
}

type Res<T = ()> = Result<T, Closed>;

/// One run's coefficients fetched, and what its tear-down closes and joins.
#[derive(Default)]
struct Context {
    gets: AtomicU64,
    reg: goro::sync::Mutex<Registry>,
}

type Ctx = Arc<Context>;

#[derive(Default)]
struct Registry {
    /// Set at shutdown: channels made afterwards are closed at once.
    closed: bool,
    signals: Vec<Sender<()>>,
    data: Vec<Sender<Rat>>,
    coroutines: Vec<goro::JoinHandle<()>>,
}

impl Context {
    /// Relaxed: a coefficient is counted before it is passed on, and the channel
    /// operations that pass it on order the count before `run`'s read.
    fn count(&self, n: u64) {
        self.gets.fetch_add(n, Ordering::Relaxed);
    }

    fn signal(&self) -> (Sender<()>, Receiver<()>) {
        let (tx, rx) = channel(0);
        self.track(&tx, None);
        (tx, rx)
    }

    fn series(&self) -> (Feed, Series) {
        let ((req, req_rx), (dat_tx, dat)) = (channel(0), channel(0));
        self.track(&req, Some(&dat_tx));
        let feed = Feed {
            req: req_rx,
            dat: dat_tx,
        };
        (feed, Series { req, dat })
    }

    /// Keeps new channels to close at shutdown, or closes them now if it has begun.
    fn track(&self, signal: &Sender<()>, data: Option<&Sender<Rat>>) {
        let mut reg = self.reg.lock();
        if reg.closed {
            signal.close();
            data.into_iter().for_each(Sender::close);
        } else {
            reg.signals.push(signal.clone());
            reg.data.extend(data.cloned());
        }
    }

    /// Starts a coroutine of the run; `Closed` is its normal way out at shutdown.
    fn go(self: &Arc<Self>, f: impl FnOnce(&Ctx) -> Res + Send + 'static) {
        let ctx = Arc::clone(self);
        let h = goro::go!(move || f(&ctx).unwrap_or(()));
        self.reg.lock().coroutines.push(h);
    }

    /// Closes every channel, which ends every coroutine at its current or next channel
    /// operation, and joins them all, those started meanwhile too. Fails if one panicked.
    fn shutdown(&self) -> Result<(), String> {
        let mut panicked = false;
        loop {
            let coroutines = {
                let mut reg = self.reg.lock();
                reg.closed = true;
                reg.signals.drain(..).for_each(|s| s.close());
                reg.data.drain(..).for_each(|s| s.close());
                std::mem::take(&mut reg.coroutines)
            };
            if coroutines.is_empty() {
                break;
            }
            for h in coroutines {
                panicked |= h.join().is_err();
            }
        }
        if panicked {
            return Err("powser: a series coroutine panicked".to_string());
        }
        Ok(())
    }
}

/// A new series, fed by `f` in a coroutine of its own.
fn stream(ctx: &Ctx, f: impl FnOnce(&Ctx, Feed) -> Res + Send + 'static) -> Series {
    let (z, zs) = ctx.series();
    ctx.go(move |ctx| f(ctx, z));
    zs
}

fn get(ctx: &Ctx, s: &Series) -> Res<Rat> {
    s.req.send(())?;
    let v = s.dat.recv()?;
    ctx.count(1);
    Ok(v)
}

fn put(z: &Feed, v: Rat) -> Res {
    z.req.recv()?;
    Ok(z.dat.send(v)?)
}

/// The next coefficient of each of `a` and `b`, in whichever order they come (Go: `getn`).
fn get2(ctx: &Ctx, a: &Series, b: &Series) -> Res<[Rat; 2]> {
    let s = [a, b];
    let mut out = [Rat::ZERO; 2];
    let i = goro::select! {
        send(a.req, ()) -> r => { r?; 0 },
        send(b.req, ()) -> r => { r?; 1 },
    };
    let j = 1 - i;
    // Series i was asked first: its coefficient, or j's request, goes next.
    let got_i = goro::select! {
        recv(s[i].dat) -> r => Some(r?),
        send(s[j].req, ()) -> r => { r?; None },
    };
    if let Some(v) = got_i {
        out[i] = v;
        s[j].req.send(())?;
        out[j] = s[j].dat.recv()?;
    } else {
        let (k, v) = goro::select! {
            recv(a.dat) -> r => (0, r?),
            recv(b.dat) -> r => (1, r?),
        };
        out[k] = v;
        out[1 - k] = s[1 - k].dat.recv()?;
    }
    ctx.count(2);
    Ok(out)
}

fn copy(ctx: &Ctx, u: &Series, z: &Feed) -> Res {
    loop {
        z.req.recv()?;
        z.dat.send(get(ctx, u)?)?;
    }
}

/// Answers the request on `z` that has come, and every later one, with `f(i, a)` for
/// the next coefficient `a` of `u` (i = 1, 2, ...); when `u` ends, with the end mark.
fn answer(ctx: &Ctx, u: &Series, z: &Feed, f: impl Fn(i128, Rat) -> Rat) -> Res {
    for i in 1.. {
        let a = get(ctx, u)?;
        if a.is_end() {
            break;
        }
        z.dat.send(f(i, a))?;
        z.req.recv()?;
    }
    end(z)
}

/// Sends the end mark on `z`, which has been asked.
fn end(z: &Feed) -> Res {
    Ok(z.dat.send(Rat::END)?)
}

/// One generation of a split (Go: `dosplit`): on the first request on either output,
/// fetches a coefficient of `input`, starts the next generation (for further requests)
/// and delivers it first to the output that asked, then, once the previous generation is
/// done (`wait`), to the other. `out[0]` is the output the newest generation serves.
fn split_generation(ctx: &Ctx, input: Series, mut out: [Feed; 2], wait: Receiver<()>) -> Res {
    let prev_done = goro::select! {
        recv(out[0].req) -> r => { r?; false },
        recv(wait) -> r => { r?; true },
    };
    if prev_done {
        goro::select! {
            recv(out[0].req) -> r => r?,
            recv(out[1].req) -> r => { r?; out.swap(0, 1) },
        }
    }
    input.req.send(())?;
    let (release, next_wait) = ctx.signal();
    let (next_input, next_out) = (input.clone(), out.clone());
    ctx.go(move |ctx| split_generation(ctx, next_input, next_out, next_wait));
    let v = input.dat.recv()?;
    ctx.count(1);
    out[0].dat.send(v)?;
    if !prev_done {
        wait.recv()?;
    }
    put(&out[1], v)?;
    Ok(release.send(())?)
}

/// Makes `out` feed copies of `input` (Go: `split`).
fn split_into(ctx: &Ctx, input: Series, out: [Feed; 2]) -> Res {
    let (release, wait) = ctx.signal();
    ctx.go(move |ctx| split_generation(ctx, input, out, wait));
    Ok(release.send(())?)
}

/// Two copies of `u` (Go: `Split`).
fn split(ctx: &Ctx, u: Series) -> [Series; 2] {
    let ((f0, s0), (f1, s1)) = (ctx.series(), ctx.series());
    ctx.go(move |ctx| split_into(ctx, u, [f0, f1]));
    [s0, s1]
}

/// c, c, c, ... (Go: `Rep`).
fn rep(ctx: &Ctx, c: Rat) -> Series {
    stream(ctx, move |_, z| loop {
        put(&z, c)?;
    })
}

/// U + V.
fn add(ctx: &Ctx, u: Series, v: Series) -> Series {
    stream(ctx, move |ctx, z| loop {
        z.req.recv()?;
        let [a, b] = get2(ctx, &u, &v)?;
        match (a.is_end(), b.is_end()) {
            (false, false) => z.dat.send(a + b)?,
            (true, true) => return end(&z),
            // One has ended: the rest of the sum is the other.
            (a_ended, _) => {
                let (c, rest) = if a_ended { (b, &v) } else { (a, &u) };
                z.dat.send(c)?;
                return copy(ctx, rest, &z);
            }
        }
    })
}

/// c·U.
fn cmul(ctx: &Ctx, c: Rat, u: Series) -> Series {
    stream(ctx, move |ctx, z| {
        z.req.recv()?;
        answer(ctx, &u, &z, |_, a| c * a)
    })
}

/// c + x·U.
fn shift(ctx: &Ctx, c: Rat, u: Series) -> Series {
    stream(ctx, move |ctx, z| {
        put(&z, c)?;
        copy(ctx, &u, &z)
    })
}

/// U·V. With U = u + x·UU and V = v + x·VV:
/// U·V = u·v + x·(u·VV + v·UU) + x²·UU·VV.
fn mul(ctx: &Ctx, u: Series, v: Series) -> Series {
    stream(ctx, move |ctx, z| {
        z.req.recv()?;
        let [a, b] = get2(ctx, &u, &v)?;
        if a.is_end() || b.is_end() {
            return end(&z);
        }
        z.dat.send(a * b)?;
        let ([uu0, uu1], [vv0, vv1]) = (split(ctx, u), split(ctx, v));
        let w = add(ctx, cmul(ctx, a, vv0), cmul(ctx, b, uu0));
        z.req.recv()?;
        z.dat.send(get(ctx, &w)?)?;
        let tail = add(ctx, w, mul(ctx, uu1, vv1));
        copy(ctx, &tail, &z)
    })
}

/// dU/dx.
fn diff(ctx: &Ctx, u: Series) -> Series {
    stream(ctx, move |ctx, z| {
        z.req.recv()?;
        if get(ctx, &u)?.is_end() {
            return end(&z);
        }
        answer(ctx, &u, &z, |i, a| Rat::new(i, 1) * a)
    })
}

/// c + ∫U dx.
fn integ(ctx: &Ctx, c: Rat, u: Series) -> Series {
    stream(ctx, move |ctx, z| {
        put(&z, c)?;
        z.req.recv()?;
        answer(ctx, &u, &z, |i, a| Rat::new(1, i) * a)
    })
}

/// 1/U. With U = u + x·UU and 1/U = z + x·ZZ: z = 1/u and ZZ = -z·UU·(z + x·ZZ), a
/// series defined by itself, fed back through a split.
fn recip(ctx: &Ctx, u: Series) -> Series {
    stream(ctx, move |ctx, z| {
        let ((f0, s0), (f1, s1)) = (ctx.series(), ctx.series());
        z.req.recv()?;
        let r = get(ctx, &u)?.recip();
        z.dat.send(r)?;
        let zz = mul(ctx, cmul(ctx, -r, u), shift(ctx, r, s0));
        split_into(ctx, zz, [f0, f1])?;
        copy(ctx, &s1, &z)
    })
}

/// exp(U) for U with a zero constant term (the constant term is ignored, as in Go):
/// Z = exp(U) satisfies Z' = Z·U', so Z = 1 + ∫Z·U' dx, fed back through a split.
fn exp(ctx: &Ctx, u: Series) -> Res<Series> {
    let ((f0, s0), (f1, s1)) = (ctx.series(), ctx.series());
    let z = integ(ctx, Rat::ONE, mul(ctx, s0, diff(ctx, u)));
    split_into(ctx, z, [f0, f1])?;
    Ok(s1)
}

/// U(c·xⁿ): coefficient i of U times cⁱ, followed by n - 1 zeros.
fn mon_subst(ctx: &Ctx, u: Series, c0: Rat, n: usize) -> Series {
    stream(ctx, move |ctx, z| {
        let mut c = Rat::ONE;
        loop {
            z.req.recv()?;
            let a = get(ctx, &u)?;
            if a.is_end() {
                return end(&z);
            }
            z.dat.send(a * c)?;
            c = c * c0;
            for _ in 1..n {
                put(&z, Rat::ZERO)?;
            }
        }
    })
}

/// tan x = sin x / cos x, with sin = ∫cos and cos = 1 - ∫sin fed back through splits.
fn tan(ctx: &Ctx) -> Res<Series> {
    let ((sin_f0, sin0), (sin_f1, sin1)) = (ctx.series(), ctx.series());
    let ((cos_f0, cos0), (cos_f1, cos1)) = (ctx.series(), ctx.series());
    split_into(ctx, integ(ctx, Rat::ZERO, cos0), [sin_f0, sin_f1])?;
    let cos = integ(ctx, Rat::ONE, cmul(ctx, -Rat::ONE, sin0));
    split_into(ctx, cos, [cos_f0, cos_f1])?;
    Ok(mul(ctx, sin1, recip(ctx, cos1)))
}

/// Coefficients checked per series (Go's N).
const TERMS: usize = 10;

/// The series of a run and their first coefficients, as `Rat` displays them (in lowest
/// terms, so equal strings are equal rationals). exp(x/(1-x)) = Σ a(k)·xᵏ/k! with a =
/// OEIS A000262.
const EXPECTED: [(&str, &str); 10] = [
    ("ones", "1 1 1 1 1"),
    ("ones+twos", "3 3 3 3 3 3 3 3 3 3"),
    ("d/dx ones", "1 2 3 4 5 6 7 8 9 10"),
    ("∫ones", "0 1 1/2 1/3 1/4 1/5 1/6 1/7 1/8 1/9"),
    ("-1·twos", "-2 -2 -2 -2 -2 -2 -2 -2 -2 -2"),
    ("ones-twos", "-1 -1 -1 -1 -1 -1 -1 -1 -1 -1"),
    ("ones·ones", "1 2 3 4 5 6 7 8 9 10"),
    (
        "exp(ones)",
        "1 1 3/2 13/6 73/24 167/40 4051/720 37633/5040 43817/4480 4596553/362880",
    ),
    ("atan", "0 1 0 -1/3 0 1/5 0 -1/7 0 1/9"),
    ("tan", "0 1 0 1/3 0 2/15 0 17/315 0 62/2835"),
];

/// The run's series, one after the other, as in [`EXPECTED`].
fn compute(ctx: &Ctx) -> Res<[(&'static str, Vec<Rat>); 10]> {
    let take = |s: Series, n: usize| (0..n).map(|_| get(ctx, &s)).collect::<Res<Vec<_>>>();
    let ones = || rep(ctx, Rat::ONE);
    let twos = || rep(ctx, Rat::new(2, 1));
    let minus = |u| cmul(ctx, -Rat::ONE, u);
    // atan x = ∫ 1/(1+x²) dx, and 1/(1+x²) is ones with x replaced by -x².
    let atan = || integ(ctx, Rat::ZERO, mon_subst(ctx, ones(), -Rat::ONE, 2));
    Ok([
        ("ones", take(ones(), 5)?),
        ("ones+twos", take(add(ctx, ones(), twos()), TERMS)?),
        ("d/dx ones", take(diff(ctx, ones()), TERMS)?),
        ("∫ones", take(integ(ctx, Rat::ZERO, ones()), TERMS)?),
        ("-1·twos", take(minus(twos()), TERMS)?),
        ("ones-twos", take(add(ctx, ones(), minus(twos())), TERMS)?),
        ("ones·ones", take(mul(ctx, ones(), ones()), TERMS)?),
        ("exp(ones)", take(exp(ctx, ones())?, TERMS)?),
        ("atan", take(atan(), TERMS)?),
        ("tan", take(tan(ctx)?, TERMS)?),
    ])
}

pub struct PowserRun {
    pub series: Vec<(&'static str, Vec<Rat>)>,
    /// Time to compute them (tear-down not included).
    pub elapsed: Duration,
    /// Coefficients fetched from streams, in all coroutines.
    pub gets: u64,
}

/// Computes the series (timed), tears the run down and checks them; from a coroutine.
/// Fails if a coefficient is wrong or a coroutine panicked.
pub fn run() -> Result<PowserRun, String> {
    let ctx = Ctx::default();
    let start = Instant::now();
    let computed = compute(&ctx);
    let elapsed = start.elapsed();
    let gets = ctx.gets.load(Ordering::Relaxed); // Relaxed: see `Context::count`
    ctx.shutdown()?;
    let series = computed.map_err(|Closed| "powser: a channel closed early".to_string())?;
    for ((name, coefs), (want_name, want)) in series.iter().zip(EXPECTED) {
        let got: Vec<String> = coefs.iter().map(Rat::to_string).collect();
        let got = got.join(" ");
        if *name != want_name || got != want {
            let msg = format!("powser: {name}: got {got}, expected ({want_name}) {want}");
            return Err(msg);
        }
    }
    Ok(PowserRun {
        series: series.into(),
        elapsed,
        gets,
    })
}
