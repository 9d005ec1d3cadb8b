//! `stoa bench merge [--hdr-log OUT] [--json OUT] FILE...`: one result from
//! several `stoa bench` processes that ran at the same time (several client
//! machines, or several processes each driving its own server node, as
//! WebBench's clients did).
//!
//! - HDR interval logs (`--hdr-log` of each run; any file not ending in
//!   `.json`): every interval's histogram is decoded and added, so the
//!   merged latency figures are exactly those of one histogram holding every
//!   response of every run (histograms of the same precision add without
//!   loss). `--hdr-log OUT` writes the merged interval log: each input's
//!   intervals placed at their absolute time (its `StartTime` plus the
//!   interval's start), those falling in the same second (counted from the
//!   earliest start) added.
//! - JSON results (`--json` of each run, `*.json`): the counts add up
//!   (requests, responses, successful, failed, bytes, status codes, errors),
//!   the run time is the longest, and the rate is the successful responses
//!   over it; each input's share of the requests is the per-node
//!   accounting.
//!
//! The text goes to stdout; `--json OUT` writes the same as JSON.

use crate::cli::CliError;
use crate::util::base64;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One HDR interval log, read.
#[derive(Debug)]
pub struct HdrLog {
    /// `StartTime` in seconds since the epoch (0 when the log has none).
    pub start: f64,
    /// `(start_s, length_s, histogram)` per interval, in file order.
    pub intervals: Vec<(f64, f64, Histogram<u64>)>,
}

/// Standard base64 decoding (padding optional); `None` on a bad character.
pub fn unbase64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Parses an interval log (HdrHistogram's format, as `--hdr-log` writes
/// it; a leading `Tag=...,` field is allowed and ignored).
pub fn parse_hdr_log(text: &str, name: &str) -> Result<HdrLog, String> {
    let mut log = HdrLog {
        start: 0.0,
        intervals: Vec::new(),
    };
    let mut base: Option<f64> = None;
    let mut de = Deserializer::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("#[StartTime: ") {
            log.start = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name}:{}: bad StartTime", i + 1))?;
            continue;
        }
        if let Some(rest) = line.strip_prefix("#[BaseTime: ") {
            base = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with('"') {
            continue;
        }
        let mut f: Vec<&str> = line.split(',').collect();
        if f.first().is_some_and(|x| x.starts_with("Tag=")) {
            f.remove(0);
        }
        let bad = || format!("{name}:{}: not an interval line", i + 1);
        if f.len() != 4 {
            return Err(bad());
        }
        let t: f64 = f[0].parse().map_err(|_| bad())?;
        let len: f64 = f[1].parse().map_err(|_| bad())?;
        let bytes = unbase64(f[3]).ok_or_else(bad)?;
        let h: Histogram<u64> = de
            .deserialize(&mut &bytes[..])
            .map_err(|e| format!("{name}:{}: histogram: {e:?}", i + 1))?;
        log.intervals.push((t + base.unwrap_or(0.0), len, h));
    }
    Ok(log)
}

/// Latency figures of a histogram in microseconds, as milliseconds.
fn figures(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return Value::Null;
    }
    let ms = |us: f64| us / 1000.0;
    let q = |p: f64| ms(h.value_at_quantile(p) as f64);
    json!({
        "count": h.len(),
        "min": ms(h.min() as f64),
        "mean": ms(h.mean()),
        "stddev": ms(h.stdev()),
        "p50": q(0.5), "p90": q(0.9), "p95": q(0.95), "p99": q(0.99), "p999": q(0.999),
        "max": ms(h.max() as f64),
    })
}

/// The merged histogram of several logs, and the merged interval log.
pub fn merge_hdr(logs: &[HdrLog]) -> (Histogram<u64>, Vec<(u64, Histogram<u64>)>) {
    let mut total = Histogram::<u64>::new(3).expect("3 significant digits is valid");
    let t0 = logs
        .iter()
        .filter(|l| !l.intervals.is_empty())
        .map(|l| l.start)
        .fold(f64::INFINITY, f64::min);
    let mut by_sec: BTreeMap<u64, Histogram<u64>> = BTreeMap::new();
    for l in logs {
        for (t, _, h) in &l.intervals {
            // Auto-resizing histograms: adding cannot fail.
            let _ = total.add(h);
            let sec = ((l.start - t0) + t + 1e-6).max(0.0).floor() as u64;
            let slot = by_sec
                .entry(sec)
                .or_insert_with(|| Histogram::<u64>::new(3).expect("valid"));
            let _ = slot.add(h);
        }
    }
    (total, by_sec.into_iter().collect())
}

fn write_hdr(path: &Path, start: f64, secs: &[(u64, Histogram<u64>)]) -> Result<(), String> {
    let mut s = String::new();
    s.push_str("#[Histogram log format version 1.3]\n");
    s.push_str(
        "#[Latency in microseconds; Interval_Max in milliseconds; merged by stoa bench merge]\n",
    );
    s.push_str("#[MaxValueDivisor: 1000.000]\n");
    s.push_str(&format!("#[StartTime: {start:.3} (seconds since epoch)]\n"));
    s.push_str("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n");
    let mut ser = V2DeflateSerializer::new();
    for (sec, h) in secs {
        let mut bytes = Vec::new();
        ser.serialize(h, &mut bytes)
            .map_err(|e| format!("serializing: {e:?}"))?;
        s.push_str(&format!(
            "{:.3},{:.3},{:.3},{}\n",
            *sec as f64,
            1.0,
            h.max() as f64 / 1000.0,
            base64(&bytes)
        ));
    }
    std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Adds the numbers of two objects of counts (`status`, `errors`, `bytes`).
fn add_counts(into: &mut Map<String, Value>, from: Option<&Value>) {
    if let Some(Value::Object(m)) = from {
        for (k, v) in m {
            let n = v.as_u64().unwrap_or(0) + into.get(k).and_then(Value::as_u64).unwrap_or(0);
            into.insert(k.clone(), json!(n));
        }
    }
}

/// The JSON results of runs that ran together, added up.
pub fn merge_results(inputs: &[(String, Value)]) -> Value {
    let keys = [
        "requests",
        "responses",
        "successful",
        "failed",
        "non_2xx",
        "in_flight_at_end",
        "not_sent",
        "connections",
        "keep_alive_requests",
    ];
    let mut sums = Map::new();
    let (mut status, mut errors, mut bytes) = (Map::new(), Map::new(), Map::new());
    let mut longest: f64 = 0.0;
    for (_, v) in inputs {
        for k in keys {
            let n = v.get(k).and_then(Value::as_u64).unwrap_or(0)
                + sums.get(k).and_then(Value::as_u64).unwrap_or(0);
            sums.insert(k.to_owned(), json!(n));
        }
        add_counts(&mut status, v.get("status"));
        add_counts(&mut errors, v.get("errors"));
        add_counts(&mut bytes, v.get("bytes"));
        longest = longest.max(num(v, "duration_s"));
    }
    let total_req = sums.get("requests").and_then(Value::as_u64).unwrap_or(0);
    let succ = sums.get("successful").and_then(Value::as_u64).unwrap_or(0) as f64;
    let received = bytes.get("received").and_then(Value::as_u64).unwrap_or(0) as f64;
    let per: Vec<Value> = inputs
        .iter()
        .map(|(name, v)| {
            let r = v.get("requests").and_then(Value::as_u64).unwrap_or(0);
            json!({
                "file": name,
                "url": v.get("url").cloned().unwrap_or(Value::Null),
                "requests": r,
                "successful": v.get("successful").cloned().unwrap_or(json!(0)),
                "failed": v.get("failed").cloned().unwrap_or(json!(0)),
                "share": if total_req > 0 { r as f64 / total_req as f64 } else { 0.0 },
                "requests_per_second": num(v, "requests_per_second"),
                "bytes_received": v.get("bytes").and_then(|b| b.get("received")).cloned().unwrap_or(json!(0)),
                "duration_s": num(v, "duration_s"),
            })
        })
        .collect();
    let mut out = sums;
    out.insert("duration_s".into(), json!(longest));
    let rate = |x: f64| if longest > 0.0 { x / longest } else { 0.0 };
    out.insert("requests_per_second".into(), json!(rate(succ)));
    out.insert("received_bytes_per_second".into(), json!(rate(received)));
    out.insert("status".into(), Value::Object(status));
    out.insert("errors".into(), Value::Object(errors));
    out.insert("bytes".into(), Value::Object(bytes));
    out.insert("inputs".into(), Value::Array(per));
    Value::Object(out)
}

const USAGE: &str = "usage: stoa bench merge [--hdr-log OUT] [--json OUT] FILE... \
                     (HDR interval logs and/or *.json results of runs that ran together)";

pub fn main(args: &[String], out: &mut dyn Write) -> Result<u8, CliError> {
    let (mut hdr_out, mut json_out, mut files) = (None::<PathBuf>, None::<PathBuf>, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--hdr-log" => hdr_out = Some(it.next().ok_or(CliError::Usage(USAGE.into()))?.into()),
            "--json" => json_out = Some(it.next().ok_or(CliError::Usage(USAGE.into()))?.into()),
            "-h" | "--help" => {
                let _ = writeln!(out, "{USAGE}");
                return Ok(0);
            }
            s if s.starts_with('-') => {
                return Err(CliError::Usage(format!("merge: unknown option {s}")))
            }
            _ => files.push(PathBuf::from(a)),
        }
    }
    if files.is_empty() {
        return Err(CliError::Usage(USAGE.into()));
    }
    let (mut logs, mut results, mut log_names) = (Vec::new(), Vec::new(), Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| CliError::Fatal(format!("{}: {e}", f.display())))?;
        let name = f.display().to_string();
        if f.extension().is_some_and(|e| e == "json") {
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| CliError::Fatal(format!("{name}: not JSON: {e}")))?;
            results.push((name, v));
        } else {
            logs.push(parse_hdr_log(&text, &name).map_err(CliError::Fatal)?);
            log_names.push(name);
        }
    }
    if hdr_out.is_some() && logs.is_empty() {
        return Err(CliError::Usage(
            "merge: --hdr-log needs HDR logs to merge".into(),
        ));
    }
    let mut report = Map::new();
    report.insert("tool".into(), json!("stoa bench merge"));
    if !logs.is_empty() {
        let (total, secs) = merge_hdr(&logs);
        let start = logs
            .iter()
            .filter(|l| !l.intervals.is_empty())
            .map(|l| l.start)
            .fold(f64::INFINITY, f64::min);
        let _ = writeln!(
            out,
            "Latency of {} HDR logs merged (every interval's histogram added):",
            logs.len()
        );
        let per: Vec<Value> = logs
            .iter()
            .zip(&log_names)
            .map(|(l, n)| {
                let mut h = Histogram::<u64>::new(3).expect("valid");
                for (_, _, x) in &l.intervals {
                    let _ = h.add(x);
                }
                json!({"file": n, "start_time": l.start, "intervals": l.intervals.len(), "latency_ms": figures(&h)})
            })
            .collect();
        let show =
            |label: &str, f: &Value| {
                if f.is_null() {
                    format!("  {label:<28} no responses")
                } else {
                    format!(
                    "  {label:<28} {:>9} responses  mean {:.3}  p50 {:.3}  p99 {:.3}  max {:.3} ms",
                    f["count"], num(f, "mean"), num(f, "p50"), num(f, "p99"), num(f, "max")
                )
                }
            };
        for p in &per {
            let _ = writeln!(
                out,
                "{}",
                show(p["file"].as_str().unwrap_or(""), &p["latency_ms"])
            );
        }
        let merged = figures(&total);
        let _ = writeln!(out, "{}", show("merged", &merged));
        report.insert(
            "hdr".into(),
            json!({"inputs": per, "latency_ms": merged, "start_time": if start.is_finite() { start } else { 0.0 }, "seconds": secs.len()}),
        );
        if let Some(p) = &hdr_out {
            write_hdr(p, if start.is_finite() { start } else { 0.0 }, &secs)
                .map_err(CliError::Fatal)?;
        }
    }
    if !results.is_empty() {
        let m = merge_results(&results);
        let _ = writeln!(
            out,
            "Results of {} runs added up: {} requests, {} successful, {} failed in {:.3} s: {:.2} requests/s, {:.0} bytes/s received",
            results.len(),
            m["requests"], m["successful"], m["failed"], num(&m, "duration_s"),
            num(&m, "requests_per_second"), num(&m, "received_bytes_per_second")
        );
        for p in m["inputs"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "  {:<28} {:>9} requests ({:5.1}%)  {:>10.2} requests/s",
                p["file"].as_str().unwrap_or(""),
                p["requests"],
                100.0 * num(p, "share"),
                num(p, "requests_per_second")
            );
        }
        report.insert("results".into(), m);
    }
    if let Some(p) = &json_out {
        let s =
            serde_json::to_string_pretty(&Value::Object(report)).expect("JSON values serialize");
        std::fs::write(p, s + "\n")
            .map_err(|e| CliError::Fatal(format!("{}: {e}", p.display())))?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_text(start: f64, intervals: &[(f64, &[u64])]) -> String {
        let mut s = format!(
            "#[Histogram log format version 1.3]\n#[StartTime: {start:.3} (seconds since epoch)]\n\
             \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"
        );
        let mut ser = V2DeflateSerializer::new();
        for (t, vals) in intervals {
            let mut h = crate::record::new_hist();
            for v in *vals {
                h.record(*v).unwrap();
            }
            let mut b = Vec::new();
            ser.serialize(&h, &mut b).unwrap();
            s.push_str(&format!(
                "{t:.3},1.000,{:.3},{}\n",
                h.max() as f64 / 1000.0,
                base64(&b)
            ));
        }
        s
    }

    #[test]
    fn base64_round_trips() {
        for n in 0..40u8 {
            let data: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect();
            assert_eq!(unbase64(&base64(&data)).unwrap(), data);
        }
        assert!(unbase64("ab$c").is_none());
    }

    #[test]
    fn merged_logs_equal_one_histogram_of_every_value_and_align_on_absolute_time() {
        let a: Vec<u64> = (1..=500).map(|i| i * 37 % 9000 + 100).collect();
        let b: Vec<u64> = (1..=300).map(|i| i * 911 % 250_000 + 50).collect();
        let ta = log_text(1000.0, &[(0.0, &a[..250]), (1.0, &a[250..])]);
        // B started 1.0 s after A: its first second is A's second.
        let tb = log_text(1001.0, &[(0.0, &b[..100]), (1.0, &b[100..])]);
        let la = parse_hdr_log(&ta, "a").unwrap();
        let lb = parse_hdr_log(&tb, "b").unwrap();
        let (total, secs) = merge_hdr(&[la, lb]);
        let mut all = crate::record::new_hist();
        for v in a.iter().chain(&b) {
            all.record(*v).unwrap();
        }
        assert_eq!(total.len(), 800);
        assert_eq!((total.min(), total.max()), (all.min(), all.max()));
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                total.value_at_quantile(q),
                all.value_at_quantile(q),
                "q={q}"
            );
        }
        let counts: Vec<(u64, u64)> = secs.iter().map(|(s, h)| (*s, h.len())).collect();
        assert_eq!(counts, vec![(0, 250), (1, 250 + 100), (2, 200)]);
        // The merged log reads back to the same histogram.
        let d = std::env::temp_dir().join(format!("stoa-merge-{}.hdr", std::process::id()));
        write_hdr(&d, 1000.0, &secs).unwrap();
        let back = parse_hdr_log(&std::fs::read_to_string(&d).unwrap(), "m").unwrap();
        let _ = std::fs::remove_file(&d);
        let (again, _) = merge_hdr(&[back]);
        assert_eq!(again.len(), 800);
        assert_eq!(again.value_at_quantile(0.99), all.value_at_quantile(0.99));
    }

    #[test]
    fn results_add_up_with_each_input_share() {
        let r1 = json!({"requests": 300, "responses": 300, "successful": 299, "failed": 1,
            "duration_s": 10.0, "requests_per_second": 29.9,
            "bytes": {"received": 3000, "body": 2000}, "status": {"200": 299, "404": 1},
            "errors": {"reset": 1}});
        let r2 = json!({"requests": 100, "responses": 100, "successful": 100, "failed": 0,
            "duration_s": 9.5, "requests_per_second": 10.5,
            "bytes": {"received": 1000, "body": 500}, "status": {"200": 100},
            "errors": {"reset": 0}});
        let m = merge_results(&[("a.json".into(), r1), ("b.json".into(), r2)]);
        assert_eq!(m["requests"], 400);
        assert_eq!(m["successful"], 399);
        assert_eq!(m["status"]["200"], 399);
        assert_eq!(m["bytes"]["received"], 4000);
        assert_eq!(m["errors"]["reset"], 1);
        assert_eq!(m["duration_s"], 10.0);
        assert!((num(&m, "requests_per_second") - 39.9).abs() < 1e-9);
        assert!((num(&m["inputs"][0], "share") - 0.75).abs() < 1e-9);
    }
}
