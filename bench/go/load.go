// The echo load generator on Go's runtime: a closed-loop client equivalent to
// bench/src/workloads/echo.rs, so that the echo suite can measure the servers with a
// load generator that goro's runtime did not write (`compare --suite echo --load go`).
//
//	goro-bench-go load --addr HOST:PORT [--conns C] [--size BYTES] [--secs S] [--warmup S]
//
// It opens C connections (default 1) one after the other, then starts them together:
// one goroutine per connection sends a BYTES-byte message (default 64; the first 8
// bytes carry the round trip's sequence number, little-endian, the rest is 'a'..'z'
// repeated, as in echo_load), reads exactly BYTES bytes back, checks every byte
// against what it sent, records the round trip and sends the next, for --warmup
// seconds (default 1, not counted) and then --secs seconds (default 10; fractions
// allowed). Only round trips that start after the warm-up and end before the deadline
// count; the one in flight at the deadline is dropped.
//
// It prints two lines on stdout: a human one, then, last, the JSON line of echo_load
// --json, with the same keys and units (--json is accepted and changes nothing):
//
//	{"conns":C,"size":B,"secs":S,"rps":..,"p50_us":..,"p99_us":..,"max_us":..,"busiest_over_mean":..,"min_per_conn":..}
//
// Percentiles are nearest-rank over every counted round trip (µs, truncated as
// echo_load's as_micros); busiest_over_mean is the busiest connection's round trips
// over the mean per connection.
//
// Every wait is bounded: a connect has 10 s; every write and read has a deadline that
// is 9 to 10 s away when the round trip starts (it is moved at most once a second, so
// that SetDeadline, which re-arms a runtime timer, is not paid on every round trip);
// the whole run gives up 15 s after its deadline. A connection error, a stall or a
// wrong byte is an error: it is printed on stderr with the connection and the round
// trip, and the exit status is 1 (2 for a bad command line). The soft RLIMIT_NOFILE
// is raised to the hard limit at start, as echo_load does.
//
// The parallelism is GOMAXPROCS (the harness sets 2, as GORO_MAXPROCS for
// echo_load). Every name here starts with "load", to stay clear of the workloads'.

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// loadStall bounds a connect, and every write and read (see the file comment).
	loadStall = 10 * time.Second
	// loadDeadlineSlack is how stale a connection's deadline may get before it is
	// moved: every write and read starts with at least loadStall-loadDeadlineSlack.
	loadDeadlineSlack = time.Second
	// loadGrace is how long after its deadline the run waits for its connections.
	loadGrace = 15 * time.Second
	// loadMaxSize is echo_load's bound on --size.
	loadMaxSize = 16 << 20
)

// loadConfig is the command line, with echo_load's defaults.
type loadConfig struct {
	addr   string
	conns  int
	size   int
	secs   float64
	warmup float64
}

// loadParseArgs parses the arguments after "load"; a usage error says what is wrong.
func loadParseArgs(args []string) (loadConfig, error) {
	cfg := loadConfig{addr: "127.0.0.1:7000", conns: 1, size: 64, secs: 10, warmup: 1}
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the caller prints the error and the usage line
	fs.StringVar(&cfg.addr, "addr", cfg.addr, "HOST:PORT of the echo server")
	fs.IntVar(&cfg.conns, "conns", cfg.conns, "connections")
	fs.IntVar(&cfg.size, "size", cfg.size, "message size in bytes")
	secs := fs.String("secs", "10", "measured seconds")
	warmup := fs.String("warmup", "1", "warm-up seconds, not counted")
	_ = fs.Bool("json", true, "accepted for echo_load's command line; the JSON line is always printed")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.conns <= 0 {
		return cfg, errors.New("--conns must be a positive whole number")
	}
	if cfg.size <= 0 || cfg.size > loadMaxSize {
		return cfg, fmt.Errorf("--size must be a whole number of bytes in 1..=%d", loadMaxSize)
	}
	var err error
	if cfg.secs, err = loadSeconds(*secs, false); err != nil {
		return cfg, err
	}
	if cfg.warmup, err = loadSeconds(*warmup, true); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// loadSeconds parses a number of seconds as echo_load does: finite, at most a day,
// positive (or zero if zeroOK).
func loadSeconds(s string, zeroOK bool) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v > 86400 || v < 0 || (v == 0 && !zeroOK) {
		return 0, fmt.Errorf("%q is not a valid number of seconds", s)
	}
	return v, nil
}

// loadReport is what one run measured; the fields of echo_load's Report.
type loadReport struct {
	conns           int
	size            int
	secs            float64
	requests        uint64
	rps             float64
	p50us           uint32
	p99us           uint32
	maxus           uint32
	meanPerConn     float64
	busiestPerConn  uint64
	busiestConn     int
	busiestOverMean float64
	minPerConn      uint64
}

// loadMakeReport merges the per-connection latencies (µs; one per counted round trip).
func loadMakeReport(cfg loadConfig, perConn [][]uint32) (loadReport, error) {
	var requests uint64
	for _, l := range perConn {
		requests += uint64(len(l))
	}
	if requests == 0 {
		return loadReport{}, fmt.Errorf("no round trip completed in %v s after the warm-up",
			loadFormatSecs(cfg.secs))
	}
	all := make([]uint32, 0, requests)
	busiest, busiestConn, fewest := uint64(0), 0, uint64(math.MaxUint64)
	for i, l := range perConn {
		all = append(all, l...)
		n := uint64(len(l))
		if n >= busiest { // the last of equals, as Rust's max_by_key
			busiest, busiestConn = n, i
		}
		if n < fewest {
			fewest = n
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	mean := float64(requests) / float64(len(perConn))
	return loadReport{
		conns:           len(perConn),
		size:            cfg.size,
		secs:            cfg.secs,
		requests:        requests,
		rps:             float64(requests) / cfg.secs,
		p50us:           loadPercentile(all, 0.50),
		p99us:           loadPercentile(all, 0.99),
		maxus:           all[len(all)-1],
		meanPerConn:     mean,
		busiestPerConn:  busiest,
		busiestConn:     busiestConn,
		busiestOverMean: float64(busiest) / mean,
		minPerConn:      fewest,
	}, nil
}

// loadPercentile is the nearest-rank percentile of sorted, non-empty v.
func loadPercentile(v []uint32, p float64) uint32 {
	rank := int(math.Ceil(p * float64(len(v))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(v) {
		rank = len(v)
	}
	return v[rank-1]
}

// loadFormatSecs prints seconds as Rust's f64 Display does ("1", "0.5", "2.25"): the
// shortest decimal that reads back as the same number, never an exponent.
func loadFormatSecs(s float64) string {
	return strconv.FormatFloat(s, 'f', -1, 64)
}

// human is the human line (echo_load's, naming Go's clients).
func (r loadReport) human() string {
	return fmt.Sprintf("goro-bench-go load: %d conns x %d B for %s s (Go clients, GOMAXPROCS %d): "+
		"%.0f req/s (%d round trips), latency p50 %d us, p99 %d us, max %d us; per connection: "+
		"mean %.1f, busiest %d (connection %d: %.2fx mean), min %d",
		r.conns, r.size, loadFormatSecs(r.secs), runtime.GOMAXPROCS(0), r.rps, r.requests,
		r.p50us, r.p99us, r.maxus, r.meanPerConn, r.busiestPerConn, r.busiestConn,
		r.busiestOverMean, r.minPerConn)
}

// json is the JSON line, byte for byte the format of echo_load's Report::json.
func (r loadReport) json() string {
	return fmt.Sprintf(`{"conns":%d,"size":%d,"secs":%s,"rps":%.1f,"p50_us":%d,"p99_us":%d,`+
		`"max_us":%d,"busiest_over_mean":%.4f,"min_per_conn":%d}`,
		r.conns, r.size, loadFormatSecs(r.secs), r.rps, r.p50us, r.p99us, r.maxus,
		r.busiestOverMean, r.minPerConn)
}

// loadRaiseNofile raises the soft RLIMIT_NOFILE to the hard limit (2^20 if the hard
// limit is unlimited) and returns the soft limit in force afterwards.
func loadRaiseNofile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	target := uint64(lim.Max)
	if target == math.MaxUint64 { // RLIM_INFINITY
		target = 1 << 20
	}
	if uint64(lim.Cur) < target {
		want := lim
		want.Cur = target
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
			lim.Cur = want.Cur
		}
	}
	return uint64(lim.Cur), nil
}

// loadResult is one connection's outcome: its latencies, or what went wrong.
type loadResult struct {
	conn int
	lat  []uint32
	err  error
}

// loadRun runs the load: the report, or every error seen.
func loadRun(cfg loadConfig) (loadReport, error) {
	limit, err := loadRaiseNofile()
	if err != nil {
		return loadReport{}, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %v", err)
	}
	if uint64(cfg.conns)+32 > limit {
		return loadReport{}, fmt.Errorf(
			"%d connections need more file descriptors than RLIMIT_NOFILE allows (%d)", cfg.conns, limit)
	}
	addr, err := net.ResolveTCPAddr("tcp", cfg.addr)
	if err != nil {
		return loadReport{}, fmt.Errorf("cannot resolve %s: %v", cfg.addr, err)
	}

	// Connect all first, one after the other (no burst on the server's backlog).
	// KeepAlive -1: a plain socket, as echo_load's.
	dialer := net.Dialer{Timeout: loadStall, KeepAlive: -1}
	conns := make([]*net.TCPConn, 0, cfg.conns)
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for i := 0; i < cfg.conns; i++ {
		c, err := dialer.Dial("tcp", addr.String())
		if err != nil {
			closeAll()
			return loadReport{}, fmt.Errorf("connection %d: connect to %s failed: %v", i, addr, err)
		}
		tc := c.(*net.TCPConn)
		if err := tc.SetNoDelay(true); err != nil {
			tc.Close()
			closeAll()
			return loadReport{}, fmt.Errorf("connection %d: socket options: %v", i, err)
		}
		conns = append(conns, tc)
	}

	// Then start them together: every client waits for the gate to close, after which
	// it reads the common start time (written before the close: happens-before).
	gate := make(chan struct{})
	results := make(chan loadResult, cfg.conns) // room for all: a send never blocks
	var t0 time.Time
	warmup := time.Duration(cfg.warmup * float64(time.Second))
	secs := time.Duration(cfg.secs * float64(time.Second))
	for i, c := range conns {
		go func(i int, c *net.TCPConn) {
			defer c.Close()
			gateBound := time.NewTimer(2 * loadStall)
			defer gateBound.Stop()
			select {
			case <-gate:
			case <-gateBound.C:
				results <- loadResult{conn: i, err: errors.New("the start gate never opened")}
				return
			}
			lat, err := loadClient(c, cfg.size, t0.Add(warmup), t0.Add(warmup+secs))
			results <- loadResult{conn: i, lat: lat, err: err}
		}(i, c)
	}
	t0 = time.Now()
	close(gate)

	bound := time.NewTimer(time.Until(t0.Add(warmup + secs + loadGrace)))
	defer bound.Stop()
	perConn := make([][]uint32, cfg.conns)
	var errs []string
collect:
	for done := 0; done < cfg.conns; done++ {
		select {
		case r := <-results:
			if r.err != nil {
				errs = append(errs, fmt.Sprintf("connection %d: %v", r.conn, r.err))
			} else {
				perConn[r.conn] = r.lat
			}
		case <-bound.C:
			errs = append(errs, fmt.Sprintf(
				"%d connections still not done %v after the deadline (hang?)", cfg.conns-done, loadGrace))
			break collect
		}
	}
	if len(errs) > 0 {
		n := len(errs)
		if n > 20 {
			errs = append(errs[:20], fmt.Sprintf("... %d more", n-20))
		}
		return loadReport{}, fmt.Errorf("%d error(s):\n  %s", n, strings.Join(errs, "\n  "))
	}
	return loadMakeReport(cfg, perConn)
}

// loadClient is one connection's closed loop: send, read back, check, time; until
// end. It returns the latencies (µs) of the round trips between warmEnd and end.
func loadClient(c *net.TCPConn, size int, warmEnd, end time.Time) ([]uint32, error) {
	out := make([]byte, size)
	for i := range out {
		out[i] = 'a' + byte(i%26)
	}
	back := make([]byte, size)
	lat := make([]uint32, 0, 4096)
	var seq uint64
	var tag [8]byte
	var deadline time.Time // zero: set before the first write
	for {
		t := time.Now()
		if !t.Before(end) {
			return lat, nil
		}
		if deadline.Sub(t) < loadStall-loadDeadlineSlack {
			deadline = t.Add(loadStall)
			if err := c.SetDeadline(deadline); err != nil {
				return nil, fmt.Errorf("round trip %d: cannot set the deadline: %v", seq+1, err)
			}
		}
		seq++
		binary.LittleEndian.PutUint64(tag[:], seq)
		copy(out, tag[:]) // the first min(8, size) bytes
		if _, err := c.Write(out); err != nil {
			return nil, loadOpError("write", seq, err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			return nil, loadOpError("read", seq, err)
		}
		done := time.Now()
		if !bytes.Equal(back, out) {
			at := 0
			for at < size && back[at] == out[at] {
				at++
			}
			return nil, fmt.Errorf("round trip %d: wrong bytes echoed (first difference at byte %d: "+
				"got %#02x, sent %#02x)", seq, at, back[at], out[at])
		}
		if !t.Before(warmEnd) && !done.After(end) {
			us := done.Sub(t).Microseconds()
			if us > math.MaxUint32 {
				us = math.MaxUint32
			}
			lat = append(lat, uint32(us))
		}
	}
}

// loadOpError names a failed write or read of round trip seq, in echo_load's words.
func loadOpError(op string, seq uint64, err error) error {
	var why string
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		why = fmt.Sprintf("no progress for %v (stalled)", loadStall-loadDeadlineSlack)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		why = "the server closed the connection"
	default:
		why = err.Error()
	}
	return fmt.Errorf("%s of round trip %d: %s", op, seq, why)
}

// load runs `goro-bench-go load ARGS...` and returns the exit status.
func load(args []string) int {
	const usageLine = "usage: goro-bench-go load --addr HOST:PORT [--conns C] [--size BYTES] " +
		"[--secs S] [--warmup S] [--json]"
	cfg, err := loadParseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "goro-bench-go load: a closed-loop load generator for echo servers\n%s\n", usageLine)
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "goro-bench-go load: %v\n%s\n", err, usageLine)
		return 2
	}
	rep, err := loadRun(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goro-bench-go load: %v\n", err)
		return 1
	}
	fmt.Println(rep.human())
	fmt.Println(rep.json())
	return 0
}
