//! Go by Example: Worker Pools.

use crate::out::Out;
use goro::chan::Chan;
use std::time::Duration;

const SECOND: Duration = Duration::from_millis(50);

fn worker(out: &Out, id: i32, jobs: Chan<i32>, results: Chan<i32>) {
    for j in &jobs {
        out.println(format!("worker {id} started  job {j}"));
        goro::time::sleep(SECOND);
        out.println(format!("worker {id} finished job {j}"));
        results.send(j * 2);
    }
}

pub fn main(out: &Out) {
    const NUM_JOBS: i32 = 5;
    let jobs = Chan::<i32>::new(NUM_JOBS as usize);
    let results = Chan::<i32>::new(NUM_JOBS as usize);

    for w in 1..=3 {
        let (o, j, r) = (out.clone(), jobs.clone(), results.clone());
        goro::go!(move || worker(&o, w, j, r));
    }

    for j in 1..=NUM_JOBS {
        jobs.send(j);
    }
    jobs.close();

    for _ in 1..=NUM_JOBS {
        results.recv();
    }
}
