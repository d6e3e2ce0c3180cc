//! `select!` over channel operations (Go: runtime/select.go, selectgo).
//!
//! 1. The involved channels are locked in address order (each once, even if several
//!    arms use it), so selects over overlapping sets of channels cannot deadlock.
//! 2. The arms are polled in a random order: the first that can complete now does,
//!    so among ready arms each is chosen uniformly at random.
//! 3. If none is ready: with `default`, unlock and take it. Otherwise link one sudog
//!    per arm, all sharing one `SelectState`, in the same random order (so a parked
//!    select whose arms share a channel is as fair as a polling one), and park (with
//!    a deadline for `default(timeout)`); the channels are unlocked after the switch.
//! 4. The first counterpart to win the state's `winner` word by CAS completes its arm
//!    and wakes the selector; counterparts that find it taken skip that sudog.
//! 5. Awake, the selector locks the channels again and unlinks its losing sudogs.
//!
//! The arms are the macro's locals, held in place (borrowed) for the whole select,
//! which is what keeps their sudogs valid while linked.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::time::Instant;

use goro_runtime::park::{self, Unparker, WaitReason};

use super::waitq::{Outcome, SelectState, Sudog};
use super::{try_recv_locked, try_send_locked, Chan, RecvError, SendError, TryRecv, TrySend};

/// What a `recv` arm is given: a channel, and `K`, what its result looks like (see
/// [`ArmKind`]). Made by `__as_receiver` on a `Receiver` or a `Chan`.
pub struct RecvEnd<'a, T, K> {
    pub(crate) chan: &'a Chan<T>,
    pub(crate) kind: PhantomData<K>,
}

/// What a `send` arm is given (see [`RecvEnd`]). Made by `__as_sender`.
pub struct SendEnd<'a, T, K> {
    pub(crate) chan: &'a Chan<T>,
    pub(crate) kind: PhantomData<K>,
}

/// How an arm's outcome reaches the arm's pattern: as `Result`s for `Sender` and
/// `Receiver` ([`StdKind`]), or as Go's values for `Chan` ([`GoKind`]: a receive
/// gives `Option<T>`, a send on a closed channel panics).
pub trait ArmKind<T> {
    /// What `recv(..) -> pat` binds.
    type Recv;
    /// What `send(..) -> pat` binds.
    type Send;
    /// A receive's outcome, as the arm gives it.
    fn recv(r: Result<T, RecvError>) -> Self::Recv;
    /// A send's outcome, as the arm gives it.
    fn send(r: Result<(), SendError<T>>) -> Self::Send;
}

/// `Sender` and `Receiver`: the arms give `Result<T, RecvError>` and
/// `Result<(), SendError<T>>`.
pub struct StdKind;

impl<T> ArmKind<T> for StdKind {
    type Recv = Result<T, RecvError>;
    type Send = Result<(), SendError<T>>;
    #[inline]
    fn recv(r: Result<T, RecvError>) -> Self::Recv {
        r
    }
    #[inline]
    fn send(r: Result<(), SendError<T>>) -> Self::Send {
        r
    }
}

/// `Chan` (Go's `chan T`): a receive gives `Option<T>` (`None`: closed and drained,
/// Go's `v, ok := <-ch` with `ok == false`); a send chosen on a closed channel panics
/// "send on closed channel", as in Go.
pub struct GoKind;

impl<T> ArmKind<T> for GoKind {
    type Recv = Option<T>;
    type Send = ();
    #[inline]
    fn recv(r: Result<T, RecvError>) -> Option<T> {
        r.ok()
    }
    #[inline]
    fn send(r: Result<(), SendError<T>>) {
        if r.is_err() {
            panic!("send on closed channel");
        }
    }
}

/// The most arms one `select!` may have.
pub const MAX_ARMS: usize = 64;

/// What `select!` does when no arm is ready.
#[derive(Clone, Copy, Debug)]
pub enum SelectDefault {
    /// Wait for an arm.
    Block,
    /// Take the `default` arm.
    Now,
    /// Wait for an arm until the deadline, then take the `default` arm (`None`: a
    /// deadline too far to represent, i.e. wait forever).
    Until(Option<Instant>),
}

/// One arm of a `select!`, type-erased. Implemented by [`RecvArm`] and [`SendArm`].
///
/// # Safety
///
/// Implementations keep their sudog in place between `enqueue` and the end of the
/// select, and touch channel state only with the channel locked.
pub unsafe trait SelectArm {
    /// The channel's address (the lock order).
    fn chan_addr(&self) -> usize;
    /// Runs before the channels are locked: a receive from a timer channel delivers a
    /// due value (see "timer channels" in `chan`).
    fn before_lock(&self) {}
    /// Locks the channel.
    fn lock(&self);
    /// Unlocks the channel.
    fn unlock(&self);
    /// Completes now if possible (channel locked). Returns `Some(unparker to wake)` if
    /// it did.
    ///
    /// # Safety
    ///
    /// The channel is locked by the caller.
    unsafe fn poll(&mut self) -> Option<Option<Unparker>>;
    /// Links this arm's sudog for select `sel`, as arm `index` (channel locked).
    ///
    /// # Safety
    ///
    /// The channel is locked; `sel` outlives the link.
    unsafe fn enqueue(&mut self, sel: *const SelectState, index: usize);
    /// Unlinks this arm's sudog if it is still linked (channel locked).
    ///
    /// # Safety
    ///
    /// The channel is locked.
    unsafe fn cancel(&mut self);
    /// After a counterpart completed this arm: take the result from the sudog.
    fn complete(&mut self);
}

/// A `recv(rx)` arm.
pub struct RecvArm<'a, T, K> {
    chan: &'a Chan<T>,
    sg: UnsafeCell<Sudog<T>>,
    result: Option<Result<T, RecvError>>,
    kind: PhantomData<K>,
}

impl<'a, T, K: ArmKind<T>> RecvArm<'a, T, K> {
    /// An arm receiving from `end`'s channel.
    pub fn new(end: RecvEnd<'a, T, K>) -> Self {
        RecvArm {
            chan: end.chan,
            sg: UnsafeCell::new(Sudog::new(None)),
            result: None,
            kind: PhantomData,
        }
    }

    /// The arm's result, once it won.
    pub fn take(self) -> K::Recv {
        K::recv(
            self.result
                .expect("select!: taking the result of an arm that did not complete"),
        )
    }
}

// SAFETY: the sudog lives in the arm, which the select keeps in place; channel state is
// only touched under the channel lock, as the methods' contracts require.
unsafe impl<T, K> SelectArm for RecvArm<'_, T, K> {
    fn chan_addr(&self) -> usize {
        self.chan as *const Chan<T> as usize
    }
    fn before_lock(&self) {
        self.chan.deliver_due();
    }
    fn lock(&self) {
        self.chan.raw_lock();
    }
    fn unlock(&self) {
        self.chan.raw_unlock();
    }
    unsafe fn poll(&mut self) -> Option<Option<Unparker>> {
        let chan = self.chan;
        let mut wake = None;
        // SAFETY: the channel is locked (caller's contract).
        match try_recv_locked(unsafe { chan.state_locked() }, &mut wake) {
            TryRecv::Got(v) => {
                self.result = Some(Ok(v));
                Some(wake)
            }
            TryRecv::Closed => {
                self.result = Some(Err(RecvError));
                Some(wake)
            }
            TryRecv::Empty => None,
        }
    }
    unsafe fn enqueue(&mut self, sel: *const SelectState, index: usize) {
        let s = self.sg.get();
        // SAFETY: locked; the sudog stays in place in this arm until the select ends.
        unsafe {
            (*s).select = sel;
            (*s).arm = index;
            self.chan.state_locked().recvq.push(s);
        }
    }
    unsafe fn cancel(&mut self) {
        let s = self.sg.get();
        // SAFETY: locked.
        unsafe {
            if (*s).is_linked() {
                self.chan.state_locked().recvq.remove(s);
            }
        }
    }
    fn complete(&mut self) {
        let sg = self.sg.get_mut();
        self.result = Some(match sg.outcome {
            Outcome::Done => Ok(sg.value.take().expect("a completed receive holds a value")),
            _ => Err(RecvError),
        });
    }
}

/// A `send(tx, value)` arm.
pub struct SendArm<'a, T, K> {
    chan: &'a Chan<T>,
    sg: UnsafeCell<Sudog<T>>,
    result: Option<Result<(), SendError<T>>>,
    kind: PhantomData<K>,
}

impl<'a, T, K: ArmKind<T>> SendArm<'a, T, K> {
    /// An arm sending `v` on `end`'s channel.
    pub fn new(end: SendEnd<'a, T, K>, v: T) -> Self {
        SendArm {
            chan: end.chan,
            sg: UnsafeCell::new(Sudog::new(Some(v))),
            result: None,
            kind: PhantomData,
        }
    }

    /// The arm's result, once it won.
    pub fn take(self) -> K::Send {
        K::send(
            self.result
                .expect("select!: taking the result of an arm that did not complete"),
        )
    }
}

// SAFETY: as for RecvArm.
unsafe impl<T, K> SelectArm for SendArm<'_, T, K> {
    fn chan_addr(&self) -> usize {
        self.chan as *const Chan<T> as usize
    }
    fn lock(&self) {
        self.chan.raw_lock();
    }
    fn unlock(&self) {
        self.chan.raw_unlock();
    }
    unsafe fn poll(&mut self) -> Option<Option<Unparker>> {
        let chan = self.chan;
        let sg = self.sg.get_mut();
        let v = sg
            .value
            .take()
            .expect("a send arm holds its value until it completes");
        let mut wake = None;
        // SAFETY: the channel is locked (caller's contract).
        match try_send_locked(unsafe { chan.state_locked() }, v, &mut wake) {
            TrySend::Sent => {
                self.result = Some(Ok(()));
                Some(wake)
            }
            TrySend::Closed(v) => {
                self.result = Some(Err(SendError(v)));
                Some(wake)
            }
            TrySend::Full(v) => {
                sg.value = Some(v);
                None
            }
        }
    }
    unsafe fn enqueue(&mut self, sel: *const SelectState, index: usize) {
        let s = self.sg.get();
        // SAFETY: as for RecvArm.
        unsafe {
            (*s).select = sel;
            (*s).arm = index;
            self.chan.state_locked().sendq.push(s);
        }
    }
    unsafe fn cancel(&mut self) {
        let s = self.sg.get();
        // SAFETY: locked.
        unsafe {
            if (*s).is_linked() {
                self.chan.state_locked().sendq.remove(s);
            }
        }
    }
    fn complete(&mut self) {
        let sg = self.sg.get_mut();
        self.result = Some(match sg.outcome {
            Outcome::Done => Ok(()),
            _ => Err(SendError(sg.value.take().expect("an unsent value is kept"))),
        });
    }
}

/// Runs a select over `arms` and returns the index of the arm that completed, or
/// `arms.len()` for the default arm (taken at once, or after the deadline).
///
/// # Panics
///
/// With more than `MAX_ARMS` (64) arms.
pub fn select(arms: &mut [&mut dyn SelectArm], default: SelectDefault) -> usize {
    goro_runtime::preempt_point();
    let n = arms.len();
    assert!(n <= MAX_ARMS, "select!: at most {MAX_ARMS} arms, got {n}");
    // Lock order: by channel address; equal addresses are locked once.
    let mut lock_order = [0u8; MAX_ARMS];
    for (i, slot) in lock_order.iter_mut().enumerate().take(n) {
        *slot = i as u8;
    }
    let lock_order = &mut lock_order[..n];
    lock_order.sort_unstable_by_key(|&i| arms[i as usize].chan_addr());
    // Poll order: a uniform random permutation (Fisher-Yates).
    let mut poll_order = [0u8; MAX_ARMS];
    for (i, slot) in poll_order.iter_mut().enumerate().take(n) {
        *slot = i as u8;
    }
    let poll_order = &mut poll_order[..n];
    for i in (1..n).rev() {
        let j = crate::rand::rand() as usize % (i + 1);
        poll_order.swap(i, j);
    }

    let lock_all = |arms: &[&mut dyn SelectArm]| {
        let mut last = None;
        for &i in lock_order.iter() {
            let a = arms[i as usize].chan_addr();
            if last != Some(a) {
                arms[i as usize].lock();
                last = Some(a);
            }
        }
    };
    let unlock_all = |arms: &[&mut dyn SelectArm]| {
        let mut last = None;
        for &i in lock_order.iter().rev() {
            let a = arms[i as usize].chan_addr();
            if last != Some(a) {
                arms[i as usize].unlock();
                last = Some(a);
            }
        }
    };

    for arm in arms.iter() {
        arm.before_lock();
    }
    lock_all(arms);
    for &i in poll_order.iter() {
        // SAFETY: all channels are locked.
        if let Some(wake) = unsafe { arms[i as usize].poll() } {
            unlock_all(arms);
            if let Some(u) = wake {
                u.unpark();
            }
            return i as usize;
        }
    }
    if let SelectDefault::Now = default {
        unlock_all(arms);
        return n;
    }

    // Block: link a sudog per arm and park; the channels unlock after the switch. The
    // sudogs are linked in the poll order, not the arms' order: arms on one channel
    // then sit in its queue in a random order, and the counterpart that takes the
    // queue's head picks among them fairly (Go: selectgo, "to permute cases on the
    // same channel").
    let state = SelectState::new();
    // SAFETY: nobody else can see `state` before the enqueues below.
    unsafe { *state.unparker.get() = Some(park::prepare()) };
    for &i in poll_order.iter() {
        // SAFETY: all channels are locked; `state` lives on this frame until after
        // every sudog has been unlinked below.
        unsafe { arms[i as usize].enqueue(&state, i as usize) };
    }
    match default {
        SelectDefault::Until(Some(deadline)) => {
            park::park_commit_timeout(WaitReason::Select, deadline, || unlock_all(arms));
        }
        _ => park::park_commit(WaitReason::Select, || unlock_all(arms)),
    }
    // Awake: unlink the losers (and, after a timeout, everything) under the locks; a
    // counterpart can only claim an arm under its channel's lock, so once we hold them
    // all the winner is settled.
    lock_all(arms);
    // Acquire: pairs with the winner's `claim` (AcqRel), which the channel lock we now
    // hold orders before us as well.
    let winner = state.winner.load(std::sync::atomic::Ordering::Acquire);
    for arm in arms.iter_mut() {
        // SAFETY: all channels are locked.
        unsafe { arm.cancel() };
    }
    unlock_all(arms);
    if winner == 0 {
        return n; // the deadline passed with no arm ready
    }
    arms[winner - 1].complete();
    winner - 1
}

#[doc(hidden)]
pub mod __private {
    pub use super::super::waitq::SelectState;
    pub use super::{
        select, ArmKind, GoKind, RecvArm, RecvEnd, SelectArm, SelectDefault, SendArm, SendEnd,
        StdKind,
    };
}

/// Waits on several channel operations at once and runs the arm of the one that
/// completes, with crossbeam-channel's syntax:
///
/// ```
/// use goro::chan::{channel, after};
/// use std::time::Duration;
///
/// let (tx, rx) = channel::<i32>(1);
/// let (tx2, rx2) = channel::<&str>(0);
/// tx.send(7).unwrap();
/// goro::select! {
///     recv(rx) -> v => assert_eq!(v, Ok(7)),
///     recv(rx2) -> s => panic!("nobody sent {s:?}"),
///     send(tx2, "hi") -> r => panic!("nobody receives: {r:?}"),
///     recv(after(Duration::from_secs(5))) -> _ => panic!("timed out"),
/// }
/// goro::select! {
///     recv(rx) -> v => panic!("empty: {v:?}"),
///     default(Duration::from_millis(1)) => {}
/// }
/// ```
///
/// - `recv(rx) -> res => body`: `res` is `Result<T, RecvError>` (`Err` once the channel
///   is closed and drained).
/// - `send(tx, value) -> res => body`: `res` is `Result<(), SendError<T>>`; the value
///   is evaluated before the select and dropped if another arm wins.
/// - Channel and value expressions are evaluated once each, in source order, before
///   anything else happens (Go's rule); temporaries in them live until the select
///   ends.
/// - `default => body`: taken at once if no arm is ready.
/// - `default(timeout) => body`: taken if no arm is ready within `timeout`.
///
/// Ready arms are chosen uniformly at random. Without a default, the select waits for
/// an arm (parking a coroutine, blocking a thread). `select! {}` waits forever.
/// The macro takes at most 32 arms besides the default (a compile error beyond);
/// the function behind it takes up to 64.
#[macro_export]
macro_rules! select {
    ($($tokens:tt)*) => {
        $crate::__goro_select!(@munch [] [] $($tokens)*)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __goro_select {
    // ---- parsing: arms into [(kind (args) pat => body)], default into [(how) body] ----
    (@munch [$($arms:tt)*] [$($def:tt)*] , $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)*] [$($def)*] $($rest)*)
    };
    (@munch [$($arms:tt)*] [$($def:tt)*] recv($rx:expr $(,)?) -> $res:pat => $body:block $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)* (recv ($rx) $res => $body)] [$($def)*] $($rest)*)
    };
    (@munch [$($arms:tt)*] [$($def:tt)*] recv($rx:expr $(,)?) -> $res:pat => $body:expr, $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)* (recv ($rx) $res => $body)] [$($def)*] $($rest)*)
    };
    (@munch [$($arms:tt)*] [$($def:tt)*] recv($rx:expr $(,)?) -> $res:pat => $body:expr) => {
        $crate::__goro_select!(@munch [$($arms)* (recv ($rx) $res => $body)] [$($def)*])
    };
    (@munch [$($arms:tt)*] [$($def:tt)*] send($tx:expr, $v:expr $(,)?) -> $res:pat => $body:block $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)* (send ($tx, $v) $res => $body)] [$($def)*] $($rest)*)
    };
    (@munch [$($arms:tt)*] [$($def:tt)*] send($tx:expr, $v:expr $(,)?) -> $res:pat => $body:expr, $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)* (send ($tx, $v) $res => $body)] [$($def)*] $($rest)*)
    };
    (@munch [$($arms:tt)*] [$($def:tt)*] send($tx:expr, $v:expr $(,)?) -> $res:pat => $body:expr) => {
        $crate::__goro_select!(@munch [$($arms)* (send ($tx, $v) $res => $body)] [$($def)*])
    };
    (@munch [$($arms:tt)*] [] default => $body:block $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)*] [(now) $body] $($rest)*)
    };
    (@munch [$($arms:tt)*] [] default => $body:expr, $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)*] [(now) $body] $($rest)*)
    };
    (@munch [$($arms:tt)*] [] default => $body:expr) => {
        $crate::__goro_select!(@munch [$($arms)*] [(now) $body])
    };
    (@munch [$($arms:tt)*] [] default($t:expr $(,)?) => $body:block $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)*] [(after $t) $body] $($rest)*)
    };
    (@munch [$($arms:tt)*] [] default($t:expr $(,)?) => $body:expr, $($rest:tt)*) => {
        $crate::__goro_select!(@munch [$($arms)*] [(after $t) $body] $($rest)*)
    };
    (@munch [$($arms:tt)*] [] default($t:expr $(,)?) => $body:expr) => {
        $crate::__goro_select!(@munch [$($arms)*] [(after $t) $body])
    };
    (@munch [$($arms:tt)*] [$($def:tt)+] default $($rest:tt)*) => {
        compile_error!("select!: more than one default arm")
    };
    (@munch [$($arms:tt)*] [$($def:tt)*]) => {
        $crate::__goro_select!(@bind [] [$($arms)*] [$($def)*]
            ((__c0 __a0) (__c1 __a1) (__c2 __a2) (__c3 __a3) (__c4 __a4) (__c5 __a5)
             (__c6 __a6) (__c7 __a7) (__c8 __a8) (__c9 __a9) (__c10 __a10) (__c11 __a11)
             (__c12 __a12) (__c13 __a13) (__c14 __a14) (__c15 __a15) (__c16 __a16)
             (__c17 __a17) (__c18 __a18) (__c19 __a19) (__c20 __a20) (__c21 __a21)
             (__c22 __a22) (__c23 __a23) (__c24 __a24) (__c25 __a25) (__c26 __a26)
             (__c27 __a27) (__c28 __a28) (__c29 __a29) (__c30 __a30) (__c31 __a31)))
    };
    (@munch $($other:tt)*) => {
        compile_error!("select!: expected `recv(rx) -> res => body`, `send(tx, value) -> res => body`, `default => body` or `default(timeout) => body`")
    };

    // ---- naming: give each arm a channel local and an arm local ----
    (@bind [$($bound:tt)*] [($kind:ident $args:tt $res:pat => $body:tt) $($more:tt)*] [$($def:tt)*]
        (($c:ident $a:ident) $($names:tt)*)) => {
        $crate::__goro_select!(@bind [$($bound)* ($c $a $kind $args $res => $body)] [$($more)*] [$($def)*] ($($names)*))
    };
    (@bind [$($bound:tt)*] [$($more:tt)+] [$($def:tt)*] ()) => {
        compile_error!("select!: at most 32 arms")
    };
    (@bind [$(($c:ident $a:ident $kind:ident $args:tt $res:pat => $body:tt))*] [] [$($def:tt)*] ($($names:tt)*)) => {
        // The channels (and send values) are evaluated in a match's scrutinee, not in
        // `let`s, so that temporaries in an arm's channel expression
        // (`recv(opt.unwrap_or(&never()))`) live until the select has finished; a
        // tuple evaluates them in source order, each send's channel then its value,
        // as Go's spec says.
        match ($( $crate::__goro_select!(@chan $kind $args), )*) {
            ($( $c, )*) => $crate::__goro_select!(@run [$(($c $a $kind $args $res => $body))*] [$($def)*]),
        }
    };
    (@run [$(($c:ident $a:ident $kind:ident $args:tt $res:pat => $body:tt))*] [$($def:tt)*]) => {{
        $( let mut $a = $crate::__goro_select!(@arm $c $kind $args); )*
        let __index = {
            let __arms: &mut [&mut dyn $crate::chan::__private::SelectArm] =
                &mut [$(&mut $a as &mut dyn $crate::chan::__private::SelectArm),*];
            $crate::chan::__private::select(__arms, $crate::__goro_select!(@default $($def)*))
        };
        let mut __i = 0usize;
        $(
            #[allow(unused_assignments)]
            let $a = if __index == __i { ::core::option::Option::Some($a) } else { ::core::option::Option::None };
            __i += 1;
        )*
        $(
            if let ::core::option::Option::Some(__arm) = $a {
                let $res = __arm.take();
                $body
            } else
        )* {
            $crate::__goro_select!(@default_body $($def)*)
        }
    }};

    (@chan recv ($rx:expr)) => { &$rx };
    (@chan send ($tx:expr, $v:expr)) => { (&$tx, $v) };
    (@arm $c:ident recv ($rx:expr)) => { $crate::chan::__private::RecvArm::new($c.__as_receiver()) };
    (@arm $c:ident send ($tx:expr, $v:expr)) => { $crate::chan::__private::SendArm::new($c.0.__as_sender(), $c.1) };
    (@default) => { $crate::chan::__private::SelectDefault::Block };
    (@default (now) $body:tt) => { $crate::chan::__private::SelectDefault::Now };
    (@default (after $t:expr) $body:tt) => {
        $crate::chan::__private::SelectDefault::Until(::std::time::Instant::now().checked_add($t))
    };
    (@default_body) => { ::core::unreachable!("select!: woke without a winning arm") };
    (@default_body ($($how:tt)*) $body:tt) => { $body };
}
