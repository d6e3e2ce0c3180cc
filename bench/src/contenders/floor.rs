//! The floor of a fresh stack (issue 38): what the kernel charges for one coroutine's
//! stack, measured in the same run as goro's and Go's spawn-and-park, so that every
//! report has the ratio to it.
//!
//! Per stack, as goro lays them out: 256 KiB usable above a 16 KiB guard, mapped in
//! slabs of 64 (`MAP_NORESERVE | MAP_STACK`), the slab's 64 guards installed with one
//! `process_madvise(PIDFD_SELF, MADV_GUARD_INSTALL)` (one `madvise` each where the
//! kernel refuses that; `mprotect` where it has no guard installs), and the top page
//! touched (the first write a coroutine makes). No scheduler, no coroutine: the
//! figure is ns per stack over the `spawn_park_*` workload's count, with the RSS and
//! page tables per stack as its memory companion.

use std::time::Instant;

use crate::harness::procfs;
use crate::workloads::{self, Measurement, Outcome, Workload};

use super::Contender;

/// The floor of a fresh stack.
pub struct Floor;

/// goro's default stack: usable bytes, guard bytes, stacks per slab.
const USABLE: usize = 256 * 1024;
const GUARD: usize = 4 * 4096;
const SLAB: usize = 64;
const MADV_GUARD_INSTALL: libc::c_int = 102;
const PIDFD_SELF: libc::c_int = -10000;
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// How the floor installed its guards (its note).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Guards {
    Batched,
    PerStack,
    Mprotect,
}

/// `process_madvise(PIDFD_SELF, iov, advice)`: the bytes advised, or -1.
fn advise(iov: &[libc::iovec], advice: libc::c_int) -> libc::c_long {
    // SAFETY: the ranges are parts of a slab this module just mapped (its guards, or
    // its top pages, read-write); the advice only changes page tables or faults pages
    // in.
    unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            PIDFD_SELF,
            iov.as_ptr(),
            iov.len(),
            advice,
            0,
        )
    }
}

/// Maps one slab of `SLAB` stacks and installs their guards the cheapest way this
/// kernel takes; returns its base, or why not.
fn slab(guards: &mut Option<Guards>) -> Result<usize, String> {
    let one = USABLE + GUARD;
    // SAFETY: a fresh private anonymous mapping; the kernel picks the address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            one * SLAB,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    let base = p as usize;
    let at = |k: usize| (base + k * one) as *mut libc::c_void;
    if matches!(guards, None | Some(Guards::Batched)) {
        let iov: Vec<libc::iovec> = (0..SLAB)
            .map(|k| libc::iovec {
                iov_base: at(k),
                iov_len: GUARD,
            })
            .collect();
        if advise(&iov, MADV_GUARD_INSTALL) == (GUARD * SLAB) as libc::c_long {
            *guards = Some(Guards::Batched);
            return Ok(base);
        }
        *guards = Some(Guards::PerStack);
    }
    for k in 0..SLAB {
        let rc = match guards {
            // SAFETY: stack k's guard, inside the slab just mapped.
            Some(Guards::PerStack) => unsafe { libc::madvise(at(k), GUARD, MADV_GUARD_INSTALL) },
            // SAFETY: as above.
            _ => unsafe { libc::mprotect(at(k), GUARD, libc::PROT_NONE) },
        };
        if rc != 0 {
            if *guards == Some(Guards::PerStack) && k == 0 {
                *guards = Some(Guards::Mprotect);
                // SAFETY: as above.
                if unsafe { libc::mprotect(at(k), GUARD, libc::PROT_NONE) } == 0 {
                    continue;
                }
            }
            return Err(format!("guard: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(base)
}

/// Maps, guards and touches `n` stacks; ns per stack, with the RSS and page tables
/// per stack as the `NAME_rss` companion.
fn floor(name: &str, n: usize) -> Outcome {
    let one = USABLE + GUARD;
    let slabs = n.div_ceil(SLAB);
    let before = procfs::rss_bytes();
    let pte_before = procfs::status_kib("VmPTE").unwrap_or(0);
    let mut guards = None;
    // Issue 38's question: whether populating a slab's top pages in one call beats
    // touching them (`GORO_FLOOR_POPULATE=1`; docs/benchmarks.md has the answer).
    let populate = std::env::var_os("GORO_FLOOR_POPULATE").is_some();
    let mut bases = Vec::with_capacity(slabs);
    let t = Instant::now();
    for s in 0..slabs {
        let base = slab(&mut guards)?;
        bases.push(base);
        let count = SLAB.min(n - s * SLAB);
        if populate {
            // The top pages made present in one call per slab instead of touched.
            let iov: Vec<libc::iovec> = (0..count)
                .map(|k| libc::iovec {
                    iov_base: (base + (k + 1) * one - 4096) as *mut libc::c_void,
                    iov_len: 4096,
                })
                .collect();
            if advise(&iov, MADV_POPULATE_WRITE) != (4096 * count) as libc::c_long {
                return Err(format!(
                    "process_madvise(MADV_POPULATE_WRITE): {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        for k in 0..count {
            // The top page's first write, as a coroutine's first frame makes it.
            let top = (base + (k + 1) * one - 64) as *mut u8;
            // SAFETY: inside stack k's usable part, which is mapped read-write.
            unsafe { top.write_volatile(1) };
        }
    }
    let per = t.elapsed().as_nanos() as f64 / n as f64;
    let rss = procfs::rss_bytes().saturating_sub(before)
        + procfs::status_kib("VmPTE")
            .unwrap_or(0)
            .saturating_sub(pte_before)
            * 1024;
    for base in bases {
        // SAFETY: unmapping the slabs mapped above, which nothing uses any more.
        unsafe { libc::munmap(base as *mut libc::c_void, one * SLAB) };
    }
    let how = match guards {
        Some(Guards::Batched) => "one process_madvise per slab of 64",
        Some(Guards::PerStack) => "one madvise per stack (no batched guard installs here)",
        _ => "one mprotect per stack (no guard installs here)",
    };
    let mut m = Measurement::value(per).with(&format!("{name}_rss"), rss as f64 / n as f64);
    let touch = if populate {
        "populate (one process_madvise per slab)"
    } else {
        "touch"
    };
    m.note = Some(format!("the floor: map, guard ({how}) and {touch} a stack"));
    Ok(m)
}

impl Contender for Floor {
    fn name(&self) -> &'static str {
        "floor"
    }
    fn supports(&self, w: &Workload) -> bool {
        workloads::park_tasks(w.name()).is_some()
    }
    fn run(&self, w: &Workload) -> Outcome {
        let n = workloads::park_tasks(w.name()).ok_or("not a spawn-and-park workload")?;
        floor(w.name(), n)
    }
}
