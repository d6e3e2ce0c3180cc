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
    pub command: String,
    pub ratio_convention: &'static str,
    pub machine: Machine,
    pub go: String,
    pub rounds: usize,
    pub contenders: Vec<&'static str>,
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
        _ => "#7f7f7f",
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Horizontal grouped bars of the ratio to goro, one group per row, log scale.
pub fn svg(r: &Results) -> String {
    let others: Vec<(usize, &str)> = r
        .contenders
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, c)| c != "goro")
        .collect();
    let ratios: Vec<f64> = r
        .rows
        .iter()
        .flat_map(|row| {
            others
                .iter()
                .filter_map(|&(ci, _)| row.cells[ci].ratio_to_goro)
        })
        .collect();
    let lo = ratios.iter().copied().fold(1.0f64, f64::min) / 1.5;
    let hi = ratios.iter().copied().fold(1.0f64, f64::max) * 1.5;
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let (l0, l1) = (f64::from(d0), f64::from(d1));

    let (width, label_w, right) = (960.0, 150.0, 80.0);
    let plot_w = width - label_w - right;
    let (bar_h, bar_gap, group_gap) = (12.0, 2.0, 14.0);
    let k = others.len().max(1) as f64;
    let group_h = k * (bar_h + bar_gap) - bar_gap + group_gap;
    let top = 76.0;
    let plot_h = group_h * r.rows.len() as f64;
    let height = top + plot_h + 100.0;
    let x = |r: f64| label_w + (r.log10() - l0) / (l1 - l0) * plot_w;

    let mut g = String::new();
    let _ = writeln!(
        g,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(
        g,
        r##"<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>"##
    );
    let _ = writeln!(
        g,
        r##"<text x="{}" y="24" text-anchor="middle" font-size="16" font-weight="bold">goro vs {}: ratio to goro (&gt; 1: goro ahead)</text>"##,
        width / 2.0,
        xml_escape(
            &others
                .iter()
                .map(|(_, c)| *c)
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    let _ = writeln!(
        g,
        r##"<text x="{}" y="44" text-anchor="middle" fill="#444">median of {} rounds; contender / goro for times and sizes, goro / contender for throughputs; log scale</text>"##,
        width / 2.0,
        r.rounds
    );
    // Grid and ticks.
    let axis_y = top + plot_h;
    for d in d0..=d1 {
        let decade = 10f64.powi(d);
        let mults: &[f64] = if d1 - d0 <= 3 {
            &[1.0, 2.0, 5.0]
        } else {
            &[1.0]
        };
        for &m in mults {
            let v = decade * m;
            if d == d1 && m > 1.0 {
                continue;
            }
            let xv = x(v);
            let stroke = if m == 1.0 { "#ccc" } else { "#eee" };
            let _ = writeln!(
                g,
                r##"<line x1="{xv:.1}" y1="{top}" x2="{xv:.1}" y2="{axis_y}" stroke="{stroke}"/>"##
            );
            let label = if d < 0 {
                format!("{:.*}", (-d) as usize, v)
            } else {
                format!("{v:.0}")
            };
            let _ = writeln!(
                g,
                r##"<text x="{xv:.1}" y="{:.1}" text-anchor="middle" fill="#444">{label}</text>"##,
                axis_y + 16.0
            );
        }
    }
    let _ = writeln!(
        g,
        r##"<line x1="{label_w}" y1="{axis_y}" x2="{:.1}" y2="{axis_y}" stroke="black"/>"##,
        label_w + plot_w
    );
    let _ = writeln!(
        g,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">ratio to goro (log scale; &gt; 1: goro ahead, &lt; 1: the other is ahead)</text>"##,
        label_w + plot_w / 2.0,
        axis_y + 36.0
    );
    // Bars.
    let x1 = x(1.0);
    for (wi, row) in r.rows.iter().enumerate() {
        let gy = top + group_h * wi as f64 + group_gap / 2.0;
        let _ = writeln!(
            g,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" dominant-baseline="middle">{}</text>"##,
            label_w - 8.0,
            gy + (group_h - group_gap) / 2.0,
            xml_escape(&row.label())
        );
        for (bi, &(ci, c)) in others.iter().enumerate() {
            let y = gy + bi as f64 * (bar_h + bar_gap);
            let cell = &row.cells[ci];
            match cell.ratio_to_goro {
                Some(ratio) => {
                    let xr = x(ratio);
                    let (bx, bw) = (xr.min(x1), (xr - x1).abs().max(1.0));
                    let _ = writeln!(
                        g,
                        r##"<rect x="{bx:.1}" y="{y:.1}" width="{bw:.1}" height="{bar_h}" fill="{}"><title>{} {}: {:.2}</title></rect>"##,
                        colour(c),
                        c,
                        xml_escape(&row.label()),
                        ratio
                    );
                    let _ = writeln!(
                        g,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" dominant-baseline="middle" fill="#333">{}</text>"##,
                        xr.max(x1) + 4.0,
                        y + bar_h / 2.0,
                        fmt_ratio(ratio)
                    );
                }
                None => {
                    let word = if cell.median.is_some() {
                        "no goro figure"
                    } else if cell.failures.is_empty() {
                        "skip"
                    } else {
                        "failed"
                    };
                    let _ = writeln!(
                        g,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" font-style="italic" dominant-baseline="middle" fill="{}">{} {word}</text>"##,
                        x1 + 4.0,
                        y + bar_h / 2.0,
                        colour(c),
                        c
                    );
                }
            }
        }
    }
    let _ = writeln!(
        g,
        r##"<line x1="{x1:.1}" y1="{}" x2="{x1:.1}" y2="{axis_y}" stroke="black" stroke-width="1.5"/>"##,
        top - 6.0
    );
    // Legend.
    let ly = axis_y + 64.0;
    let mut lx = label_w;
    for &(_, c) in &others {
        let _ = writeln!(
            g,
            r##"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{ly:.1}" dominant-baseline="middle">{}</text>"##,
            ly - 6.0,
            colour(c),
            lx + 16.0,
            c
        );
        lx += 100.0;
    }
    let _ = writeln!(
        g,
        r##"<line x1="{lx:.1}" y1="{:.1}" x2="{lx:.1}" y2="{:.1}" stroke="black" stroke-width="1.5"/><text x="{:.1}" y="{ly:.1}" dominant-baseline="middle">goro (= 1)</text>"##,
        ly - 7.0,
        ly + 7.0,
        lx + 6.0
    );
    lx += 100.0;
    if others.is_empty() || !r.contenders.contains(&"goro") {
        let _ = writeln!(
            g,
            r##"<text x="{lx:.1}" y="{ly:.1}" dominant-baseline="middle">(no ratios: goro and at least one other contender are needed)</text>"##
        );
    }
    g.push_str("</svg>\n");
    g
}
