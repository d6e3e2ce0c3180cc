//! The report: per row and contender the median of the rounds, the spread, the ratio to
//! goro and the footnotes, as markdown, JSON (every run's figure) and an SVG chart.

use std::fmt::Write as _;
use std::process::Command;

use serde::Serialize;

use super::{median, procfs};
use crate::contenders;
use crate::workloads::{Outcome, Row, Suite};

/// One run's outcome.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Got {
    Value(f64),
    Skip(String),
    Failed(String),
}

impl Got {
    /// Row `k` (named `row`) of a workload's run; None if it did not measure that row.
    pub fn of(result: &Outcome, k: usize, row: &str) -> Option<Got> {
        Some(match result {
            Err(e) => Got::Failed(e.clone()),
            Ok(m) => match (&m.skip, k) {
                (Some(why), _) => Got::Skip(why.clone()),
                (None, 0) => m.value.map_or(Got::Failed("no figure".into()), Got::Value),
                (None, _) => Got::Value(*m.also.get(row)?),
            },
        })
    }
}

/// One run of one contender on one row.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub round: usize,
    /// Its place in that round's order (0: first).
    pub position: usize,
    #[serde(flatten)]
    pub got: Got,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Wall time of the child (for echo: server start to stop).
    pub wall_secs: f64,
}

/// One row of a table: a workload's (or companion's) figure at a P count.
#[derive(Debug, Serialize)]
pub struct RowResult {
    pub name: &'static str,
    pub unit: &'static str,
    pub suite: Suite,
    pub procs: usize,
    pub higher_is_better: bool,
    /// Per contender, in column order.
    pub cells: Vec<Cell>,
}

impl RowResult {
    pub fn new(row: Row, suite: Suite, procs: usize, contenders: &[&'static str]) -> RowResult {
        RowResult {
            name: row.name,
            unit: row.unit,
            suite,
            procs,
            higher_is_better: row.higher_is_better,
            cells: contenders
                .iter()
                .map(|&c| Cell {
                    contender: c,
                    ..Cell::default()
                })
                .collect(),
        }
    }

    /// Computes every cell's figures from its runs, and the ratios to goro's median.
    pub fn finish(&mut self, rounds: usize) {
        for c in &mut self.cells {
            c.finish(rounds);
        }
        let goro = self.cells.iter().find(|c| c.contender == "goro");
        let goro = goro.and_then(|c| c.median);
        for c in &mut self.cells {
            c.ratio_to_goro = match (goro, c.median) {
                (Some(g), Some(x)) if g > 0.0 && x > 0.0 && c.contender != "goro" => {
                    Some(if self.higher_is_better { g / x } else { x / g })
                }
                _ => None,
            };
        }
    }
}

/// The summary of one contender on one row.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Cell {
    pub contender: &'static str,
    pub runs: Vec<Run>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// To goro's median, oriented so that > 1 means goro is ahead.
    pub ratio_to_goro: Option<f64>,
    /// The skips, failures and notes of its runs.
    pub footnote: Option<String>,
}

impl Cell {
    fn finish(&mut self, rounds: usize) {
        let (mut vals, mut skips, mut fails, mut notes) = (vec![], vec![], vec![], vec![]);
        for r in &self.runs {
            match &r.got {
                Got::Value(v) => vals.push(*v),
                Got::Skip(why) => skips.push(why),
                Got::Failed(why) => fails.push(why),
            }
            if let Some(n) = r.note.as_ref().filter(|n| !notes.contains(n)) {
                notes.push(n);
            }
        }
        vals.sort_by(f64::total_cmp);
        self.median = median(&vals);
        (self.min, self.max) = (vals.first().copied(), vals.last().copied());
        let mut parts = Vec::new();
        for (whys, others, what, alone) in [
            (&skips, vals.len() + fails.len(), "skipped", "skip"),
            (&fails, vals.len() + skips.len(), "failed", "failed"),
        ] {
            let (Some(first), n) = (whys.first(), whys.len()) else {
                continue;
            };
            let lead = match others {
                0 => alone.to_string(),
                _ => format!("{n} of {rounds} rounds {what}"),
            };
            // Reasons that differ in figures only would repeat per round: show the first.
            let count = if whys.iter().any(|w| w != first) {
                format!(" (first of {n} rounds; the others' figures are in the JSON)")
            } else if n > 1 && n < rounds {
                format!(" ({n} rounds)")
            } else {
                String::new()
            };
            parts.push(format!("{lead}: {first}{count}"));
        }
        parts.extend(notes.into_iter().cloned());
        self.footnote = (!parts.is_empty()).then(|| parts.join("; "));
    }
}

/// Everything a run of `compare` measured.
#[derive(Debug, Serialize)]
pub struct Results {
    pub tool: &'static str,
    /// The command line that made it (above every table).
    pub command: String,
    pub ratio_convention: &'static str,
    pub machine: Machine,
    /// `go version`, or why Go was not measured.
    pub go: String,
    pub rounds: usize,
    pub contenders: Vec<&'static str>,
    /// The rows, suite after suite.
    pub rows: Vec<RowResult>,
    /// Wall time of all children per workload (and P count), for planning runs.
    pub workload_secs: Vec<(String, f64)>,
    pub total_secs: f64,
    pub load_average_end: String,
}

impl Results {
    /// The markdown tables, one per suite, each under the command line.
    pub fn markdown(&self) -> String {
        let m = &self.machine;
        let mut out = format!(
            "Command ({date}, {nproc} CPUs, {cpu}, Linux {kernel}, {go}; load average \
             {load_average_start} at the start, {load_average_end} at the end; \
             {total_secs:.0} s):\n\n```sh\n{command}\n```\n\nMedian of {rounds} rounds per \
             cell, every run a fresh process, the contenders' order rotated every round. In \
             parentheses: the ratio to goro's median, > 1 when goro is ahead (contender / \
             goro for the lower-is-better figures, goro / contender for req/s and \
             wake-ups/s). -: not measured by that contender.\n",
            date = m.date,
            nproc = m.nproc,
            cpu = m.cpu,
            kernel = m.kernel,
            go = self.go,
            load_average_start = m.load_average_start,
            load_average_end = self.load_average_end,
            total_secs = self.total_secs,
            command = self.command,
            rounds = self.rounds,
        );
        for rows in self.rows.chunk_by(|a, b| a.suite == b.suite) {
            // The contenders with a run on any of the suite's rows.
            let cols: Vec<usize> = (0..self.contenders.len())
                .filter(|&ci| rows.iter().any(|r| !r.cells[ci].runs.is_empty()))
                .collect();
            let names = cols.iter().map(|&ci| self.contenders[ci]);
            let (mut medians, mut spreads, mut notes) = (vec![], vec![], Vec::<String>::new());
            for r in rows {
                let mut line = vec![r.name.to_string(), r.unit.to_string(), r.procs.to_string()];
                let mut spread = vec![r.name.to_string(), r.procs.to_string()];
                for cell in cols.iter().map(|&ci| &r.cells[ci]) {
                    let failed = cell.runs.iter().any(|r| matches!(r.got, Got::Failed(_)));
                    let mut text = match (cell.median, cell.ratio_to_goro) {
                        (Some(v), Some(x)) => format!("{} ({}x)", fmt_num(v), fmt_ratio(x)),
                        (Some(v), None) => fmt_num(v),
                        (None, _) if failed => "failed".into(),
                        (None, _) => "-".into(),
                    };
                    if let Some(f) = &cell.footnote {
                        let note = format!("{}: {f}", cell.contender);
                        let k = notes.iter().position(|t| *t == note).unwrap_or_else(|| {
                            notes.push(note);
                            notes.len() - 1
                        });
                        let _ = write!(text, " [{}]", k + 1);
                    }
                    line.push(text);
                    spread.push(match (cell.min, cell.max) {
                        (Some(a), Some(b)) => format!("{}-{}", fmt_num(a), fmt_num(b)),
                        _ => "-".into(),
                    });
                }
                medians.push(line);
                spreads.push(spread);
            }
            let suite = format!("{:?}", rows[0].suite).to_lowercase();
            let _ = writeln!(out, "\n### {suite}\n");
            let head = ["workload", "unit", "Ps"].into_iter().chain(names.clone());
            table(&mut out, head.collect(), medians);
            if !notes.is_empty() {
                let _ = writeln!(out);
            }
            for (i, t) in notes.iter().enumerate() {
                let _ = writeln!(out, "{}. {t}", i + 1);
            }
            if self.rounds > 1 {
                let _ = writeln!(out, "\nSpread (min-max of the rounds):\n");
                table(
                    &mut out,
                    ["workload", "Ps"].into_iter().chain(names).collect(),
                    spreads,
                );
            }
        }
        out
    }
}

fn table(out: &mut String, head: Vec<&str>, rows: Vec<Vec<String>>) {
    let align: String = (head.iter())
        .map(|h| {
            if matches!(*h, "workload" | "unit") {
                "---|"
            } else {
                "---:|"
            }
        })
        .collect();
    let _ = writeln!(out, "| {} |\n|{align}", head.join(" | "));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
}

fn decimals(v: f64) -> usize {
    match v.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        a if a >= 1.0 => 2,
        _ => 3,
    }
}

/// A figure with about three significant digits.
pub fn fmt_num(v: f64) -> String {
    format!("{v:.*}", decimals(v))
}

/// A ratio with about three significant digits (two decimals below 1).
fn fmt_ratio(r: f64) -> String {
    format!("{r:.*}", decimals(r).min(2))
}

#[derive(Debug, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub kernel: String,
    pub cpu: String,
    /// Now, UTC, as `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    pub load_average_start: String,
}

pub fn machine_info() -> Machine {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = procfs::field(&cpuinfo, "model name").unwrap_or("unknown CPU");
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map_or_else(
            |_| "unknown date".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        );
    Machine {
        nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
        kernel,
        cpu: cpu.to_string(),
        date,
        load_average_start: procfs::load_average(),
    }
}

/// A contender's bar colour, by its place in [`contenders::ALL`] (goro, first, has none).
fn colour(c: &str) -> &'static str {
    const COLOURS: [&str; 8] = [
        "#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#17becf", "#e377c2",
    ];
    let i = contenders::ALL.iter().position(|x| x.name() == c);
    i.and_then(|i| COLOURS.get(i.wrapping_sub(1)))
        .unwrap_or(&"#7f7f7f")
}

/// Horizontal grouped bars of the ratio to goro, one group per row (with at least one
/// ratio), log scale; a bar to the right of the goro line means goro is ahead.
pub fn svg(r: &Results) -> String {
    let others: Vec<(usize, &str)> = (r.contenders.iter().copied().enumerate())
        .filter(|&(_, c)| c != "goro")
        .collect();
    let rows: Vec<&RowResult> = (r.rows.iter())
        .filter(|row| row.cells.iter().any(|c| c.ratio_to_goro.is_some()))
        .collect();
    let ratios = rows.iter().flat_map(|row| row.cells.iter());
    let ratios: Vec<f64> = ratios.filter_map(|c| c.ratio_to_goro).collect();
    let lo = ratios.iter().fold(1.0f64, |a, &b| a.min(b)) / 1.5;
    let hi = ratios.iter().fold(1.0f64, |a, &b| a.max(b)) * 1.5;
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let (width, label_w, plot_w, bar_h, top) = (960.0, 230.0, 650.0, 12.0, 60.0);
    let group_h = others.len().max(1) as f64 * (bar_h + 2.0) + 12.0;
    let axis_y = top + group_h * rows.len() as f64;
    let (height, mid, rounds) = (axis_y + 80.0, width / 2.0, r.rounds);
    let x = |v: f64| label_w + (v.log10() - f64::from(d0)) / f64::from(d1 - d0) * plot_w;
    let mut g = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12"><rect width="{width}" height="{height}" fill="white"/>
<text x="{mid}" y="24" text-anchor="middle" font-size="15" font-weight="bold">Ratio to goro, median of {rounds} rounds (log scale; &gt; 1: goro ahead)</text>
"##
    );
    for v in (d0..=d1).map(|d| 10f64.powi(d)) {
        let (gx, ty) = (x(v), axis_y + 16.0);
        let _ = writeln!(
            g,
            r##"<line x1="{gx:.1}" y1="{top}" x2="{gx:.1}" y2="{axis_y}" stroke="#ccc"/><text x="{gx:.1}" y="{ty}" text-anchor="middle" fill="#444">{v}</text>"##
        );
    }
    for (ri, row) in rows.iter().enumerate() {
        let gy = top + group_h * ri as f64 + 6.0;
        let (tx, ty) = (label_w - 8.0, gy + (group_h - 12.0) / 2.0);
        let label = format!("{} ({} P)", row.name, row.procs).replace('&', "&amp;");
        let label = label.replace('<', "&lt;").replace('>', "&gt;");
        let _ = writeln!(
            g,
            r##"<text x="{tx}" y="{ty}" text-anchor="end" dominant-baseline="middle">{label}</text>"##
        );
        for (bi, &(ci, c)) in others.iter().enumerate() {
            let Some(v) = row.cells[ci].ratio_to_goro else {
                continue;
            };
            let y = gy + bi as f64 * (bar_h + 2.0);
            let (a, b) = (x(v).min(x(1.0)), (x(v) - x(1.0)).abs().max(1.0));
            let (fill, ratio) = (colour(c), fmt_ratio(v));
            let _ = writeln!(
                g,
                r##"<rect x="{a:.1}" y="{y:.1}" width="{b:.1}" height="{bar_h}" fill="{fill}"><title>{c}: {ratio}</title></rect>"##
            );
        }
    }
    let (one, y1) = (x(1.0), top - 6.0);
    let _ = writeln!(
        g,
        r##"<line x1="{one:.1}" y1="{y1}" x2="{one:.1}" y2="{axis_y}" stroke="black" stroke-width="1.5"/>"##
    );
    for (i, &(_, c)) in others.iter().enumerate() {
        let lx = label_w + 110.0 * i as f64;
        let (ry, fill, tx, ty) = (axis_y + 40.0, colour(c), lx + 16.0, axis_y + 50.0);
        let _ = writeln!(
            g,
            r##"<rect x="{lx}" y="{ry}" width="12" height="12" fill="{fill}"/><text x="{tx}" y="{ty}">{c}</text>"##
        );
    }
    g + "</svg>\n"
}
