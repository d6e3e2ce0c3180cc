// The Go side of goro's `blockfree` benchmark (bench/src/bin/blockfree.rs, which
// builds and runs this and says what is measured): a ticker goroutine sleeps 1 ms in a
// loop while, in bursts, four goroutines block the ticker's Ps.
//
//	blockfree none|sleep|cpu BURSTS
//
// sleep: each blocker makes a raw nanosleep system call (syscall.Nanosleep goes
// through entersyscall, so sysmon retakes its P). cpu: each blocker spins with no
// function call the compiler could make a preemption point of; Go preempts it with a
// signal. none: the blockers return at once (the machine's floor). Prints one
// line: "ticks p50_ns p99_ns max_ns".
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	tick     = time.Millisecond
	blockers = 4
	sleepFor = 20 * time.Millisecond
	spinFor  = 50 * time.Millisecond
	burstGap = 30 * time.Millisecond
	warmUp   = 50 * time.Millisecond
)

var sink uint64

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
		for time.Since(start) < spinFor {
			for i := 0; i < 1000; i++ {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		sink += x
	default:
		fmt.Fprintln(os.Stderr, "unknown kind", kind)
		os.Exit(2)
	}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: blockfree none|sleep|cpu BURSTS")
		os.Exit(2)
	}
	kind := os.Args[1]
	bursts, err := strconv.Atoi(os.Args[2])
	if err != nil || bursts <= 0 {
		fmt.Fprintln(os.Stderr, "BURSTS must be a positive number")
		os.Exit(2)
	}
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
	fmt.Printf("%d %d %d %d\n", n, late[n/2], late[n*99/100], late[n-1])
}
