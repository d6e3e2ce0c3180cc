package main

// Go ports of the Sema* benchmarks (Go 1.19 sync/runtime_sema_test.go, which drives the
// runtime semaphore through sync's test exports) and the Mutex* benchmarks (Go 1.19
// sync/mutex_test.go), written for goro's `sync` suite. The goro side is
// bench/src/workloads/sync.rs; the workloads are the same, op for op.
//
// Differences from Go's own benchmarks, all shared with the goro side:
//   - The runtime semaphore is reached with go:linkname (sema.go), not through
//     sync's export_test.go (which only sync's own tests can see). Same functions.
//   - Every Mutex* critical section increments a counter, and the benchmark fails if
//     the total differs from b.N: a cheap check that no update was lost (no two
//     holders at once). Go's benchmarks lock and unlock with nothing in between.
//   - The result of the local work is kept (added to a sink when a goroutine ends).
//     In Go's benchmarks foo is dead (assigned to the blank identifier only) and Go
//     1.19's compiler deletes the body of the work loop, leaving an empty
//     100-iteration loop; here the work is done, as on the goro side (where
//     black_box keeps it).
//   - BenchmarkWorkOnly is not in Go's tree: it times the local work of the *Work*
//     benchmarks alone, so that the compilers' code for it can be compared.
//
// main.go runs them with testing.Benchmark.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// workIters is the length of the local work loop of the *Work* benchmarks.
const workIters = 100

// localWork is the "work" of the *Work* benchmarks: Go's loop of foo *= 2; foo /= 2,
// workIters times. The compiler inlines it, as the loop is inline in Go's benchmarks.
func localWork(foo int) int {
	for i := 0; i < workIters; i++ {
		foo *= 2
		foo /= 2
	}
	return foo
}

// sink receives every goroutine's final foo, so that the work loops are not dead code.
var sink int64

// keep adds foo to sink.
func keep(foo int) { atomic.AddInt64(&sink, int64(foo)) }

// BenchmarkSemaUncontended: every goroutine releases then acquires its own semaphore,
// padded to its own cache lines; nothing ever waits.
func BenchmarkSemaUncontended(b *testing.B) {
	type paddedSem struct {
		sem uint32
		pad [32]uint32
	}
	b.RunParallel(func(pb *testing.PB) {
		s := new(paddedSem)
		for pb.Next() {
			semrelease(&s.sem, false, 0)
			semacquire(&s.sem)
		}
	})
}

// benchSema: GOMAXPROCS goroutines share ONE semaphore; each op is a release followed
// by an acquire (with the local work in between if work). With block, one more
// goroutine takes GOMAXPROCS/2 units for good before the loops end, so that fewer
// units circulate than there are goroutines and some acquires must wait (none do with
// one P: GOMAXPROCS/2 is 0). Each goroutine releases once more at the end so that the
// taker can finish.
func benchSema(b *testing.B, block, work bool) {
	if b.N == 0 {
		return
	}
	var sem uint32
	if block {
		taken := make(chan struct{})
		go func() {
			for i := 0; i < runtime.GOMAXPROCS(0)/2; i++ {
				semacquire(&sem)
			}
			close(taken)
		}()
		defer func() { <-taken }()
	}
	b.RunParallel(func(pb *testing.PB) {
		foo := 0
		for pb.Next() {
			semrelease(&sem, false, 0)
			if work {
				foo = localWork(foo)
			}
			semacquire(&sem)
		}
		keep(foo)
		semrelease(&sem, false, 0)
	})
}

func BenchmarkSemaSyntNonblock(b *testing.B) { benchSema(b, false, false) }
func BenchmarkSemaSyntBlock(b *testing.B)    { benchSema(b, true, false) }
func BenchmarkSemaWorkNonblock(b *testing.B) { benchSema(b, false, true) }
func BenchmarkSemaWorkBlock(b *testing.B)    { benchSema(b, true, true) }

// countedMutex is a Mutex with the counter its holders increment.
type countedMutex struct {
	mu sync.Mutex
	n  int
}

// BenchmarkMutexUncontended: every goroutine locks and unlocks its own mutex, padded
// to its own cache lines.
func BenchmarkMutexUncontended(b *testing.B) {
	type paddedMutex struct {
		countedMutex
		pad [128]uint8
	}
	var total int64
	var totalMu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		var m paddedMutex
		for pb.Next() {
			m.mu.Lock()
			m.n++
			m.mu.Unlock()
		}
		totalMu.Lock()
		total += int64(m.n)
		totalMu.Unlock()
	})
	if total != int64(b.N) {
		b.Fatalf("lost updates: %d critical sections counted, %d expected", total, b.N)
	}
}

// benchMutex: goroutines share ONE mutex, lock+unlock per op (then the local work if
// work). With slack, RunParallel starts 10 goroutines per P instead of one (Go's
// b.SetParallelism(10)): all of them run the loop, so there are more contenders
// than Ps.
func benchMutex(b *testing.B, slack, work bool) {
	var m countedMutex
	if slack {
		b.SetParallelism(10)
	}
	b.RunParallel(func(pb *testing.PB) {
		foo := 0
		for pb.Next() {
			m.mu.Lock()
			m.n++
			m.mu.Unlock()
			if work {
				foo = localWork(foo)
			}
		}
		keep(foo)
	})
	if m.n != b.N {
		b.Fatalf("lost updates: %d critical sections counted, %d expected", m.n, b.N)
	}
}

func BenchmarkMutex(b *testing.B)          { benchMutex(b, false, false) }
func BenchmarkMutexSlack(b *testing.B)     { benchMutex(b, true, false) }
func BenchmarkMutexWork(b *testing.B)      { benchMutex(b, false, true) }
func BenchmarkMutexWorkSlack(b *testing.B) { benchMutex(b, true, true) }

// BenchmarkWorkOnly (not in Go's tree): the local work of the *Work* benchmarks
// alone, per op, GOMAXPROCS goroutines in parallel.
func BenchmarkWorkOnly(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		foo := 0
		for pb.Next() {
			foo = localWork(foo)
		}
		keep(foo)
	})
}
