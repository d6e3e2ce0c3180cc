package main

import "time"

// fairness: runtime/proc_test.go's TestPingPongHog shape (bench/src/workloads/fairness.rs
// is goro's side): a "hog" pair of goroutines doing 1e6 units of work per hand-off and
// a "light" pair doing 1e3 share the Ps (the harness runs it at GOMAXPROCS=1) for
// 100 ms. Each passes the ball with a plain send, as Go's test does, on a one-slot
// channel (the partner waits in its select, so the send hands the ball straight over;
// the slot lets the last send return after done). Figure: hog units / light units. Go has no plain threads, so goro's wake-up
// companions have no Go figure.
func fairness() (float64, error) {
	done := make(chan struct{})
	var hog, light uint64
	player := func(units int, count *uint64, ball chan struct{}, finished chan<- struct{}) {
		defer func() { finished <- struct{}{} }()
		for {
			select {
			case <-done:
				return
			case <-ball:
				n := uint64(0)
				for i := 0; i < units; i++ {
					n++
				}
				*count += n
				// A plain send, as in Go's test; the one-slot channel lets it return
				// when the partner has already seen done.
				ball <- struct{}{}
			}
		}
	}
	finished := make(chan struct{})
	hogBall, lightBall := make(chan struct{}, 1), make(chan struct{}, 1)
	for i := 0; i < 2; i++ {
		go player(1_000_000, &hog, hogBall, finished)
		go player(1_000, &light, lightBall, finished)
	}
	hogBall <- struct{}{}
	lightBall <- struct{}{}
	time.Sleep(100 * time.Millisecond)
	close(done)
	for i := 0; i < 4; i++ {
		<-finished
	}
	if light == 0 {
		light = 1
	}
	return float64(hog) / float64(light), nil
}
