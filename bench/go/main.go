// Command goro-bench-go is the Go contender of goro's benchmark harness
// (cargo run --release -p goro-bench --bin compare). It mirrors the workloads of
// bench/src/workloads/: the same parameters, the same measured quantity and unit, and
// the same one-line JSON result. Keep the two in step. Standard library only.
//
//	go build -o /tmp/goro-bench-go . && GOMAXPROCS=2 /tmp/goro-bench-go chain
//
// Usage:
//
//	goro-bench-go WORKLOAD   run one workload once; print {"value": <float>} (or
//	                         {"skip": "reason"}) as the last line on stdout, exit 0
//	goro-bench-go serve      echo server on 127.0.0.1:0: print "LISTENING <addr>"
//	                         on stdout, echo until stdin reaches EOF (or SIGTERM)
//	goro-bench-go load ARGS  the echo load generator (load.go)
//	goro-bench-go slow_gets N URL_BASE
//	                         N concurrent slow GETs with net/http (slowgets.go)
//
// Diagnostics go to stderr. The parallelism is GOMAXPROCS, set by the harness; "per
// worker" means per P here (runtime.GOMAXPROCS(0)). The ports of Go's own benchmarks
// (Sema*, Mutex*, Powser, Wakeup*) run under testing.Benchmark, sized by Go's b.N
// machinery to GORO_BENCH_TARGET_MS (default 200) of benchmark time.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"
)

// Parameters, as in bench/src/workloads/mod.rs.
const (
	chainHops           = 10_000
	chainTokens         = 100
	sievePrimes         = 5_000
	sieveLastPrime      = 48_611
	pingpongRounds      = 200_000
	spawnTasks          = 100_000
	yieldTasksPerWorker = 2
	yieldCount          = 200_000
	mutexOps            = 400_000
	sleepCount          = 300
	latencySamples      = 1000
)

// workloads maps the workload names of bench/src/workloads/mod.rs to their
// implementations. Each returns the figure in the workload's unit, or an error (a
// failed check), which makes the worker exit non-zero.
var workloads = map[string]func() (float64, error){
	"chain":           func() (float64, error) { return chain(0) },
	"chainbuf":        func() (float64, error) { return chain(1) },
	"sieve":           sieve,
	"pingpong":        pingPong,
	"spawn_join":      spawnJoin,
	"yield":           yield,
	"mutex2":          func() (float64, error) { return mutex(2) },
	"mutex8":          func() (float64, error) { return mutex(8) },
	"mutex64":         func() (float64, error) { return mutex(64) },
	"sleep_lateness":  sleepLateness,
	"spawn_park_10k":  func() (float64, error) { return spawnPark(10_000, "spawn_park_10k") },
	"spawn_park_100k": func() (float64, error) { return spawnPark(100_000, "spawn_park_100k") },
	"spawn_park_1m":   func() (float64, error) { return spawnPark(1_000_000, "spawn_park_1m") },
	"ticker/none":     func() (float64, error) { return ticker("none") },
	"ticker/sleep":    func() (float64, error) { return ticker("sleep") },
	"ticker/cpu":      func() (float64, error) { return ticker("cpu") },
	"fairness":        fairness,
}

// benchmarks are the ports of Go's own benchmarks: the function, and the metric that
// is the figure ("" for ns/op).
var benchmarks = map[string]struct {
	f      func(*testing.B)
	metric string
}{
	"Powser":           {BenchmarkPowser, "ns/get"},
	"SemaUncontended":  {BenchmarkSemaUncontended, ""},
	"SemaSyntNonblock": {BenchmarkSemaSyntNonblock, ""},
	"SemaSyntBlock":    {BenchmarkSemaSyntBlock, ""},
	"SemaWorkNonblock": {BenchmarkSemaWorkNonblock, ""},
	"SemaWorkBlock":    {BenchmarkSemaWorkBlock, ""},
	"MutexUncontended": {BenchmarkMutexUncontended, ""},
	"Mutex":            {BenchmarkMutex, ""},
	"MutexSlack":       {BenchmarkMutexSlack, ""},
	"MutexWork":        {BenchmarkMutexWork, ""},
	"MutexWorkSlack":   {BenchmarkMutexWorkSlack, ""},
	"WorkOnly":         {BenchmarkWorkOnly, ""},
	"WakeupLatency":    {BenchmarkWakeupLatency, "p50-us"},
	// cancel.go (issue 30).
	"ContextWithCancel":     {BenchmarkContextWithCancel, ""},
	"ContextCommonParent":   {BenchmarkContextCommonParent, ""},
	"ContextCancelTree1000": {BenchmarkContextCancelTree1000, ""},
	"TimerStop":             {BenchmarkTimerStop, ""},
	"TimerReset":            {BenchmarkTimerReset, ""},
}

func init() {
	for _, d := range wakeupDelays {
		us := d.Microseconds()
		benchmarks[fmt.Sprintf("WakeupParallelSpinning/%dus", us)] = struct {
			f      func(*testing.B)
			metric string
		}{benchWakeup(spinFor, d), ""}
		benchmarks[fmt.Sprintf("WakeupParallelSyscall/%dus", us)] = struct {
			f      func(*testing.B)
			metric string
		}{benchWakeup(nanosleepFor, d), ""}
	}
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "goro-bench-go: "+format+"\n", args...)
}

func usage() {
	names := make([]string, 0, len(workloads)+len(benchmarks))
	for n := range workloads {
		names = append(names, n)
	}
	for n := range benchmarks {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: goro-bench-go WORKLOAD | serve | load ARGS\nworkloads: %v\n", names)
	os.Exit(2)
}

// also holds the figures of a run's companion rows, by row name; printValue adds them
// to the result line.
var also = map[string]float64{}

// printValue prints the result line: {"value": v}, with "also" if there are companion
// figures.
func printValue(v float64) {
	line := map[string]interface{}{"value": v}
	if len(also) > 0 {
		line["also"] = also
	}
	b, err := json.Marshal(line)
	if err != nil { // NaN or ±Inf: not a figure
		logf("bad figure %v: %v", v, err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}

// skipError makes the worker print {"skip": reason} instead of failing.
type skipError string

func (e skipError) Error() string { return string(e) }

// envInt is the whole number in the environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// ticker is the blocking suite's ticker beside blockers of kind (blockfree.go): the
// p50 of its lateness in µs, p99 and max as companions.
func ticker(kind string) (float64, error) {
	p50, p99, max := blockfree(kind, envInt("GORO_BENCH_BURSTS", 20))
	also["ticker/"+kind+"/p99"] = p99
	also["ticker/"+kind+"/max"] = max
	return p50, nil
}

// benchmark runs a port of a Go benchmark with testing.Benchmark.
func benchmark(name string) (float64, error) {
	bm := benchmarks[name]
	testing.Init()
	benchtime := fmt.Sprintf("%dms", envInt("GORO_BENCH_TARGET_MS", 200))
	if name == "WakeupLatency" {
		benchtime = fmt.Sprintf("%dx", latencySamples)
	}
	if err := flag.Set("test.benchtime", benchtime); err != nil {
		return 0, err
	}
	r := testing.Benchmark(bm.f)
	if r.N == 0 {
		return 0, errors.New("the benchmark failed (see above)")
	}
	if name == "WakeupLatency" {
		for _, q := range []string{"p90", "p99", "max"} {
			also["WakeupLatency/"+q] = r.Extra[q+"-us"]
		}
		also["WakeupLatency/missed"] = r.Extra["missed"]
	}
	if bm.metric != "" {
		v, ok := r.Extra[bm.metric]
		if !ok {
			return 0, fmt.Errorf("no %s metric", bm.metric)
		}
		return v, nil
	}
	return float64(r.T.Nanoseconds()) / float64(r.N), nil
}

func main() {
	// `load` (load.go) and `slow_gets` (slowgets.go) have arguments of their own.
	if len(os.Args) < 2 || (len(os.Args) != 2 && os.Args[1] != "load" && os.Args[1] != "slow_gets") {
		usage()
	}
	name := os.Args[1]
	switch name {
	case "serve":
		os.Exit(serve())
	case "load":
		os.Exit(load(os.Args[2:]))
	case "slow_gets":
		os.Exit(slowGets(os.Args[2:]))
	}
	run, ok := workloads[name]
	if _, bench := benchmarks[name]; bench {
		run, ok = func() (float64, error) { return benchmark(name) }, true
	}
	if !ok {
		b, _ := json.Marshal(map[string]string{"skip": "not ported to Go"})
		fmt.Println(string(b))
		return
	}
	start := time.Now()
	v, err := run()
	var skip skipError
	if errors.As(err, &skip) {
		logf("%s: skipped: %v", name, skip)
		b, _ := json.Marshal(map[string]string{"skip": string(skip)})
		fmt.Println(string(b))
		return
	}
	if err != nil {
		logf("%s: %v", name, err)
		os.Exit(1)
	}
	logf("%s: %v (GOMAXPROCS %d, run took %v)", name, v, runtime.GOMAXPROCS(0),
		time.Since(start).Round(time.Millisecond))
	printValue(v)
}
