//! Go by Example: Mutexes. Go prints a map with its keys sorted; a `BTreeMap` keeps
//! them sorted.

use crate::out::Out;
use goro::sync::{Mutex, WaitGroup};
use std::collections::BTreeMap;
use std::sync::Arc;

struct Container {
    counters: Mutex<BTreeMap<String, i32>>,
}

impl Container {
    fn inc(&self, name: &str) {
        *self.counters.lock().get_mut(name).unwrap() += 1;
    }
}

pub fn main(out: &Out) {
    let c = Arc::new(Container {
        counters: Mutex::new(BTreeMap::from([("a".to_string(), 0), ("b".to_string(), 0)])),
    });

    let wg = WaitGroup::new();

    let do_increment = |name: &'static str, n: i32| {
        let c = c.clone();
        move || {
            for _ in 0..n {
                c.inc(name);
            }
        }
    };

    wg.go(do_increment("a", 10000));
    wg.go(do_increment("a", 10000));
    wg.go(do_increment("b", 10000));

    wg.wait();
    let counters = c.counters.lock();
    let entries: Vec<String> = counters.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    out.println(format!("map[{}]", entries.join(" ")));
}
