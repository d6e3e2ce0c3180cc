// The echo server of the echo suite (bench/src/workloads/echo.rs): one
// goroutine per connection, read then write back what was read, until stdin reaches
// EOF or SIGTERM/SIGINT.

package main

import (
	"errors"
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

// echoConn echoes one connection until EOF or an error. The buffer (16 KiB) and
// TCP_NODELAY are as in goro's examples/echo_server.rs.
func echoConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // Go's default, said explicitly
	}
	buf := make([]byte, 16*1024)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				if !errors.Is(werr, net.ErrClosed) {
					logf("serve: %v: write failed: %v", c.RemoteAddr(), werr)
				}
				return
			}
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, net.ErrClosed) {
				logf("serve: %v: read failed: %v", c.RemoteAddr(), err)
			}
			return
		}
	}
}

// serve runs the echo server and returns the exit code.
func serve() int {
	// Catch the signals before the address is printed, so that a SIGTERM sent as soon
	// as it is known stops the server cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		logf("serve: cannot listen: %v", err)
		return 1
	}
	fmt.Printf("LISTENING %s\n", ln.Addr())
	// The same on stderr, for servers' logs, which read "listening on ADDR" there.
	logf("serve: listening on %s (GOMAXPROCS %d)", ln.Addr(), runtime.GOMAXPROCS(0))

	stop := make(chan string, 2)
	go func() {
		// Anything on stdin is ignored; EOF (or a read error) means stop.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop <- "stdin closed"
	}()
	go func() {
		stop <- "signal " + (<-sigs).String()
	}()

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
				logf("serve: accept failed: %v", err)
				time.Sleep(10 * time.Millisecond)
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
				echoConn(c)
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				c.Close()
			}()
		}
	}()

	why := <-stop
	mu.Lock()
	stopping = true
	ln.Close()
	for c := range open {
		c.Close()
	}
	mu.Unlock()
	<-acceptorDone
	handlers.Wait()
	mu.Lock()
	n := served
	mu.Unlock()
	logf("serve: %s; stopped after %d connections", why, n)
	return 0
}
