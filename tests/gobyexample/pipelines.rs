//! The Go blog's "Go Concurrency Patterns: Pipelines and cancellation": `square.go`
//! (a pipeline), `sqfan.go` (fan-out, fan-in) and `sqdone3.go` (explicit
//! cancellation: a `done` channel closed when `main` returns).

use crate::out::Out;
use goro::chan::Chan;
use goro::sync::WaitGroup;

mod plain {
    use super::*;

    /// gen sends the values in nums on the returned channel, then closes it.
    pub fn gen(nums: &[i32]) -> Chan<i32> {
        let out = Chan::new(0);
        let (o, nums) = (out.clone(), nums.to_vec());
        goro::go!(move || {
            for n in nums {
                o.send(n);
            }
            o.close();
        });
        out
    }

    /// sq receives values from in, squares them, and sends them on the returned
    /// channel, until in is closed. Then sq closes the returned channel.
    pub fn sq(input: Chan<i32>) -> Chan<i32> {
        let out = Chan::new(0);
        let o = out.clone();
        goro::go!(move || {
            for n in &input {
                o.send(n * n);
            }
            o.close();
        });
        out
    }

    /// merge receives values from each input channel and sends them on the returned
    /// channel. merge closes the returned channel after all the input values have
    /// been sent.
    pub fn merge(cs: &[Chan<i32>]) -> Chan<i32> {
        let wg = WaitGroup::new();
        let out = Chan::new(0);

        // Start an output goroutine for each input channel in cs. output copies
        // values from c to out until c is closed, then calls wg.Done.
        let output = |c: Chan<i32>| {
            let (out, wg) = (out.clone(), wg.clone());
            move || {
                for n in &c {
                    out.send(n);
                }
                wg.done();
            }
        };
        wg.add(cs.len() as i64);
        for c in cs {
            goro::go!(output(c.clone()));
        }

        // Start a goroutine to close out once all the output goroutines are done.
        let o = out.clone();
        goro::go!(move || {
            wg.wait();
            o.close();
        });
        out
    }
}

/// square.go
pub fn main_square(out: &Out) {
    use plain::*;
    // Set up the pipeline.
    let c = gen(&[2, 3]);
    let sq_out = sq(c);

    // Consume the output.
    out.println(sq_out.recv().unwrap().to_string()); // 4
    out.println(sq_out.recv().unwrap().to_string()); // 9
}

/// sqfan.go
pub fn main_sqfan(out: &Out) {
    use plain::*;
    let input = gen(&[2, 3]);

    // Distribute the sq work across two goroutines that both read from in.
    let c1 = sq(input.clone());
    let c2 = sq(input);

    // Consume the merged output from c1 and c2.
    for n in &merge(&[c1, c2]) {
        out.println(n.to_string()); // 4 then 9, or 9 then 4
    }
}

mod done {
    use super::*;

    /// gen sends the values in nums on the returned channel, then closes it.
    pub fn gen(_done: &Chan<()>, nums: &[i32]) -> Chan<i32> {
        let out = Chan::new(nums.len());
        for &n in nums {
            // We ignore done here because these sends cannot block.
            out.send(n);
        }
        out.close();
        out
    }

    /// sq receives values from in, squares them, and sends them on the returned
    /// channel, until in or done is closed. Then sq closes the returned channel.
    pub fn sq(done: &Chan<()>, input: Chan<i32>) -> Chan<i32> {
        let out = Chan::new(0);
        let (o, done) = (out.clone(), done.clone());
        goro::go!(move || {
            for n in &input {
                goro::select! {
                    send(o, n * n) -> _ => {}
                    recv(done) -> _ => break,
                }
            }
            o.close(); // defer close(out)
        });
        out
    }

    /// merge receives values from each input channel and sends them on the returned
    /// channel. merge closes the returned channel after all the input values have
    /// been sent or after done is closed.
    pub fn merge(done: &Chan<()>, cs: &[Chan<i32>]) -> Chan<i32> {
        let wg = WaitGroup::new();
        let out = Chan::new(0);

        // Start an output goroutine for each input channel in cs. output copies
        // values from c to out until c or done is closed, then calls wg.Done.
        let output = |c: Chan<i32>| {
            let (out, wg, done) = (out.clone(), wg.clone(), done.clone());
            move || {
                for n in &c {
                    goro::select! {
                        send(out, n) -> _ => {}
                        recv(done) -> _ => break,
                    }
                }
                wg.done(); // defer wg.Done()
            }
        };
        wg.add(cs.len() as i64);
        for c in cs {
            goro::go!(output(c.clone()));
        }

        // Start a goroutine to close out once all the output goroutines are done.
        let o = out.clone();
        goro::go!(move || {
            wg.wait();
            o.close();
        });
        out
    }
}

/// sqdone3.go. Returns the merged output channel, for the test to see the pipeline
/// shut down once `main` has returned (Go's blog: every goroutine exits).
pub fn main_sqdone(out: &Out) -> Chan<i32> {
    use done::*;
    // Set up a done channel that's shared by the whole pipeline, and close that
    // channel when this pipeline exits, as a signal for all the goroutines we
    // started to exit.
    let done_ch = Chan::<()>::new(0);
    struct CloseOnReturn(Chan<()>);
    impl Drop for CloseOnReturn {
        fn drop(&mut self) {
            self.0.close();
        }
    }
    let _defer = CloseOnReturn(done_ch.clone()); // defer close(done)

    let input = gen(&done_ch, &[2, 3]);

    // Distribute the sq work across two goroutines that both read from in.
    let c1 = sq(&done_ch, input.clone());
    let c2 = sq(&done_ch, input);

    // Consume the first value from output.
    let merged = merge(&done_ch, &[c1, c2]);
    out.println(merged.recv().unwrap().to_string()); // 4 or 9

    // done will be closed by the deferred call.
    merged
}
