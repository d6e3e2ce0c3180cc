// Command goro-compare-go is the Go contender of goro's `compare` benchmark
// (cargo run --release -p goro-bench --bin compare). It mirrors the contract in
// bench/src/bin/compare/common.rs: the same workloads, the same parameters, the same
// measured quantity and unit, and the same one-line JSON result. Keep the two in step.
//
//	go build -o /tmp/goro-compare-go . && GOMAXPROCS=2 /tmp/goro-compare-go chain
//
// Usage:
//
//	goro-compare-go WORKLOAD   run one workload once; print {"value": <float>} (or
//	                           {"skip": "reason"}) as the last line on stdout, exit 0
//	goro-compare-go serve      echo server on 127.0.0.1:0: print "LISTENING <addr>"
//	                           on stdout, echo until stdin reaches EOF (or SIGTERM)
//
// Diagnostics go to stderr. The parallelism is GOMAXPROCS, set by the orchestrator;
// "per worker" in common.rs means per P here (runtime.GOMAXPROCS(0)). Standard
// library only.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"
)

// Parameters, as in common.rs.
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
)

// workloads maps the command-line names of common.rs to their implementations. Each
// returns the figure in the workload's unit, or an error (a failed check), which makes
// the worker exit non-zero.
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
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "goro-compare-go: "+format+"\n", args...)
}

func usage() {
	names := make([]string, 0, len(workloads))
	for n := range workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: goro-compare-go WORKLOAD | serve\nworkloads: %v\n", names)
	os.Exit(2)
}

// also holds the figures of a run's companion rows, by workload name (common.rs:
// Workload::companions); printValue adds them to the result line.
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

// printSkip prints the result line: {"skip": why}.
func printSkip(why string) {
	b, _ := json.Marshal(map[string]string{"skip": why})
	fmt.Println(string(b))
}

func main() {
	// `load` (load.go: echo_compare's Go load generator) is the one command with
	// arguments of its own.
	if len(os.Args) < 2 || (len(os.Args) != 2 && os.Args[1] != "load") {
		usage()
	}
	name := os.Args[1]
	if name == "serve" {
		os.Exit(serve())
	}
	if name == "load" {
		os.Exit(load(os.Args[2:]))
	}
	if name == "echo" {
		// Echo is measured by the orchestrator against `serve`, not as a worker.
		printSkip("echo runs as `goro-compare-go serve`, measured by the orchestrator")
		return
	}
	run, ok := workloads[name]
	if !ok {
		logf("unknown workload %q", name)
		usage()
	}
	start := time.Now()
	v, err := run()
	var skip skipError
	if errors.As(err, &skip) {
		logf("%s: skipped: %v", name, skip)
		printSkip(string(skip))
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
