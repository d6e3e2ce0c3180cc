//! The report: per row and contender the median of the rounds, the spread, the ratio
//! to goro and the footnotes; as markdown tables (one per suite, each under the command
//! that made it), as JSON (every run's figure) and as an SVG chart of the ratios.

use std::fmt::Write as _;
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::{median, procfs};
use crate::workloads::{Row, Suite};

/// One run's outcome.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Got {
    Value(f64),
    Skip(String),
    Failed(String),
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

    /// The row's label in the chart.
    pub fn label(&self) -> String {
        format!("{} ({} P)", self.name, self.procs)
    }

    /// Computes every cell's figures from its runs, and the ratios to goro's median.
    pub fn finish(&mut self, rounds: usize) {
        for c in &mut self.cells {
            c.finish(rounds);
        }
        let goro = self
            .cells
            .iter()
            .find(|c| c.contender == "goro")
            .and_then(|c| c.median);
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
    /// The columns, in order.
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
        let mut out = String::new();
        let mut suites: Vec<Suite> = Vec::new();
        for r in &self.rows {
            if !suites.contains(&r.suite) {
                suites.push(r.suite);
            }
        }
        let m = &self.machine;
        let _ = writeln!(
            out,
            "Command ({}, {} CPUs, {}, Linux {}, {}; load average {} at the start, {} at the \
             end; {:.0} s):\n\n```sh\n{}\n```\n\nMedian of {} rounds per cell, every run a \
             fresh process, the contenders' order rotated every round. In parentheses: the \
             ratio to goro's median, > 1 when goro is ahead (contender / goro for the \
             lower-is-better figures, goro / contender for req/s and wake-ups/s). -: not \
             measured by that contender.",
            m.date,
            m.nproc,
            m.cpu,
            m.kernel,
            self.go,
            m.load_average_start,
            self.load_average_end,
            self.total_secs,
            self.command,
            self.rounds
        );
        for suite in suites {
            let rows: Vec<&RowResult> = self.rows.iter().filter(|r| r.suite == suite).collect();
            let cols: Vec<usize> = (0..self.contenders.len())
                .filter(|&ci| rows.iter().any(|r| !r.cells[ci].runs.is_empty()))
                .collect();
            let mut notes = Footnotes::default();
            let names: Vec<&str> = cols.iter().map(|&ci| self.contenders[ci]).collect();
            let _ = writeln!(
                out,
                "\n### {}\n",
                serde_json::to_value(suite)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            );
            let _ = writeln!(out, "| workload | unit | Ps | {} |", names.join(" | "));
            let _ = writeln!(out, "|---|---|---:|{}", "---:|".repeat(cols.len()));
            for r in &rows {
                let mut line = format!("| {} | {} | {} |", r.name, r.unit, r.procs);
                for &ci in &cols {
                    let cell = &r.cells[ci];
                    let mut text = match (cell.median, cell.ratio_to_goro) {
                        (Some(v), Some(x)) => format!("{} ({}x)", fmt_num(v), fmt_ratio(x)),
                        (Some(v), None) => fmt_num(v),
                        (None, _) if cell.failures.is_empty() => "-".into(),
                        (None, _) => "failed".into(),
                    };
                    if let Some(f) = cell.footnote(self.rounds) {
                        let k = notes.mark(format!("{}: {f}", cell.contender));
                        let _ = write!(text, " [{k}]");
                    }
                    let _ = write!(line, " {text} |");
                }
                let _ = writeln!(out, "{line}");
            }
            if !notes.0.is_empty() {
                let _ = writeln!(out);
                for (i, t) in notes.0.iter().enumerate() {
                    let _ = writeln!(out, "{}. {t}", i + 1);
                }
            }
            if self.rounds > 1 {
                let _ = writeln!(out, "\nSpread (min-max of the rounds):\n");
                let _ = writeln!(out, "| workload | Ps | {} |", names.join(" | "));
                let _ = writeln!(out, "|---|---:|{}", "---:|".repeat(cols.len()));
                for r in &rows {
                    let mut line = format!("| {} | {} |", r.name, r.procs);
                    for &ci in &cols {
                        let c = &r.cells[ci];
                        let text = match (c.min, c.max) {
                            (Some(a), Some(b)) => format!("{}-{}", fmt_num(a), fmt_num(b)),
                            _ => "-".into(),
                        };
                        let _ = write!(line, " {text} |");
                    }
                    let _ = writeln!(out, "{line}");
                }
            }
        }
        out
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
    pub footnote: Option<String>,
    #[serde(skip)]
    values: usize,
    #[serde(skip)]
    skips: Vec<String>,
    #[serde(skip)]
    failures: Vec<String>,
    #[serde(skip)]
    notes: Vec<String>,
}

impl Cell {
    fn finish(&mut self, rounds: usize) {
        let mut vals = Vec::new();
        for r in &self.runs {
            match &r.got {
                Got::Value(v) => vals.push(*v),
                Got::Skip(why) => self.skips.push(why.clone()),
                Got::Failed(why) => self.failures.push(why.clone()),
            }
            if let Some(n) = &r.note {
                if !self.notes.contains(n) {
                    self.notes.push(n.clone());
                }
            }
        }
        self.values = vals.len();
        vals.sort_by(f64::total_cmp);
        self.median = median(&vals);
        self.min = vals.first().copied();
        self.max = vals.last().copied();
        self.footnote = self.footnote(rounds);
    }

    /// What the footnote says about this cell, if anything.
    fn footnote(&self, rounds: usize) -> Option<String> {
        let mut parts = Vec::new();
        let distinct = |v: &[String]| {
            let mut d: Vec<(String, usize)> = Vec::new();
            for s in v {
                match d.iter_mut().find(|(t, _)| t == s) {
                    Some((_, k)) => *k += 1,
                    None => d.push((s.clone(), 1)),
                }
            }
            // Reasons that differ only in their figures (rates, counts) would repeat the
            // same sentence per rep: show the first, and say the rest is in the JSON.
            let total: usize = d.iter().map(|(_, k)| k).sum();
            let (first, k) = d[0].clone();
            if d.len() > 1 {
                format!("{first} (first of {total} rounds; the others' figures are in the JSON)")
            } else if k > 1 && k < rounds {
                format!("{first} ({k} rounds)")
            } else {
                first
            }
        };
        if !self.skips.is_empty() {
            let lead = if self.values > 0 || !self.failures.is_empty() {
                format!("{} of {rounds} rounds skipped: ", self.skips.len())
            } else {
                "skip: ".into()
            };
            parts.push(lead + &distinct(&self.skips));
        }
        if !self.failures.is_empty() {
            let lead = if self.values > 0 || !self.skips.is_empty() {
                format!("{} of {rounds} rounds failed: ", self.failures.len())
            } else {
                "failed: ".into()
            };
            parts.push(lead + &distinct(&self.failures));
        }
        parts.extend(self.notes.iter().cloned());
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A figure with about three significant digits.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A ratio with about three significant digits.
fn fmt_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// Numbered footnotes, the same text sharing a number.
#[derive(Default)]
struct Footnotes(Vec<String>);

impl Footnotes {
    fn mark(&mut self, text: String) -> usize {
        match self.0.iter().position(|t| *t == text) {
            Some(i) => i + 1,
            None => {
                self.0.push(text);
                self.0.len()
            }
        }
    }
}

/// The machine a run was made on.
#[derive(Debug, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub kernel: String,
    pub cpu: String,
    pub date: String,
    pub load_average_start: String,
}

/// This machine, now.
pub fn machine_info() -> Machine {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    Machine {
        nproc: thread::available_parallelism().map_or(0, |n| n.get()),
        kernel,
        cpu,
        date: utc_now(),
        load_average_start: procfs::load_average(),
    }
}

/// Now, UTC, as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

/// Colours of the bars, by contender.
fn colour(c: &str) -> &'static str {
    match c {
        "may" => "#d62728",
        "tokio" => "#ff7f0e",
        "threads" => "#2ca02c",
        "go" => "#1f77b4",
        "goro_no_backoff" => "#9467bd",
        "parking_lot" => "#8c564b",
        "base" => "#e377c2",
        "example" => "#17becf",
        _ => "#7f7f7f",
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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
    let ratios = || {
        rows.iter()
            .flat_map(|row| row.cells.iter().filter_map(|c| c.ratio_to_goro))
    };
    let lo = ratios().fold(1.0f64, f64::min) / 1.5;
    let hi = ratios().fold(1.0f64, f64::max) * 1.5;
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let (width, label_w, plot_w, bar_h, top) = (960.0, 230.0, 650.0, 12.0, 60.0);
    let group_h = others.len().max(1) as f64 * (bar_h + 2.0) + 12.0;
    let axis_y = top + group_h * rows.len() as f64;
    let height = axis_y + 80.0;
    let x = |v: f64| label_w + (v.log10() - f64::from(d0)) / f64::from(d1 - d0) * plot_w;
    let mut g = String::new();
    let mut put = |s: String| {
        g.push_str(&s);
        g.push('\n');
    };
    put(format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12"><rect width="{width}" height="{height}" fill="white"/>"##
    ));
    put(format!(
        r##"<text x="{}" y="24" text-anchor="middle" font-size="15" font-weight="bold">Ratio to goro, median of {} rounds (log scale; &gt; 1: goro ahead)</text>"##,
        width / 2.0,
        r.rounds
    ));
    for d in d0..=d1 {
        let v = 10f64.powi(d);
        put(format!(
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{axis_y}" stroke="#ccc"/><text x="{0:.1}" y="{1}" text-anchor="middle" fill="#444">{v}</text>"##,
            x(v),
            axis_y + 16.0
        ));
    }
    for (ri, row) in rows.iter().enumerate() {
        let gy = top + group_h * ri as f64 + 6.0;
        put(format!(
            r##"<text x="{}" y="{}" text-anchor="end" dominant-baseline="middle">{}</text>"##,
            label_w - 8.0,
            gy + (group_h - 12.0) / 2.0,
            xml_escape(&row.label())
        ));
        for (bi, &(ci, c)) in others.iter().enumerate() {
            let Some(v) = row.cells[ci].ratio_to_goro else {
                continue;
            };
            let y = gy + bi as f64 * (bar_h + 2.0);
            let (a, b) = (x(v).min(x(1.0)), (x(v) - x(1.0)).abs().max(1.0));
            put(format!(
                r##"<rect x="{a:.1}" y="{y:.1}" width="{b:.1}" height="{bar_h}" fill="{}"><title>{c}: {}</title></rect>"##,
                colour(c),
                fmt_ratio(v)
            ));
        }
    }
    put(format!(
        r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{axis_y}" stroke="black" stroke-width="1.5"/>"##,
        x(1.0),
        top - 6.0
    ));
    for (i, &(_, c)) in others.iter().enumerate() {
        let lx = label_w + 110.0 * i as f64;
        put(format!(
            r##"<rect x="{lx}" y="{0}" width="12" height="12" fill="{1}"/><text x="{2}" y="{3}">{c}</text>"##,
            axis_y + 40.0,
            colour(c),
            lx + 16.0,
            axis_y + 50.0
        ));
    }
    g + "</svg>\n"
}
