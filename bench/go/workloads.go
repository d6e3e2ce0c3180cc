// The comparison workloads of bench/src/workloads/mod.rs, one function each. Every
// returns the figure in the workload's unit or an error when a
// check fails. Timing uses time.Now/time.Since (monotonic clock).

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// nsPer returns elapsed in ns divided by n.
func nsPer(elapsed time.Duration, n int) float64 {
	return float64(elapsed.Nanoseconds()) / float64(n)
}

// chain: chainHops goroutines linked by channels of the given capacity (0:
// unbuffered, 1: capacity 1); each receives from its left and sends value+1 to its
// right. chainTokens tokens go through one after another (the next one enters when
// the previous one has left the tail). Figure: ns per hop. Construction is not timed:
// "built" means every relay has started (it signals a WaitGroup right before its first
// receive), so the first token does not pay for the relays' first scheduling.
func chain(capacity int) (float64, error) {
	head := make(chan int, capacity)
	var started sync.WaitGroup
	started.Add(chainHops)
	in := head
	for i := 0; i < chainHops; i++ {
		out := make(chan int, capacity)
		go func(in <-chan int, out chan<- int) {
			started.Done()
			for v := range in {
				out <- v + 1
			}
			close(out)
		}(in, out)
		in = out
	}
	tail := in
	started.Wait()

	start := time.Now()
	for t := 0; t < chainTokens; t++ {
		head <- t
		if got := <-tail; got != t+chainHops {
			return 0, fmt.Errorf("token %d came out as %d, want %d", t, got, t+chainHops)
		}
	}
	elapsed := time.Since(start)

	// Join: closing the head closes every link in turn, down to the tail.
	close(head)
	for range tail {
	}
	return nsPer(elapsed, chainTokens*chainHops), nil
}

// generate and filter are Go's sieve.go, unchanged but for the int type.
func generate(ch chan<- int) {
	for i := 2; ; i++ {
		ch <- i
	}
}

func filter(in <-chan int, out chan<- int, prime int) {
	for {
		i := <-in
		if i%prime != 0 {
			out <- i
		}
	}
}

// sieve: the concurrent prime sieve over unbuffered channels until sievePrimes primes
// are out (the last must be sieveLastPrime). Figure: ms for the whole run, goroutine
// creation included. As in sieve.go, the generator and filters are never stopped: when
// the timing ends they fill the pipeline up, block, and die with the process.
func sieve() (float64, error) {
	start := time.Now()
	ch := make(chan int)
	go generate(ch)
	prime := 0
	for i := 0; i < sievePrimes; i++ {
		prime = <-ch
		ch1 := make(chan int)
		go filter(ch, ch1, prime)
		ch = ch1
	}
	elapsed := time.Since(start)
	if prime != sieveLastPrime {
		return 0, fmt.Errorf("prime #%d is %d, want %d", sievePrimes, prime, sieveLastPrime)
	}
	return float64(elapsed.Nanoseconds()) / 1e6, nil
}

// pingPong: two goroutines bounce a token over two unbuffered channels, pingpongRounds
// round trips. The pinger times from its first send to its last receive. Figure: ns per
// round trip.
func pingPong() (float64, error) {
	ping := make(chan int)
	pong := make(chan int)
	go func() { // ponger
		for v := range ping {
			pong <- v + 1
		}
	}()
	type result struct {
		elapsed time.Duration
		last    int
	}
	done := make(chan result)
	go func() { // pinger
		start := time.Now()
		v := 0
		for i := 0; i < pingpongRounds; i++ {
			ping <- v
			v = <-pong
		}
		elapsed := time.Since(start)
		close(ping)
		done <- result{elapsed, v}
	}()
	r := <-done
	if r.last != pingpongRounds {
		return 0, fmt.Errorf("token is %d after %d round trips", r.last, pingpongRounds)
	}
	return nsPer(r.elapsed, pingpongRounds), nil
}

// spawnJoin: spawn spawnTasks goroutines that each return their index, then join them
// in order, summing the results. Go has no join handle; the closest equivalent of
// "spawn, keep a handle, join handle i" is a per-goroutine result channel of capacity
// 1 (a oneshot): the goroutine delivers its result and exits without waiting for the
// joiner, and the joiner blocks on that one task, in order, as JoinHandle::join does.
// (A slice slot + one WaitGroup would be cheaper but is a barrier, not a join of each
// task.) Figure: ns per task (spawn + run + join), channel allocation included.
func spawnJoin() (float64, error) {
	start := time.Now()
	handles := make([]chan int, spawnTasks)
	for i := range handles {
		h := make(chan int, 1)
		handles[i] = h
		go func(i int, h chan<- int) {
			h <- i
		}(i, h)
	}
	sum := 0
	for _, h := range handles {
		sum += <-h
	}
	elapsed := time.Since(start)
	if want := spawnTasks * (spawnTasks - 1) / 2; sum != want {
		return 0, fmt.Errorf("sum is %d, want %d", sum, want)
	}
	return nsPer(elapsed, spawnTasks), nil
}

// yield: yieldTasksPerWorker goroutines per P each call runtime.Gosched yieldCount
// times. Figure: ns per yield (elapsed, spawn to last join, / total yields).
func yield() (float64, error) {
	n := yieldTasksPerWorker * runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer wg.Done()
			for j := 0; j < yieldCount; j++ {
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	return nsPer(elapsed, n*yieldCount), nil
}

// mutex: n goroutines each lock a sync.Mutex, increment a shared counter and unlock,
// mutexOps/n times each; the count is checked. Figure: ns per lock/unlock (elapsed,
// spawn to last join, / mutexOps).
func mutex(n int) (float64, error) {
	if mutexOps%n != 0 {
		return 0, fmt.Errorf("%d ops do not split evenly over %d goroutines", mutexOps, n)
	}
	per := mutexOps / n
	var (
		mu    sync.Mutex
		count int
		wg    sync.WaitGroup
	)
	start := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer wg.Done()
			for j := 0; j < per; j++ {
				mu.Lock()
				count++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	mu.Lock()
	got := count
	mu.Unlock()
	if got != mutexOps {
		return 0, fmt.Errorf("count is %d, want %d", got, mutexOps)
	}
	return nsPer(elapsed, mutexOps), nil
}

// Load of sleepLateness: goroutines per P, and how long each spins between yields.
const (
	sleepLoadPerWorker = 2
	sleepSpin          = 50 * time.Microsecond
	sleepDur           = time.Millisecond
)

// spin busy-waits d on the clock (the Rust side's spin).
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

// sleepLateness: sleepLoadPerWorker goroutines per P each loop "spin 50 µs, then
// runtime.Gosched()" until told to stop, while one goroutine does sleepCount
// time.Sleep(1 ms), each timed. Figure: mean lateness in µs (measured - 1 ms).
func sleepLateness() (float64, error) {
	loads := sleepLoadPerWorker * runtime.GOMAXPROCS(0)
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	wg.Add(loads)
	for i := 0; i < loads; i++ {
		go func() {
			defer wg.Done()
			for !stop.Load() {
				spin(sleepSpin)
				runtime.Gosched()
			}
		}()
	}
	res := make(chan []time.Duration)
	go func() { // the sleeper
		late := make([]time.Duration, sleepCount)
		for i := range late {
			t0 := time.Now()
			time.Sleep(sleepDur)
			late[i] = time.Since(t0) - sleepDur
		}
		res <- late
	}()
	late := <-res
	stop.Store(true)
	wg.Wait()

	var total time.Duration
	for _, l := range late {
		total += l
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	logf("sleep_lateness: %d load goroutines; lateness min %v, median %v, p99 %v, max %v",
		loads, late[0], late[len(late)/2], late[len(late)*99/100], late[len(late)-1])
	return float64(total.Nanoseconds()) / float64(len(late)) / 1e3, nil
}

// rssBytes returns the resident set size from /proc/self/statm.
// statusKiB is a "Name: N kB" line of /proc/self/status, 0 if unreadable.
func statusKiB(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+":") {
			f := strings.Fields(strings.TrimPrefix(line, name+":"))
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// minorFaults is this process's minor page faults so far (/proc/self/stat's 10th
// field), 0 if unreadable.
func minorFaults() int64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name (field 2) is in parentheses and may hold blanks.
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 7 {
			n, _ := strconv.ParseInt(f[7], 10, 64)
			return n
		}
	}
	return 0
}

func rssBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/self/statm: unexpected %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/statm: %v", err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// spawnPark: n goroutines each parked on its own channel receive, then released in
// spawn order and waited for (bench/src/workloads/proc.rs). Figure: the spawn
// loop's ns per goroutine; the companions name+"_wake" (ns per goroutine from the
// first release to the last exit) and name+"_rss" (bytes of RSS per parked goroutine,
// RSS once all are parked - RSS before the first spawn) go into also.
func spawnPark(n int, name string) (float64, error) {
	// Clean baseline: collect and return freed memory to the OS before the "before"
	// reading, so that garbage of the runtime's start-up does not sit in it (and get
	// reused by the goroutines, hiding part of their cost).
	runtime.GC()
	debug.FreeOSMemory()
	before, err := rssBytes()
	if err != nil {
		return 0, skipError("cannot read RSS: " + err.Error())
	}
	pteBefore, faultsBefore := statusKiB("VmPTE"), minorFaults()

	release := make([]chan struct{}, n)
	var parked, done sync.WaitGroup
	parked.Add(n)
	done.Add(n)
	t := time.Now()
	for i := range release {
		ch := make(chan struct{})
		release[i] = ch
		go func() {
			parked.Done() // right before the receive
			<-ch
			done.Done()
		}()
	}
	spawn := time.Since(t)
	parked.Wait()
	// Every goroutine has reached the line before its receive; this sleep lets the last
	// few (which signalled but may still be running) park before the reading.
	time.Sleep(20 * time.Millisecond)
	after, err := rssBytes()
	if err != nil {
		return 0, skipError("cannot read RSS: " + err.Error())
	}
	pte := (statusKiB("VmPTE") - pteBefore) * 1024
	faults := minorFaults() - faultsBefore

	t = time.Now()
	for _, ch := range release {
		ch <- struct{}{}
	}
	done.Wait()
	wake := time.Since(t)
	logf("%s: RSS %d B before, %d B with %d goroutines parked", name, before, after, n)
	also[name+"_wake"] = float64(wake.Nanoseconds()) / float64(n)
	// As goro's side: RSS and page tables together, and the page tables alone.
	also[name+"_rss"] = float64(after-before+pte) / float64(n)
	also[name+"_pte"] = float64(pte) / float64(n)
	also[name+"_faults"] = float64(faults) / float64(n)
	return float64(spawn.Nanoseconds()) / float64(n), nil
}
