// Command echo_server is the Go peer of goro's examples/echo_server.rs in the echo
// benchmark (bench/src/bin/echo_compare.rs): one goroutine per connection, a 16 KiB
// buffer, TCP_NODELAY, echo until EOF (or an error, which is logged).
//
//	go build -o /tmp/echo_go . && /tmp/echo_go [-addr 127.0.0.1:7002]
//
// It prints "echo_go: listening on ADDR" as its first line on stderr ("-addr
// 127.0.0.1:0" picks a free port). SIGINT (Ctrl-C) or SIGTERM stops it cleanly: it
// stops accepting, closes the open connections, waits for their goroutines and exits
// 0. GOMAXPROCS sets its number of Ps. Standard library only.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "echo_go: "+format+"\n", args...)
}

// serve echoes one connection until EOF or an error.
func serve(c net.Conn) {
	peer := c.RemoteAddr()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(true); err != nil {
			logf("%v: setup failed: %v", peer, err)
			return
		}
	}
	buf := make([]byte, 16*1024)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				if !errors.Is(werr, net.ErrClosed) {
					logf("%v: write failed: %v", peer, werr)
				}
				return
			}
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, net.ErrClosed) {
				logf("%v: read failed: %v", peer, err)
			}
			return
		}
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7002", "address to listen on")
	flag.Parse()

	// Catch the signals before the address is printed: a SIGINT sent as soon as it is
	// known must stop the server cleanly, not kill it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logf("cannot listen on %s: %v", *addr, err)
		os.Exit(2)
	}
	logf("listening on %v (GOMAXPROCS %d); Ctrl-C stops", ln.Addr(), runtime.GOMAXPROCS(0))

	var (
		mu       sync.Mutex
		open     = make(map[net.Conn]struct{})
		stopping bool
		served   int
		handlers sync.WaitGroup
	)
	acceptorDone := make(chan struct{})
	go func() {
		defer close(acceptorDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// EMFILE and the like: back off instead of spinning.
				logf("accept failed: %v", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			mu.Lock()
			if stopping {
				mu.Unlock()
				c.Close()
				return
			}
			open[c] = struct{}{}
			served++
			handlers.Add(1)
			mu.Unlock()
			go func() {
				defer handlers.Done()
				serve(c)
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				c.Close()
			}()
		}
	}()

	sig := <-sigs
	logf("signal %v: shutting down", sig)
	mu.Lock()
	stopping = true
	ln.Close()
	for c := range open {
		c.Close()
	}
	mu.Unlock()
	<-acceptorDone
	start := time.Now()
	handlers.Wait()
	mu.Lock()
	n := served
	mu.Unlock()
	logf("stopped: %d connections served, the last ones closed in %v", n, time.Since(start))
}
