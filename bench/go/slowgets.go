// The slow_gets rows of compare (the async suite): Go's net/http client doing what
// ecosystem/src/bin/slow_gets.rs does from goro and tokio. N goroutines, each one GET
// of URL_BASE/<id> (id 0..N) through one shared http.Client, against the harness's
// slow_server child; every body must be its id.
//
//	goro-bench-go slow_gets N URL_BASE
//
// Prints the same JSON line as slow_gets.rs: {"mode":"go","n","wall_ms","req_per_s",
// "peak_threads","peak_rss_kib","cpu_ms","errors"}, and exits 1 if any answer is wrong or
// missing. wall_ms runs from the first goroutine's start to the last answer checked;
// peak_threads is the most threads the process had meanwhile (/proc/self/status
// Threads, sampled every ms by a goroutine), peak_rss_kib its VmHWM at the end, cpu_ms
// its CPU time (user + system) over the run.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// slowGets runs the load and returns the exit code.
func slowGets(args []string) int {
	if len(args) != 2 {
		logf("usage: goro-bench-go slow_gets N URL_BASE")
		return 2
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		logf("slow_gets: bad N %q", args[0])
		return 2
	}
	base := strings.TrimRight(args[1], "/")
	// Go 1.19 raises the soft descriptor limit itself; said explicitly, as slow_gets.rs.
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no limit
	tr.MaxIdleConnsPerHost = n
	tr.MaxConnsPerHost = 0 // no limit
	client := &http.Client{Transport: tr, Timeout: 120 * time.Second}

	var peak int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if t := statusKiB("Threads"); t > atomic.LoadInt64(&peak) {
				atomic.StoreInt64(&peak, t)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	var wrong, shown int64
	check := func(id int, body string, err error) {
		want := strconv.Itoa(id)
		if err == nil && body == want {
			return
		}
		atomic.AddInt64(&wrong, 1)
		if atomic.AddInt64(&shown, 1) <= 5 {
			if err != nil {
				logf("slow_gets: request %d: %v", id, err)
			} else {
				logf("slow_gets: request %d: body %q, expected %q", id, body, want)
			}
		}
	}
	get := func(id int) (string, error) {
		resp, err := client.Get(base + "/" + strconv.Itoa(id))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %s", resp.Status)
		}
		return string(b), nil
	}

	var done sync.WaitGroup
	done.Add(n)
	cpu0 := cpuMs()
	start := time.Now()
	for id := 0; id < n; id++ {
		go func(id int) {
			defer done.Done()
			body, err := get(id)
			check(id, body, err)
		}(id)
	}
	done.Wait()
	wall := time.Since(start)
	cpu := cpuMs() - cpu0
	close(stop)
	<-sampled

	line, _ := json.Marshal(map[string]interface{}{
		"mode":         "go",
		"n":            n,
		"wall_ms":      float64(wall.Nanoseconds()) / 1e6,
		"req_per_s":    float64(n) / wall.Seconds(),
		"peak_threads": atomic.LoadInt64(&peak),
		"peak_rss_kib": statusKiB("VmHWM"),
		"cpu_ms":       cpu,
		"errors":       atomic.LoadInt64(&wrong),
	})
	fmt.Println(string(line))
	if wrong > 0 {
		logf("slow_gets: %d of %d answers wrong or missing", wrong, n)
		return 1
	}
	return 0
}

// cpuMs is this process's CPU time (user + system) so far, in ms.
func cpuMs() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}
