package main

// Go versions of the channel benchmarks of goro's `chan` suite that are not in
// workloads.go (the comparison's chain, chainbuf, sieve and pingpong are there):
//
//   - Powser: power series over channels (after test/chan/powser1.go), the series of
//     its test plus tan x, each checked exactly to 10 coefficients; one op = one run;
//     reports ns/get (coefficients fetched from streams, all goroutines).
//   - WakeupParallelSpinning/Nus, WakeupParallelSyscall/Nus: runtime/proc_test.go's
//     benchmarks, one delay per benchmark (goro's names: 0us, 1us, ...).
//   - WakeupLatency (not in Go's tree): a goroutine parked on an unbuffered channel is
//     woken by a sender that keeps its P busy; reports the 50th, 90th and 99th
//     percentiles and the maximum of (time the receiver runs - time just before the
//     send) in µs, and the sends that found the receiver not parked yet (missed, no
//     sample); one op = one sample.
//
// main.go runs them with testing.Benchmark. Set-up and tear-down are not timed.

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ---- Powser ----

type rat struct{ num, den int64 } // lowest terms, den > 0; den == 0: end of series

var (
	ratZero = rat{0, 1}
	ratOne  = rat{1, 1}
	ratEnd  = rat{1, 0}
)

func ratGcd(a, b int64) int64 {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func mkRat(num, den int64) rat {
	if den == 0 {
		panic("rational with a zero denominator")
	}
	g := ratGcd(num, den)
	num, den = num/g, den/g
	if den < 0 {
		return rat{-num, -den}
	}
	return rat{num, den}
}

func (u rat) isEnd() bool { return u.den == 0 }

func (u rat) add(v rat) rat {
	g := ratGcd(u.den, v.den)
	a, b := u.den/g, v.den/g
	return mkRat(u.num*b+v.num*a, u.den*b)
}

func (u rat) mul(v rat) rat {
	g1 := ratGcd(u.num, v.den)
	g2 := ratGcd(v.num, u.den)
	return rat{(u.num / g1) * (v.num / g2), (u.den / g2) * (v.den / g1)}
}

func (u rat) neg() rat { return rat{-u.num, u.den} }

func (u rat) recip() rat {
	if u.num == 0 {
		panic("reciprocal of zero")
	}
	return mkRat(u.den, u.num)
}

func (u rat) String() string {
	switch {
	case u.isEnd():
		return "end"
	case u.den == 1:
		return fmt.Sprint(u.num)
	default:
		return fmt.Sprintf("%d/%d", u.num, u.den)
	}
}

// series: a request channel and a coefficient channel, both unbuffered.
type series struct {
	req chan struct{}
	dat chan rat
}

// psCtx records what one computation created, to tear it down: the channels (closed
// at shutdown) and the goroutines (waited for); and counts the gets.
type psCtx struct {
	gets    int64 // atomic
	mu      sync.Mutex
	closed  bool
	signals []chan struct{}
	data    []chan rat
	wg      sync.WaitGroup
}

// errPsClosed: a receive found its channel closed (tear-down).
var errPsClosed = errors.New("powser: closed")

func (c *psCtx) signal() chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	if c.closed {
		close(ch)
	} else {
		c.signals = append(c.signals, ch)
	}
	c.mu.Unlock()
	return ch
}

func (c *psCtx) series() series {
	s := series{make(chan struct{}), make(chan rat)}
	c.mu.Lock()
	if c.closed {
		close(s.req)
		close(s.dat)
	} else {
		c.signals = append(c.signals, s.req)
		c.data = append(c.data, s.dat)
	}
	c.mu.Unlock()
	return s
}

// endOnClose ends a goroutine quietly when it panicked because of the tear-down (a
// receive from a closed channel, or a send on one).
func endOnClose() {
	if r := recover(); r != nil {
		if r == errPsClosed {
			return
		}
		if e, ok := r.(runtime.Error); ok && e.Error() == "send on closed channel" {
			return
		}
		panic(r)
	}
}

func (c *psCtx) spawn(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer endOnClose()
		f()
	}()
}

func (c *psCtx) shutdown() {
	c.mu.Lock()
	c.closed = true
	signals, data := c.signals, c.data
	c.signals, c.data = nil, nil
	c.mu.Unlock()
	for _, ch := range signals {
		close(ch)
	}
	for _, ch := range data {
		close(ch)
	}
	c.wg.Wait()
}

func recvSignal(ch chan struct{}) {
	if _, ok := <-ch; !ok {
		panic(errPsClosed)
	}
}

func recvRat(ch chan rat) rat {
	v, ok := <-ch
	if !ok {
		panic(errPsClosed)
	}
	return v
}

func (c *psCtx) get(s series) rat {
	s.req <- struct{}{}
	v := recvRat(s.dat)
	atomic.AddInt64(&c.gets, 1)
	return v
}

func put(z series, v rat) {
	recvSignal(z.req)
	z.dat <- v
}

const (
	phaseAsk = iota
	phaseWait
	phaseDone
)

// get2 fetches one coefficient from each of a and b, in whatever order they come:
// with both pending a two-case select, with one a plain operation.
func (c *psCtx) get2(a, b series) [2]rat {
	s := [2]series{a, b}
	phase := [2]int{phaseAsk, phaseAsk}
	var out [2]rat
	for step := 0; step < 4; step++ {
		p0, p1 := phase[0], phase[1]
		switch {
		case p1 == phaseDone || p0 == phaseDone:
			i := 0
			if p0 == phaseDone {
				i = 1
			}
			if phase[i] == phaseAsk {
				s[i].req <- struct{}{}
				phase[i] = phaseWait
			} else {
				out[i] = recvRat(s[i].dat)
				phase[i] = phaseDone
			}
		case p0 == phaseAsk && p1 == phaseAsk:
			select {
			case s[0].req <- struct{}{}:
				phase[0] = phaseWait
			case s[1].req <- struct{}{}:
				phase[1] = phaseWait
			}
		case p0 == phaseAsk:
			select {
			case s[0].req <- struct{}{}:
				phase[0] = phaseWait
			case v, ok := <-s[1].dat:
				if !ok {
					panic(errPsClosed)
				}
				out[1], phase[1] = v, phaseDone
			}
		case p1 == phaseAsk:
			select {
			case v, ok := <-s[0].dat:
				if !ok {
					panic(errPsClosed)
				}
				out[0], phase[0] = v, phaseDone
			case s[1].req <- struct{}{}:
				phase[1] = phaseWait
			}
		default:
			select {
			case v, ok := <-s[0].dat:
				if !ok {
					panic(errPsClosed)
				}
				out[0], phase[0] = v, phaseDone
			case v, ok := <-s[1].dat:
				if !ok {
					panic(errPsClosed)
				}
				out[1], phase[1] = v, phaseDone
			}
		}
	}
	atomic.AddInt64(&c.gets, 2)
	return out
}

func (c *psCtx) copyTo(from, to series) {
	for {
		recvSignal(to.req)
		to.dat <- c.get(from)
	}
}

// splitGen is one generation of a split: it serves the first request on either output,
// fetches one coefficient, starts the next generation, and delivers the coefficient to
// the output that asked and then, once the previous generation is done, to the other.
func (c *psCtx) splitGen(in series, out [2]series, wait chan struct{}) {
	both := false
	select {
	case _, ok := <-out[0].req:
		if !ok {
			panic(errPsClosed)
		}
	case _, ok := <-wait:
		if !ok {
			panic(errPsClosed)
		}
		both = true
		select {
		case _, ok := <-out[0].req:
			if !ok {
				panic(errPsClosed)
			}
		case _, ok := <-out[1].req:
			if !ok {
				panic(errPsClosed)
			}
			out[0], out[1] = out[1], out[0]
		}
	}
	in.req <- struct{}{}
	release := c.signal()
	c.spawn(func() { c.splitGen(in, out, release) })
	v := recvRat(in.dat)
	atomic.AddInt64(&c.gets, 1)
	out[0].dat <- v
	if !both {
		recvSignal(wait)
	}
	recvSignal(out[1].req)
	out[1].dat <- v
	release <- struct{}{}
}

func (c *psCtx) splitInto(in series, out [2]series) {
	release := c.signal()
	c.spawn(func() { c.splitGen(in, out, release) })
	release <- struct{}{}
}

func (c *psCtx) split(u series) [2]series {
	out := [2]series{c.series(), c.series()}
	c.spawn(func() { c.splitInto(u, out) })
	return out
}

func (c *psCtx) rep(v rat) series {
	z := c.series()
	c.spawn(func() {
		for {
			put(z, v)
		}
	})
	return z
}

func (c *psCtx) ones() series { return c.rep(ratOne) }
func (c *psCtx) twos() series { return c.rep(rat{2, 1}) }

func (c *psCtx) add(u, v series) series {
	z := c.series()
	c.spawn(func() {
		for {
			recvSignal(z.req)
			uv := c.get2(u, v)
			switch {
			case !uv[0].isEnd() && !uv[1].isEnd():
				z.dat <- uv[0].add(uv[1])
			case uv[0].isEnd() && !uv[1].isEnd():
				z.dat <- uv[1]
				c.copyTo(v, z)
			case !uv[0].isEnd():
				z.dat <- uv[0]
				c.copyTo(u, z)
			default:
				z.dat <- ratEnd
				return
			}
		}
	})
	return z
}

func (c *psCtx) cmul(k rat, u series) series {
	z := c.series()
	c.spawn(func() {
		for {
			recvSignal(z.req)
			a := c.get(u)
			if a.isEnd() {
				z.dat <- ratEnd
				return
			}
			z.dat <- k.mul(a)
		}
	})
	return z
}

func (c *psCtx) sub(u, v series) series { return c.add(u, c.cmul(ratOne.neg(), v)) }

func (c *psCtx) shift(k rat, u series) series {
	z := c.series()
	c.spawn(func() {
		put(z, k)
		c.copyTo(u, z)
	})
	return z
}

func (c *psCtx) mul(u, v series) series {
	z := c.series()
	c.spawn(func() {
		recvSignal(z.req)
		uv := c.get2(u, v)
		if uv[0].isEnd() || uv[1].isEnd() {
			z.dat <- ratEnd
			return
		}
		z.dat <- uv[0].mul(uv[1])
		uu := c.split(u)
		vv := c.split(v)
		av := c.cmul(uv[0], vv[0])
		bu := c.cmul(uv[1], uu[0])
		w := c.add(av, bu)
		recvSignal(z.req)
		z.dat <- c.get(w)
		rest := c.mul(uu[1], vv[1])
		c.copyTo(c.add(w, rest), z)
	})
	return z
}

func (c *psCtx) diff(u series) series {
	z := c.series()
	c.spawn(func() {
		recvSignal(z.req)
		if a := c.get(u); !a.isEnd() {
			for i := int64(1); ; i++ {
				a := c.get(u)
				if a.isEnd() {
					break
				}
				z.dat <- rat{i, 1}.mul(a)
				recvSignal(z.req)
			}
		}
		z.dat <- ratEnd
	})
	return z
}

func (c *psCtx) integ(k rat, u series) series {
	z := c.series()
	c.spawn(func() {
		put(z, k)
		for i := int64(1); ; i++ {
			recvSignal(z.req)
			a := c.get(u)
			if a.isEnd() {
				z.dat <- ratEnd
				return
			}
			z.dat <- mkRat(1, i).mul(a)
		}
	})
	return z
}

func (c *psCtx) recip(u series) series {
	z := c.series()
	c.spawn(func() {
		zz := [2]series{c.series(), c.series()}
		recvSignal(z.req)
		r := c.get(u).recip()
		z.dat <- r
		minusRUU := c.cmul(r.neg(), u)
		fedBack := c.shift(r, zz[0])
		c.splitInto(c.mul(minusRUU, fedBack), zz)
		c.copyTo(zz[1], z)
	})
	return z
}

func (c *psCtx) exp(u series) series {
	zz := [2]series{c.series(), c.series()}
	du := c.diff(u)
	prod := c.mul(zz[0], du)
	c.splitInto(c.integ(ratOne, prod), zz)
	return zz[1]
}

func (c *psCtx) monSubst(u series, c0 rat, n int) series {
	z := c.series()
	c.spawn(func() {
		k := ratOne
		for {
			recvSignal(z.req)
			a := c.get(u)
			if a.isEnd() {
				z.dat <- ratEnd
				return
			}
			z.dat <- a.mul(k)
			k = k.mul(c0)
			for i := 1; i < n; i++ {
				recvSignal(z.req)
				z.dat <- ratZero
			}
		}
	})
	return z
}

func (c *psCtx) sinCos() (series, series) {
	sin := [2]series{c.series(), c.series()}
	cos := [2]series{c.series(), c.series()}
	c.splitInto(c.integ(ratZero, cos[0]), sin)
	c.splitInto(c.integ(ratOne, c.cmul(ratOne.neg(), sin[0])), cos)
	return sin[1], cos[1]
}

const psTerms = 10

type psComputed struct {
	name  string
	coefs []rat
}

func (c *psCtx) take(s series, n int) []rat {
	out := make([]rat, n)
	for i := range out {
		out[i] = c.get(s)
	}
	return out
}

func (c *psCtx) compute() []psComputed {
	n := psTerms
	var out []psComputed
	out = append(out, psComputed{"ones", c.take(c.ones(), 5)})
	out = append(out, psComputed{"ones+twos", c.take(c.add(c.ones(), c.twos()), n)})
	out = append(out, psComputed{"d/dx ones", c.take(c.diff(c.ones()), n)})
	out = append(out, psComputed{"integ ones", c.take(c.integ(ratZero, c.ones()), n)})
	out = append(out, psComputed{"-1*twos", c.take(c.cmul(ratOne.neg(), c.twos()), n)})
	out = append(out, psComputed{"ones-twos", c.take(c.sub(c.ones(), c.twos()), n)})
	out = append(out, psComputed{"ones*ones", c.take(c.mul(c.ones(), c.ones()), n)})
	out = append(out, psComputed{"exp(ones)", c.take(c.exp(c.ones()), n)})
	atan := c.integ(ratZero, c.monSubst(c.ones(), ratOne.neg(), 2))
	out = append(out, psComputed{"atan", c.take(atan, n)})
	sin, cos := c.sinCos()
	out = append(out, psComputed{"tan", c.take(c.mul(sin, c.recip(cos)), n)})
	return out
}

func psExpected() []psComputed {
	n := int64(psTerms)
	seq := func(f func(k int64) rat) []rat {
		v := make([]rat, n)
		for k := range v {
			v[k] = f(int64(k))
		}
		return v
	}
	// exp(x/(1-x)) = sum a(k) x^k / k! with a(0) = a(1) = 1,
	// a(k) = (2k-1) a(k-1) - (k-1)(k-2) a(k-2) (OEIS A000262).
	a := []int64{1, 1}
	for k := int64(2); k < n; k++ {
		a = append(a, (2*k-1)*a[k-1]-(k-1)*(k-2)*a[k-2])
	}
	fact := int64(1)
	exp := seq(func(k int64) rat {
		if k > 0 {
			fact *= k
		}
		return mkRat(a[k], fact)
	})
	return []psComputed{
		{"ones", []rat{ratOne, ratOne, ratOne, ratOne, ratOne}},
		{"ones+twos", seq(func(int64) rat { return rat{3, 1} })},
		{"d/dx ones", seq(func(k int64) rat { return rat{k + 1, 1} })},
		{"integ ones", seq(func(k int64) rat {
			if k == 0 {
				return ratZero
			}
			return mkRat(1, k)
		})},
		{"-1*twos", seq(func(int64) rat { return rat{-2, 1} })},
		{"ones-twos", seq(func(int64) rat { return rat{-1, 1} })},
		{"ones*ones", seq(func(k int64) rat { return rat{k + 1, 1} })},
		{"exp(ones)", exp},
		{"atan", seq(func(k int64) rat {
			switch k % 4 {
			case 1:
				return mkRat(1, k)
			case 3:
				return mkRat(-1, k)
			}
			return ratZero
		})},
		{"tan", []rat{ratZero, ratOne, ratZero, mkRat(1, 3), ratZero, mkRat(2, 15),
			ratZero, mkRat(17, 315), ratZero, mkRat(62, 2835)}},
	}
}

// powserRun computes and checks the series in a fresh context, then tears it down;
// returns the time of the computation and the gets.
func powserRun() (time.Duration, int64, error) {
	c := new(psCtx)
	start := time.Now()
	got := c.compute()
	elapsed := time.Since(start)
	gets := atomic.LoadInt64(&c.gets)
	c.shutdown()
	want := psExpected()
	if len(got) != len(want) {
		return 0, 0, fmt.Errorf("%d series computed, %d expected", len(got), len(want))
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			return 0, 0, fmt.Errorf("got %v, expected %v", got[i], want[i])
		}
	}
	return elapsed, gets, nil
}

func BenchmarkPowser(b *testing.B) {
	var total time.Duration
	var gets int64
	for i := 0; i < b.N; i++ {
		elapsed, n, err := powserRun()
		if err != nil {
			b.Fatal(err)
		}
		total += elapsed
		gets += n
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(gets), "ns/get")
}

// ---- WakeupParallel ----

var wakeupDelays = []time.Duration{
	0, 1 * time.Microsecond, 2 * time.Microsecond, 5 * time.Microsecond,
	10 * time.Microsecond, 20 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond,
}

// wakeupDelay is added to the sender's delay, so that the receiver is likely parked
// when the send comes (Go's wakeDelay).
const wakeupDelay = 5 * time.Microsecond

func spinFor(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

func nanosleepFor(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// benchWakeup: two goroutines take turns: one waits delay and receives, while the
// other waits delay+wakeupDelay and sends; then the roles swap. One op = both turns.
func benchWakeup(wait func(time.Duration), delay time.Duration) func(*testing.B) {
	return func(b *testing.B) {
		ping, pong := make(chan struct{}), make(chan struct{})
		start, done := make(chan struct{}), make(chan struct{})
		n := b.N
		go func() {
			<-start
			for i := 0; i < n; i++ {
				wait(delay + wakeupDelay)
				ping <- struct{}{}
				wait(delay)
				<-pong
			}
			done <- struct{}{}
		}()
		go func() {
			for i := 0; i < n; i++ {
				wait(delay)
				<-ping
				wait(delay + wakeupDelay)
				pong <- struct{}{}
			}
			done <- struct{}{}
		}()
		b.ResetTimer()
		start <- struct{}{}
		<-done
		<-done
	}
}

// ---- WakeupLatency ----

// Spin of the busy sender before each send; long enough for the receiver to be parked
// again.
const wakeLatencySpin = 200 * time.Microsecond

func BenchmarkWakeupLatency(b *testing.B) {
	ch := make(chan time.Time)
	lat := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	go func() {
		for t := range ch {
			if !t.IsZero() {
				lat = append(lat, time.Since(t))
			}
		}
		close(done)
	}()
	b.ResetTimer()
	missed := 0
	for i := 0; i < b.N; i++ {
		spinFor(wakeLatencySpin)
		t := time.Now()
		select {
		case ch <- t:
		default:
			// The receiver was not parked yet: no sample.
			missed++
			ch <- time.Time{}
		}
	}
	spinFor(wakeLatencySpin)
	b.StopTimer()
	close(ch)
	<-done
	b.ReportMetric(float64(missed), "missed")
	if len(lat) == 0 {
		return // every send missed (possible in the b.N = 1 probe run)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rank := func(p float64) float64 {
		i := int(p*float64(len(lat))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		return float64(lat[i].Nanoseconds()) / 1e3
	}
	b.ReportMetric(rank(0.5), "p50-us")
	b.ReportMetric(rank(0.9), "p90-us")
	b.ReportMetric(rank(0.99), "p99-us")
	b.ReportMetric(rank(1), "max-us")
}
