//! Linux's `/proc` files: memory, mappings, CPU times, the load average.

use std::fs;
use std::time::Duration;

use nix::unistd::{sysconf, SysconfVar};

/// A `kB` field (such as `VmRSS` or `VmPTE`) of `/proc/self/status`, in KiB.
pub fn status_kib(name: &str) -> Option<u64> {
    first(field(&fs::read_to_string("/proc/self/status").ok()?, name)?)
}

/// The value of the first `name: value` line (blanks may precede the colon, as in cpuinfo).
pub fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let value = |line: &'a str| line.strip_prefix(name)?.trim_start().strip_prefix(':');
    text.lines().find_map(value).map(str::trim)
}

/// Minor page faults of this process so far (`/proc/self/stat`, its 10th field), 0 if
/// unreadable.
pub fn minor_faults() -> u64 {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold blanks: count from the
    // closing one, after which field 3 comes.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace()
        .nth(7)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Resident set size of this process in bytes (`/proc/self/statm`), 0 if unreadable.
pub fn rss_bytes() -> u64 {
    let statm = fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: Option<u64> = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok());
    pages.unwrap_or(0) * conf(SysconfVar::PAGE_SIZE, 4096)
}

/// A positive `sysconf` value, or `default`.
fn conf(var: SysconfVar, default: u64) -> u64 {
    match sysconf(var) {
        Ok(Some(v)) if v > 0 => v as u64,
        _ => default,
    }
}

/// This process's memory mappings (`/proc/self/maps` lines) and their limit, `vm.max_map_count`.
pub fn map_counts() -> Option<(usize, usize)> {
    let now = fs::read("/proc/self/maps").ok()?;
    let now = now.iter().filter(|&&b| b == b'\n').count();
    Some((now, number("/proc/sys/vm/max_map_count")?))
}

pub fn number(path: &str) -> Option<usize> {
    first(&fs::read_to_string(path).ok()?)
}

fn first<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.split_whitespace().next()?.parse().ok()
}

/// `n` of `/proc`'s CPU clock ticks, 1 / `sysconf(_SC_CLK_TCK)` s each (read, not assumed).
fn ticks(n: u64) -> Duration {
    Duration::from_secs(n) / u32::try_from(conf(SysconfVar::CLK_TCK, 100)).unwrap_or(100)
}

/// CPU time the whole machine spent busy, all CPUs together: user, nice, system, irq
/// and softirq of the `cpu` line of `/proc/stat` (guest time is already inside user).
pub fn machine_busy() -> Option<Duration> {
    Some(ticks(parse_stat_busy(
        &fs::read_to_string("/proc/stat").ok()?,
    )?))
}

fn parse_stat_busy(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    (f.len() >= 7).then(|| f[0] + f[1] + f[2] + f[5] + f[6])
}

/// The user and system CPU time of process `pid` so far (`/proc/PID/stat`).
pub fn process_cpu(pid: u32) -> Option<(Duration, Duration)> {
    let (u, s) = parse_pid_stat_cpu(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    Some((ticks(u), ticks(s)))
}

/// `utime` and `stime` (fields 14 and 15) of a `/proc/PID/stat` line, counted from the
/// last `)`: the command name (field 2) may contain spaces and parentheses.
fn parse_pid_stat_cpu(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11); // field 3 is the first after ')'
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// The three load averages of /proc/loadavg.
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg").map_or_else(
        |e| format!("(unreadable: {e})"),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let status = "Name:\tx\nVmRSS:\t    2048 kB\nVmPTE:\t  12 kB\n";
        assert_eq!(field(status, "VmRSS"), Some("2048 kB"));
        assert_eq!(field(status, "Vm"), None);
        assert_eq!(field("model name\t: A CPU\n", "model name"), Some("A CPU"));
        let stat = "cpu  100 2 30 400 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_stat_busy(stat), Some(100 + 2 + 30 + 6 + 7));
        let pid = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(parse_pid_stat_cpu(pid), Some((250, 75)));
        assert_eq!(parse_pid_stat_cpu("42 (x) S 1"), None);
    }

    #[test]
    fn reads_this_process() {
        assert!(rss_bytes() > 0);
        assert!(status_kib("VmRSS").unwrap() > 0);
        assert!(map_counts().unwrap().0 > 0);
        let (u, s) = process_cpu(std::process::id()).unwrap();
        assert!(u + s < Duration::from_secs(3600));
        assert!(machine_busy().unwrap() > Duration::ZERO);
        assert!(ticks(1) <= Duration::from_millis(10));
    }
}
