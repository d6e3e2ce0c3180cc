// Spawn-and-park, Go's side of bench/src/bin/spawn_park.rs: n goroutines, spawned
// from main, each parked on one channel, then released.
//
//	cd bench/go/spawnpark && go build -o /tmp/gospawn . && GOMAXPROCS=2 /tmp/gospawn 100000
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func rssKiB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	return 0
}

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	ch := make(chan struct{})
	done := make(chan struct{}, n)
	runtime.GC()
	r0 := rssKiB()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go func() { <-ch; done <- struct{}{} }()
	}
	spawn := time.Since(t0)
	time.Sleep(200 * time.Millisecond)
	r1 := rssKiB()
	t1 := time.Now()
	close(ch)
	for i := 0; i < n; i++ {
		<-done
	}
	wake := time.Since(t1)
	fmt.Printf("n=%d spawn %.0f ns/each, wake+exit %.0f ns/each, rss/parked %d B\n", n, float64(spawn.Nanoseconds())/float64(n), float64(wake.Nanoseconds())/float64(n), (r1-r0)*1024/n)
}
