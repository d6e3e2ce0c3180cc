//! Go by Example: Closing Channels.

use crate::out::Out;
use goro::chan::Chan;

pub fn main(out: &Out) {
    let jobs = Chan::<i32>::new(5);
    let done = Chan::<bool>::new(0);

    let (o, j, d) = (out.clone(), jobs.clone(), done.clone());
    goro::go!(move || loop {
        match j.recv() {
            Some(job) => o.println(format!("received job {job}")),
            None => {
                o.println("received all jobs");
                d.send(true);
                return;
            }
        }
    });

    for j in 1..=3 {
        jobs.send(j);
        out.println(format!("sent job {j}"));
    }
    jobs.close();
    out.println("sent all jobs");

    done.recv();

    let ok = jobs.recv().is_some();
    out.println(format!("received more jobs: {ok}"));
}
