//! `stoa bench compare A.json B.json ... [--html FILE]`: the main figures
//! of several runs side by side, with each one's ratio to the first; runs
//! of the same target (the same `--name`, or the same URL and load shape)
//! are grouped, each group shown as the median and the min–max of its
//! runs, so that rounds of several servers read as one column per server.

use super::Summary;
use crate::cli::CliError;
use std::io::Write;
use std::path::Path;

pub fn load(path: &Path) -> Result<Summary, CliError> {
    let data =
        std::fs::read(path).map_err(|e| CliError::Fatal(format!("{}: {e}", path.display())))?;
    serde_json::from_slice(&data).map_err(|e| {
        CliError::Fatal(format!(
            "{}: not a stoa bench --json file: {e}",
            path.display()
        ))
    })
}

/// A ratio with enough digits to mean something: two decimals from 0.1 up,
/// three significant digits below (a run 800 times slower is 0.00125x, not
/// 0.00x), whole numbers from 100 up.
pub fn fmt_ratio(r: f64) -> String {
    if !r.is_finite() {
        return "-".into();
    }
    if r == 0.0 {
        return "0x".into();
    }
    let a = r.abs();
    if a >= 100.0 {
        format!("{r:.0}x")
    } else if a >= 0.1 {
        format!("{r:.2}x")
    } else {
        let decimals = ((-a.log10()).ceil() as usize + 2).min(12);
        format!("{r:.decimals$}x")
    }
}

/// A row of the table: label, JSON key, value, whether more is better.
type Row = (
    &'static str,
    &'static str,
    Box<dyn Fn(&Summary) -> Option<f64>>,
    bool,
);

fn rows() -> Vec<Row> {
    vec![
        (
            "requests/s",
            "requests_per_second",
            Box::new(|s: &Summary| Some(s.success_rate())),
            true,
        ),
        (
            "failures/s",
            "failures_per_second",
            Box::new(|s: &Summary| Some(s.failure_rate())),
            false,
        ),
        (
            "requests",
            "requests",
            Box::new(|s: &Summary| Some(s.requests as f64)),
            true,
        ),
        (
            "failed",
            "failed",
            Box::new(|s: &Summary| Some(s.failed as f64)),
            false,
        ),
        (
            "non-2xx",
            "non_2xx",
            Box::new(|s: &Summary| Some(s.non_2xx as f64)),
            false,
        ),
        (
            "in flight at end",
            "in_flight_at_end",
            Box::new(|s: &Summary| Some(s.in_flight_at_end as f64)),
            false,
        ),
        (
            "latency mean ms",
            "latency_mean_ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.mean)),
            false,
        ),
        (
            "latency stddev ms",
            "latency_stddev_ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.stddev)),
            false,
        ),
        (
            "latency p50 ms",
            "latency_p50_ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p50)),
            false,
        ),
        (
            "latency p90 ms",
            "latency_p90_ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p90)),
            false,
        ),
        (
            "latency p95 ms",
            "latency_p95_ms",
            // Files written before p95 was recorded have none (0).
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p95).filter(|&v| v > 0.0)),
            false,
        ),
        (
            "latency p99 ms",
            "latency_p99_ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p99)),
            false,
        ),
        (
            "latency p99.9 ms",
            "latency_p999_ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p999)),
            false,
        ),
        (
            "latency max ms",
            "latency_max_ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.max)),
            false,
        ),
        (
            "received MB/s",
            "received_mb_per_s",
            Box::new(|s: &Summary| {
                Some(s.bytes.received as f64 / 1048576.0 / s.duration_s.max(1e-9))
            }),
            true,
        ),
    ]
}

/// A run's clients as the table shows them: the configured count, or the
/// peak and mean when they varied (open loop: requests in flight).
fn clients_cell(s: &Summary) -> String {
    if s.settings.varying_clients || s.settings.open_loop {
        format!("{}/{:.1}", s.active_peak, s.active_mean)
    } else {
        s.settings.concurrency.to_string()
    }
}

/// The comparison table.
pub fn table(names: &[String], runs: &[Summary]) -> String {
    let rows = rows();
    let w = names.iter().map(|n| n.len()).max().unwrap_or(0).max(12);
    let mut o = format!("{:<18}", "");
    for (i, n) in names.iter().enumerate() {
        o.push_str(&format!(" {n:>w$}"));
        if i > 0 {
            o.push_str(&format!(" {:>8}", "ratio"));
        }
    }
    o.push('\n');
    // Clients first: a rate means little without them (peak/mean when
    // they varied).
    o.push_str(&format!("{:<18}", "clients"));
    for (i, r) in runs.iter().enumerate() {
        o.push_str(&format!(" {:>w$}", clients_cell(r)));
        if i > 0 {
            o.push_str(&format!(" {:>8}", ""));
        }
    }
    o.push('\n');
    for (label, _, f, _) in &rows {
        o.push_str(&format!("{label:<18}"));
        let base = f(&runs[0]);
        for (i, r) in runs.iter().enumerate() {
            let v = f(r);
            o.push_str(&format!(
                " {:>w$}",
                match v {
                    // No sample (no response completed).
                    None => "-".to_string(),
                    Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
                    Some(v) => format!("{v:.3}"),
                }
            ));
            if i > 0 {
                let ratio = match (v, base) {
                    (Some(v), Some(b)) if b != 0.0 => fmt_ratio(v / b),
                    _ => "-".into(),
                };
                o.push_str(&format!(" {ratio:>8}"));
            }
        }
        o.push('\n');
    }
    o
}

/// The comparison as JSON: each run's name, file, clients, values and
/// ratios to the first run (null where there is no value or no ratio).
pub fn json(names: &[String], files: &[String], runs: &[Summary]) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let rows = rows();
    let list: Vec<Value> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (mut values, mut ratios) = (Map::new(), Map::new());
            for (_, key, f, _) in &rows {
                let v = f(r);
                values.insert(key.to_string(), json!(v));
                let ratio = match (v, f(&runs[0])) {
                    (Some(v), Some(b)) if b != 0.0 => Some(v / b),
                    _ => None,
                };
                ratios.insert(key.to_string(), json!(ratio));
            }
            json!({
                "name": names[i],
                "file": files[i],
                "url": r.url,
                "clients": {
                    "configured": r.settings.concurrency,
                    "varying": r.settings.varying_clients,
                    "peak": r.active_peak,
                    "mean": r.active_mean,
                    "value": super::html::clients_of(r),
                },
                "values": values,
                "ratio_to_first": ratios,
            })
        })
        .collect();
    json!({ "tool": "stoa bench compare", "runs": list })
}

/// The key that groups repeated runs: the run's `--name`, or its URL and
/// load shape (clients, open-loop rate, keep-alive), so that a sweep over
/// `-c` stays apart.
pub fn group_key(s: &Summary) -> String {
    if let Some(n) = &s.name {
        return n.clone();
    }
    let mut k = s.url.clone();
    match s.settings.rate {
        Some(r) if s.settings.open_loop => k.push_str(&format!(" rate={r}")),
        _ => {}
    }
    if s.settings.varying_clients {
        if let Some(sc) = &s.settings.scenario {
            k.push_str(&format!(" scenario={sc}"));
        }
    } else {
        k.push_str(&format!(" c={}", s.settings.concurrency));
    }
    if s.settings.keep_alive {
        k.push_str(" -k");
    }
    k
}

/// Runs grouped by [`group_key`], in the order each group's first run
/// came: (key, indices of its runs).
pub fn groups(runs: &[Summary]) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let k = group_key(r);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(i),
            None => out.push((k, vec![i])),
        }
    }
    out
}

/// Median, minimum and maximum of the values present (the median of an
/// even count is the mean of the middle two); None when there is none.
pub fn median_spread(vals: &[Option<f64>]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = vals.iter().flatten().copied().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some((med, v[0], v[n - 1]))
}

/// A figure in at most 4 significant digits past the point (0.123,
/// 12.35, 1235): a spread of six runs stays narrow.
pub fn fmt_short(v: f64) -> String {
    let a = v.abs();
    // Whole numbers (counts) as they are.
    if (v.fract() == 0.0 && a < 1e15) || a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A group's name: the key, or, for a run without `--name`, its file's
/// name when it is the only run (the URL otherwise).
fn group_names(runs: &[Summary], gs: &[(String, Vec<usize>)]) -> Vec<String> {
    gs.iter()
        .map(|(k, idx)| match (&runs[idx[0]].name, idx.len()) {
            (Some(n), _) => n.clone(),
            (None, 1) => runs[idx[0]].label.clone(),
            (None, _) => k.clone(),
        })
        .collect()
}

/// The grouped table: one column per group, each figure the median of its
/// runs with their min–max, and the ratio of its median to the first
/// group's; then one line per run with its main figures, so that each run
/// can still be found.
pub fn grouped_table(runs: &[Summary]) -> String {
    let rows = rows();
    let gs = groups(runs);
    let names = group_names(runs, &gs);
    let cell = |f: &dyn Fn(&Summary) -> Option<f64>, idx: &[usize]| -> (String, Option<f64>) {
        let vals: Vec<Option<f64>> = idx.iter().map(|&i| f(&runs[i])).collect();
        match median_spread(&vals) {
            None => ("-".into(), None),
            Some((m, lo, hi)) if idx.len() == 1 || lo == hi => (fmt_short(m), Some(m)),
            Some((m, lo, hi)) => (
                format!("{} ({}–{})", fmt_short(m), fmt_short(lo), fmt_short(hi)),
                Some(m),
            ),
        }
    };
    // Cells first, to size each column to its widest.
    let mut table: Vec<(String, Vec<String>)> = Vec::new();
    let heads: Vec<String> = gs
        .iter()
        .zip(&names)
        .map(|((_, idx), n)| format!("{n} [{}]", idx.len()))
        .collect();
    let clients: Vec<String> = gs
        .iter()
        .map(|(_, idx)| {
            let c: Vec<String> = idx.iter().map(|&i| clients_cell(&runs[i])).collect();
            if c.iter().all(|x| *x == c[0]) {
                c[0].clone()
            } else {
                cell(&|s: &Summary| Some(super::html::clients_of(s)), idx).0
            }
        })
        .collect();
    table.push(("clients".into(), interleave(clients, None)));
    for (label, _, f, _) in &rows {
        let cells: Vec<(String, Option<f64>)> = gs.iter().map(|(_, idx)| cell(f, idx)).collect();
        let base = cells[0].1;
        let ratios: Vec<String> = cells
            .iter()
            .map(|(_, m)| match (m, base) {
                (Some(v), Some(b)) if b != 0.0 => fmt_ratio(v / b),
                _ => "-".into(),
            })
            .collect();
        table.push((
            label.to_string(),
            interleave(cells.into_iter().map(|c| c.0).collect(), Some(ratios)),
        ));
    }
    let ncols = gs.len() * 2 - 1;
    let mut widths = vec![0usize; ncols];
    // Each group's ratio column follows it, in the head as in the rows.
    let head_cells = interleave_heads(&heads);
    for row in table
        .iter()
        .map(|r| &r.1)
        .chain(std::iter::once(&head_cells))
    {
        for (c, v) in row.iter().enumerate() {
            widths[c] = widths[c].max(v.chars().count());
        }
    }
    let pad = |v: &str, w: usize| format!("{}{v}", " ".repeat(w.saturating_sub(v.chars().count())));
    let mut o = String::from(
        "Median of each group's runs (min–max when they differ); [runs]; ratio of medians to the first group\n",
    );
    o.push_str(&format!("{:<18}", ""));
    for (c, h) in head_cells.iter().enumerate() {
        o.push_str(&format!(" {}", pad(h, widths[c])));
    }
    o.push('\n');
    for (label, cells) in &table {
        o.push_str(&format!("{label:<18}"));
        for (c, v) in cells.iter().enumerate() {
            o.push_str(&format!(" {}", pad(v, widths[c])));
        }
        o.push('\n');
    }
    // Every run on one line, under its group.
    let nw = runs
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    o.push_str(&format!(
        "\n{:<nw$} {:>12} {:>10} {:>10} {:>10} {:>8}  group\n",
        "run", "requests/s", "p50 ms", "p99 ms", "failed", "clients"
    ));
    for ((_, idx), gname) in gs.iter().zip(&names) {
        for &i in idx {
            let r = &runs[i];
            let l = r.latency_ms;
            let f = |v: Option<f64>| v.map_or("-".into(), fmt_short);
            o.push_str(&format!(
                "{:<nw$} {:>12} {:>10} {:>10} {:>10} {:>8}  {gname}\n",
                r.label,
                fmt_short(r.success_rate()),
                f(l.map(|l| l.p50)),
                f(l.map(|l| l.p99)),
                r.failed,
                clients_cell(r)
            ));
        }
    }
    o
}

/// Widest line the per-run table may have before the runs go in rows.
const MAX_WIDTH: usize = 120;

/// The per-run table's width: the label column, then each run's column
/// and (after the first) its ratio.
fn table_width(names: &[String]) -> usize {
    let w = names.iter().map(|n| n.len()).max().unwrap_or(0).max(12);
    18 + names.len() * (w + 1) + names.len().saturating_sub(1) * 9
}

/// Many runs that do not repeat (a sweep over `-c`): one line per run
/// with the main figures and its rate's ratio to the first run, so that
/// the table grows down, not across.
pub fn runs_table(names: &[String], runs: &[Summary]) -> String {
    let nw = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    let f = |v: Option<f64>| v.map_or("-".into(), fmt_short);
    let mut o = format!(
        "{:<nw$} {:>9} {:>11} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        "run",
        "clients",
        "requests/s",
        "ratio",
        "failed",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms"
    );
    let base = runs[0].success_rate();
    for (n, r) in names.iter().zip(runs) {
        let l = r.latency_ms;
        let ratio = if base != 0.0 {
            fmt_ratio(r.success_rate() / base)
        } else {
            "-".into()
        };
        o.push_str(&format!(
            "{n:<nw$} {:>9} {:>11} {ratio:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            clients_cell(r),
            fmt_short(r.success_rate()),
            r.failed,
            f(l.map(|l| l.p50)),
            f(l.map(|l| l.p90)),
            f(l.map(|l| l.p99)),
            f(l.map(|l| l.p999)),
            f(l.map(|l| l.max)),
        ));
    }
    o
}

/// A row's cells with each group's ratio after it (none after the first).
fn interleave(cells: Vec<String>, ratios: Option<Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (g, c) in cells.into_iter().enumerate() {
        out.push(c);
        if g > 0 {
            out.push(
                ratios
                    .as_ref()
                    .and_then(|r| r.get(g).cloned())
                    .unwrap_or_default(),
            );
        }
    }
    out
}

fn interleave_heads(heads: &[String]) -> Vec<String> {
    interleave(heads.to_vec(), Some(vec!["ratio".to_string(); heads.len()]))
}

/// The groups as JSON: each one's name, runs, and per figure its median,
/// min, max and the ratio of its median to the first group's.
pub fn groups_json(runs: &[Summary]) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let rows = rows();
    let gs = groups(runs);
    let names = group_names(runs, &gs);
    let mut first: Map<String, Value> = Map::new();
    let list: Vec<Value> = gs
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(g, ((key, idx), name))| {
            let mut figs = Map::new();
            for (_, k, f, _) in &rows {
                let vals: Vec<Option<f64>> = idx.iter().map(|&i| f(&runs[i])).collect();
                let ms = median_spread(&vals);
                let med = ms.map(|m| m.0);
                if g == 0 {
                    first.insert(k.to_string(), json!(med));
                }
                let ratio = match (med, first.get(*k).and_then(Value::as_f64)) {
                    (Some(v), Some(b)) if b != 0.0 => Some(v / b),
                    _ => None,
                };
                figs.insert(
                    k.to_string(),
                    json!({
                        "median": med,
                        "min": ms.map(|m| m.1),
                        "max": ms.map(|m| m.2),
                        "ratio_to_first": ratio,
                    }),
                );
            }
            json!({
                "name": name,
                "key": key,
                "runs": idx.iter().map(|&i| runs[i].label.clone()).collect::<Vec<_>>(),
                "n": idx.len(),
                "values": figs,
            })
        })
        .collect();
    Value::Array(list)
}

/// Names for the runs: their files' stems, made distinct (with the
/// parent directory, then a number) so that no two runs share a label.
pub fn distinct_names(files: &[String]) -> Vec<String> {
    let stem = |f: &String| {
        Path::new(f)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| f.clone())
    };
    let with_dir = |f: &String| {
        let p = Path::new(f);
        match p.parent().and_then(|d| d.file_name()) {
            Some(d) => format!("{}/{}", d.to_string_lossy(), stem(f)),
            None => stem(f),
        }
    };
    let mut names: Vec<String> = files.iter().map(stem).collect();
    for i in 0..names.len() {
        if names.iter().filter(|n| **n == names[i]).count() > 1 {
            let dup = names[i].clone();
            for (j, f) in files.iter().enumerate() {
                if names[j] == dup {
                    names[j] = with_dir(f);
                }
            }
        }
    }
    // Still equal (the same file twice, or same directory names): number
    // them.
    for i in 0..names.len() {
        let same: Vec<usize> = (0..names.len()).filter(|&j| names[j] == names[i]).collect();
        if same.len() > 1 {
            for (k, j) in same.into_iter().enumerate() {
                names[j] = format!("{} #{}", names[j], k + 1);
            }
        }
    }
    names
}

pub fn main(args: &[String], out: &mut dyn Write) -> Result<u8, CliError> {
    let mut files = Vec::new();
    let mut html = None;
    let mut json_out = None;
    let mut each = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--html" => {
                html = Some(
                    args.get(i + 1)
                        .cloned()
                        .ok_or_else(|| CliError::Usage("compare: --html needs a file".into()))?,
                );
                i += 2;
            }
            "--json" => {
                json_out = Some(
                    args.get(i + 1)
                        .cloned()
                        .ok_or_else(|| CliError::Usage("compare: --json needs a file".into()))?,
                );
                i += 2;
            }
            "--each" | "--no-group" => {
                each = true;
                i += 1;
            }
            s if s.starts_with('-') => {
                return Err(CliError::Usage(format!("compare: unknown option {s}")))
            }
            s => {
                files.push(s.to_string());
                i += 1;
            }
        }
    }
    if files.len() < 2 {
        return Err(CliError::Usage(
            "compare needs at least two --json files".into(),
        ));
    }
    let mut runs = files
        .iter()
        .map(|f| load(Path::new(f)))
        .collect::<Result<Vec<_>, _>>()?;
    let names = distinct_names(&files);
    for (r, n) in runs.iter_mut().zip(&names) {
        r.label = n.clone();
    }
    // Repeated runs of a target read as one column with its spread; every
    // run apart only when asked, or when nothing repeats.
    let grouped = !each && groups(&runs).len() < runs.len();
    if grouped {
        let _ = out.write_all(grouped_table(&runs).as_bytes());
    } else if !each && table_width(&names) > MAX_WIDTH {
        let _ = out.write_all(runs_table(&names, &runs).as_bytes());
    } else {
        let _ = out.write_all(table(&names, &runs).as_bytes());
    }
    if let Some(j) = json_out {
        let mut v = json(&names, &files, &runs);
        v["groups"] = groups_json(&runs);
        let bytes = serde_json::to_vec_pretty(&v).map_err(|e| CliError::Fatal(e.to_string()))?;
        std::fs::write(&j, bytes).map_err(|e| CliError::Fatal(format!("{j}: {e}")))?;
    }
    if let Some(h) = html {
        std::fs::write(&h, super::html::page(&runs))
            .map_err(|e| CliError::Fatal(format!("{h}: {e}")))?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_get_distinct_names_even_from_files_of_the_same_name() {
        let f = |v: &[&str]| distinct_names(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(f(&["a.json", "b.json"]), ["a", "b"]);
        assert_eq!(
            f(&["stoa/run.json", "apache/run.json", "x.json"]),
            ["stoa/run", "apache/run", "x"]
        );
        assert_eq!(f(&["r.json", "r.json"]), ["r #1", "r #2"]);
    }

    #[test]
    fn a_groups_median_is_its_middle_run_and_its_spread_the_extremes() {
        assert_eq!(
            median_spread(&[Some(3.0), Some(1.0), Some(2.0)]),
            Some((2.0, 1.0, 3.0))
        );
        // An even count: the mean of the middle two; a run without the
        // figure is left out, and none at all has none.
        assert_eq!(
            median_spread(&[Some(4.0), None, Some(1.0), Some(2.0), Some(3.0)]),
            Some((2.5, 1.0, 4.0))
        );
        assert_eq!(median_spread(&[None, None]), None);
        assert_eq!(fmt_short(12345.678), "12346");
        assert_eq!(fmt_short(0.0714), "0.071");
        assert_eq!(fmt_short(30.0), "30");
    }

    #[test]
    fn runs_group_by_name_else_by_url_and_load_shape() {
        let run = |name: Option<&str>, url: &str, c: u64, k: bool| {
            let mut s = Summary {
                name: name.map(String::from),
                url: url.into(),
                ..Summary::default()
            };
            s.settings.concurrency = c;
            s.settings.keep_alive = k;
            s
        };
        let runs = [
            run(None, "http://a/", 10, true),
            run(None, "http://b/", 10, true),
            run(None, "http://a/", 10, true),
            // A sweep over -c stays apart; so does keep-alive.
            run(None, "http://a/", 20, true),
            run(None, "http://a/", 10, false),
            // A name wins over the URL.
            run(Some("stoa"), "http://a/", 10, true),
            run(Some("stoa"), "http://c/", 10, true),
        ];
        let g: Vec<Vec<usize>> = groups(&runs).into_iter().map(|g| g.1).collect();
        assert_eq!(g, [vec![0, 2], vec![1], vec![3], vec![4], vec![5, 6]]);
    }

    #[test]
    fn large_gaps_get_a_ratio_with_significant_digits_not_zero() {
        assert_eq!(fmt_ratio(1.0), "1.00x");
        assert_eq!(fmt_ratio(0.5), "0.50x");
        assert_eq!(fmt_ratio(0.0012), "0.00120x");
        assert_eq!(fmt_ratio(0.05), "0.0500x");
        assert_eq!(fmt_ratio(1234.4), "1234x");
        assert_eq!(fmt_ratio(0.0), "0x");
        for r in [0.3e-3, 2e-6, 0.09] {
            assert_ne!(fmt_ratio(r).trim_start_matches(['0', '.']), "x", "{r}");
        }
    }
}
