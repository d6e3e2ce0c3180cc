// The Go side of goro's `blocking` suite (bench/src/workloads/blocking.rs says what is
// measured): a ticker goroutine sleeps 1 ms in a loop while, in bursts, four goroutines
// block the ticker's Ps.
//
// sleep: each blocker makes a raw nanosleep system call (syscall.Nanosleep goes
// through entersyscall, so sysmon retakes its P). cpu: each blocker spins with no
// function call the compiler could make a preemption point of; Go preempts it with a
// signal. none: the blockers return at once (the machine's floor).
package main

import (
	"sort"
	"sync"
	"syscall"
	"time"
)

const (
	tick     = time.Millisecond
	blockers = 4
	sleepFor = 20 * time.Millisecond
	spinLen  = 50 * time.Millisecond
	burstGap = 30 * time.Millisecond
	warmUp   = 50 * time.Millisecond
)

var blockSink uint64

func block(kind string) {
	switch kind {
	case "none":
	case "sleep":
		ts := syscall.NsecToTimespec(int64(sleepFor))
		for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
		}
	case "cpu":
		start := time.Now()
		x := uint64(1)
		for time.Since(start) < spinLen {
			for i := 0; i < 1000; i++ {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		blockSink += x
	}
}

// blockfree runs the ticker beside `bursts` bursts of `kind` blockers; the ticks'
// lateness p50, p99 and max in µs.
func blockfree(kind string, bursts int) (p50, p99, max float64) {
	var stop sync.WaitGroup
	done := make(chan struct{})
	var late []time.Duration
	stop.Add(1)
	go func() {
		defer stop.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			t := time.Now()
			time.Sleep(tick)
			late = append(late, time.Since(t)-tick)
		}
	}()
	time.Sleep(warmUp)
	for b := 0; b < bursts; b++ {
		var wg sync.WaitGroup
		for i := 0; i < blockers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				block(kind)
			}()
		}
		wg.Wait()
		time.Sleep(burstGap)
	}
	close(done)
	stop.Wait()
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	n := len(late)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return us(late[n/2]), us(late[n*99/100]), us(late[n-1])
}
