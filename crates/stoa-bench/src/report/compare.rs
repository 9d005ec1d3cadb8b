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

/// A row of the table: label, value, whether more is better.
type Row = (&'static str, Box<dyn Fn(&Summary) -> Option<f64>>, bool);

/// The comparison table.
pub fn table(names: &[String], runs: &[Summary]) -> String {
    let rows: Vec<Row> = vec![
        (
            "requests/s",
            Box::new(|s: &Summary| Some(s.success_rate())),
            true,
        ),
        (
            "failures/s",
            Box::new(|s: &Summary| Some(s.failure_rate())),
            false,
        ),
        (
            "requests",
            Box::new(|s: &Summary| Some(s.requests as f64)),
            true,
        ),
        (
            "failed",
            Box::new(|s: &Summary| Some(s.failed as f64)),
            false,
        ),
        (
            "non-2xx",
            Box::new(|s: &Summary| Some(s.non_2xx as f64)),
            false,
        ),
        (
            "in flight at end",
            Box::new(|s: &Summary| Some(s.in_flight_at_end as f64)),
            false,
        ),
        (
            "latency mean ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.mean)),
            false,
        ),
        (
            "latency stddev ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.stddev)),
            false,
        ),
        (
            "latency p50 ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p50)),
            false,
        ),
        (
            "latency p90 ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p90)),
            false,
        ),
        (
            "latency p99 ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p99)),
            false,
        ),
        (
            "latency p99.9 ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.p999)),
            false,
        ),
        (
            "latency max ms",
            Box::new(|s: &Summary| s.latency_ms.map(|l| l.max)),
            false,
        ),
        (
            "received MB/s",
            Box::new(|s: &Summary| {
                Some(s.bytes.received as f64 / 1048576.0 / s.duration_s.max(1e-9))
            }),
            true,
        ),
    ];
    let w = names.iter().map(|n| n.len()).max().unwrap_or(0).max(12);
    let mut o = format!("{:<18}", "");
    for (i, n) in names.iter().enumerate() {
        o.push_str(&format!(" {n:>w$}"));
        if i > 0 {
            o.push_str(&format!(" {:>8}", "ratio"));
        }
    }
    o.push('\n');
    for (label, f, _) in &rows {
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

pub fn main(args: &[String], out: &mut dyn Write) -> Result<u8, CliError> {
    let mut files = Vec::new();
    let mut html = None;
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
    let runs = files
        .iter()
        .map(|f| load(Path::new(f)))
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            Path::new(f)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| f.clone())
        })
        .collect();
    let _ = out.write_all(table(&names, &runs).as_bytes());
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
