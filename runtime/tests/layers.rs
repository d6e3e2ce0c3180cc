//! The runtime's layers only call down (docs/architecture.md, "layers"): no import
//! circle among runtime/src's modules reaches outside `sched/`, whose core (Go's
//! proc.go) may call itself. A new circle fails this test, which names it.
//!
//! The graph is read from the source: a module depends on another if its code (not its
//! comments, not its `#[cfg(test)]` module) names a path into it — `crate::a::b`,
//! `super::x`, `self::x`, or a child module by its bare name — including `use` lists
//! with braces.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path ("sched::timers") of a source file relative to src/, None for lib.rs.
fn module_of(rel: &Path) -> Option<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop()?;
    let stem = file.strip_suffix(".rs")?;
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    (!parts.is_empty()).then(|| parts.join("::"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code without comments and without its trailing `#[cfg(test)] mod`.
fn code_of(src: &str) -> String {
    let mut out = String::new();
    let mut lines = src.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            break;
        }
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Parses a path tail after `prefix::` at `s` (identifiers, `::`, brace groups) and
/// returns every full path it names, each as a list of segments.
fn paths_after(s: &[u8], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut cur = prefix;
    loop {
        while i < s.len() && s[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < s.len() && s[i] == b'{' {
            i += 1;
            loop {
                while i < s.len() && (s[i].is_ascii_whitespace() || s[i] == b',') {
                    i += 1;
                }
                if i >= s.len() || s[i] == b'}' {
                    return i + 1;
                }
                i = paths_after(s, i, cur.clone(), out);
            }
        }
        let start = i;
        while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_' || s[i] == b'*') {
            i += 1;
        }
        if i == start {
            out.push(cur);
            return i;
        }
        cur.push(String::from_utf8_lossy(&s[start..i]).into_owned());
        if s[i..].starts_with(b"::") {
            i += 2;
        } else {
            out.push(cur);
            return i;
        }
    }
}

/// The module a path names: its longest prefix that is a module.
fn target(path: &[String], modules: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| modules.contains(m))
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every module each module depends on.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut modules = BTreeSet::new();
    let mut code = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let m = module_of(rel);
        if let Some(m) = &m {
            modules.insert(m.clone());
        }
        code.push((m, code_of(&std::fs::read_to_string(f).unwrap())));
    }
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in &code {
        let here: Vec<String> = m
            .as_deref()
            .map(|m| m.split("::").map(String::from).collect())
            .unwrap_or_default();
        let s = text.as_bytes();
        let mut paths = Vec::new();
        let mut i = 0;
        while i < s.len() {
            if i > 0 && (is_ident(s[i - 1]) || s[i - 1] == b':' || s[i - 1] == b'$') {
                i += 1;
                continue;
            }
            let rest = &s[i..];
            let start = if rest.starts_with(b"crate::") {
                Some((7, Vec::new()))
            } else if rest.starts_with(b"super::") {
                Some((7, here[..here.len().saturating_sub(1)].to_vec()))
            } else if rest.starts_with(b"self::") {
                Some((6, here.clone()))
            } else {
                // A child module named bare (`g::GRef` in sched/mod.rs).
                let end = rest
                    .iter()
                    .position(|&b| !is_ident(b))
                    .unwrap_or(rest.len());
                let name = String::from_utf8_lossy(&rest[..end]).into_owned();
                let mut child = here.clone();
                child.push(name);
                if end > 0 && rest[end..].starts_with(b"::") && modules.contains(&child.join("::"))
                {
                    Some((0, here.clone()))
                } else {
                    None
                }
            };
            match start {
                Some((skip, prefix)) => i = paths_after(s, i + skip, prefix, &mut paths),
                None => i += 1,
            }
        }
        let Some(m) = m else { continue };
        let deps = g.entry(m.clone()).or_default();
        for p in paths {
            if let Some(t) = target(&p, &modules) {
                if &t != m {
                    deps.insert(t);
                }
            }
        }
    }
    for m in &modules {
        g.entry(m.clone()).or_default();
    }
    g
}

/// Strongly connected components with more than one module (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.g[v] {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn in_sched(m: &str) -> bool {
    m == "sched" || m.starts_with("sched::")
}

#[test]
fn no_import_circle_reaches_outside_sched() {
    let g = graph();
    let bad: Vec<_> = circles(&g)
        .into_iter()
        .filter(|c| !c.iter().all(|m| in_sched(m)))
        .collect();
    let edges = |c: &[String]| {
        let mut s = String::new();
        for m in c {
            for d in g[m].iter().filter(|d| c.contains(d)) {
                s.push_str(&format!("    {m} -> {d}\n"));
            }
        }
        s
    };
    let report: String = bad
        .iter()
        .map(|c| format!("  circle {c:?}:\n{}", edges(c)))
        .collect();
    assert!(
        bad.is_empty(),
        "import circles in runtime/src reach outside sched/ (a lower layer names a higher \
         one; return what it produces instead, or move the shared piece down):\n{report}"
    );
}

/// The checker itself: paths, brace lists, `super`, bare child names and comments.
#[test]
fn the_checker_reads_paths() {
    let mut out = Vec::new();
    let s = b"super::{g::GRef, p::{P, HeldP}, rt};";
    paths_after(s, 7, vec!["sched".into()], &mut out);
    let joined: Vec<String> = out.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        [
            "sched::g::GRef",
            "sched::p::P",
            "sched::p::HeldP",
            "sched::rt"
        ]
    );
    assert_eq!(
        code_of("a // crate::x\nb\n#[cfg(test)]\nmod tests {\n c\n}"),
        "a \nb\n"
    );
    let mods: BTreeSet<String> = ["sched", "sched::g"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let p: Vec<String> = ["sched", "g", "GRef"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(target(&p, &mods).as_deref(), Some("sched::g"));
    let mut g = BTreeMap::new();
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    g.insert("a".to_string(), set(&["b"]));
    g.insert("b".to_string(), set(&["a", "c"]));
    g.insert("c".to_string(), set(&[]));
    assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}
