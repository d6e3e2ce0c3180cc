package main

// The cancellation benchmarks of goro's issue 30, Go's side (goro's side:
// bench/src/workloads/cancel.rs; the workloads are the same, op for op). Written for
// goro's harness after Go's own benchmarks of the same operations:
//
//   - ContextWithCancel: WithCancel(Background()) and its cancel, per op, on every P.
//   - ContextCommonParent: after context's BenchmarkCommonParentCancel (Go 1.19): the
//     same under one shared cancellable parent, with a value lookup and two busy
//     loops of 100 divisions around the cancel.
//   - ContextCancelTree1000: a parent, 1000 children under it, the parent's cancel;
//     one goroutine, ns per tree. The children's cancel funcs are kept in a slice
//     until the parent's cancel, as goro's side keeps its CancelFuncs, and are not
//     called (the parent's cancel ends the children).
//   - TimerStop, TimerReset: after time's BenchmarkStop and BenchmarkReset in their
//     per-op form (Go 1.23): NewTimer(1s).Stop() and t.Reset(Hour) per op, with
//     32768 pending AfterFunc(Hour) timers per P made first.
//
// Go 1.19 has no context.AfterFunc and the asynchronous timer channels of before
// Go 1.23 (Stop and Reset do not drain C); these benchmarks use only what it has.

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// treeChildren is the children per tree of ContextCancelTree1000.
const treeChildren = 1000

// garbagePerP is the pending timers made on each P before a timer benchmark.
const garbagePerP = 1 << 15

func BenchmarkContextWithCancel(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		bg := context.Background()
		for pb.Next() {
			_, cancel := context.WithCancel(bg)
			cancel()
		}
	})
}

// valueKey keys ContextCommonParent's value.
type valueKey struct{}

// divideDown is the busy loop of ContextCommonParent: 100 divisions.
func divideDown(x int) int {
	for i := 0; i < 100; i++ {
		x /= x + 1
	}
	return x
}

func BenchmarkContextCommonParent(b *testing.B) {
	root := context.WithValue(context.Background(), valueKey{}, "value")
	shared, cancelShared := context.WithCancel(root)
	defer cancelShared()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		x := 0
		for pb.Next() {
			ctx, cancel := context.WithCancel(shared)
			if ctx.Value(valueKey{}).(string) != "value" {
				b.Fatal("lost the value")
			}
			x = divideDown(x)
			cancel()
			x = divideDown(x)
		}
		keep(x)
	})
}

func BenchmarkContextCancelTree1000(b *testing.B) {
	cancels := make([]context.CancelFunc, 0, treeChildren)
	for i := 0; i < b.N; i++ {
		parent, cancel := context.WithCancel(context.Background())
		for j := 0; j < treeChildren; j++ {
			_, c := context.WithCancel(parent)
			cancels = append(cancels, c)
		}
		cancel() // ends the children too: their cancel funcs are not called
		cancels = cancels[:0]
	}
}

// withGarbageTimers makes garbagePerP pending AfterFunc(Hour) timers on each P, runs
// the benchmark body in parallel, and stops them after.
func withGarbageTimers(b *testing.B, body func(*testing.PB)) {
	var wg sync.WaitGroup
	garbage := make([][]*time.Timer, runtime.GOMAXPROCS(0))
	for i := range garbage {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			mine := make([]*time.Timer, garbagePerP)
			for j := range mine {
				mine[j] = time.AfterFunc(time.Hour, func() {})
			}
			garbage[i] = mine
		}(i)
	}
	wg.Wait()
	b.ResetTimer()
	b.RunParallel(body)
	b.StopTimer()
	for _, mine := range garbage {
		for _, t := range mine {
			t.Stop()
		}
	}
}

func BenchmarkTimerStop(b *testing.B) {
	withGarbageTimers(b, func(pb *testing.PB) {
		for pb.Next() {
			time.NewTimer(time.Second).Stop()
		}
	})
}

func BenchmarkTimerReset(b *testing.B) {
	withGarbageTimers(b, func(pb *testing.PB) {
		t := time.NewTimer(time.Hour)
		for pb.Next() {
			t.Reset(time.Hour)
		}
		t.Stop()
	})
}
