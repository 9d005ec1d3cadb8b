//! `stoa bench compare A.json B.json ... [--html FILE]`: the main figures
//! of several runs side by side, with each one's ratio to the first.

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
    let _ = out.write_all(table(&names, &runs).as_bytes());
    if let Some(j) = json_out {
        let v = json(&names, &files, &runs);
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
