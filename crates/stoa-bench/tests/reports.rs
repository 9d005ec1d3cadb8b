//! What the reports say about a run: the per-URL figures checked against
//! the run's own per-request log, the headline percentiles, thresholds,
//! `compare`'s grouping of repeated runs, and the request phases.

mod common;
use common::{bench_json, tmpdir, TestServer};
use std::collections::BTreeMap;

/// The latencies of the per-request log by request target, from the
/// columns its header names (so that added columns do not matter).
fn log_latencies(path: &std::path::Path) -> BTreeMap<String, Vec<u64>> {
    let text = std::fs::read_to_string(path).expect("read the request log");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("log header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no {name} column in {header:?}"))
    };
    let (lat, status, url) = (col("latency_ms"), col("status"), col("url"));
    let mut by_url: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        // Complete responses only: the per-URL percentiles are theirs.
        if f[status].parse::<u16>().is_err() {
            continue;
        }
        // "M.UUU" milliseconds: the microseconds the histogram recorded.
        let (whole, frac) = f[lat].split_once('.').expect("latency M.UUU");
        let us = whole.parse::<u64>().expect("ms") * 1000 + frac.parse::<u64>().expect("us");
        by_url.entry(f[url].to_string()).or_default().push(us);
    }
    by_url
}

/// The value of rank ceil(q * n) of the sorted values (HdrHistogram's
/// definition of a percentile, before its bucket rounding).
fn exact(sorted: &[u64], q: f64) -> u64 {
    let rank = (q / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[test]
fn per_url_percentiles_of_a_mixed_open_loop_run_match_its_own_request_log() {
    // The shape of the reported bug: an open-loop mix of eight URLs, most
    // of them slower than a millisecond, where the JSON gave p50 = p90 =
    // p99 (each URL's minimum) for the slow ones.
    let s = TestServer::start();
    let d = tmpdir("perurl");
    let sc = d.join("mix.toml");
    let mut toml = format!(
        "[run]\nurl = \"{}\"\nrate = 400\nconnections = 16\nrequests = 1200\nthreads = 2\nkeep_alive = true\n",
        s.url("/")
    );
    let paths = [
        "/ok?n=10",
        "/ok?n=2000",
        "/slow?ms=1",
        "/slow?ms=2",
        "/slow?ms=3",
        "/slow?ms=4",
        "/slow?ms=6",
        "/chunked?n=5000",
    ];
    for p in paths {
        toml.push_str(&format!("[[mix]]\npath = \"{p}\"\n"));
    }
    std::fs::write(&sc, toml).expect("write scenario");
    let log = d.join("requests.csv");
    let (code, v, out) = bench_json(
        "perurl-run",
        &[
            "--scenario",
            sc.to_str().expect("utf-8 path"),
            "-l",
            "--log",
            log.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let by_url = log_latencies(&log);
    let urls = v["urls"].as_array().expect("urls");
    assert_eq!(urls.len(), paths.len(), "{out}");
    for p in paths {
        let name = format!("GET {p}");
        let u = urls
            .iter()
            .find(|u| u["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} not in {urls:?}"));
        let mut lat = by_url.get(p).cloned().unwrap_or_default();
        lat.sort_unstable();
        assert_eq!(u["responses"].as_u64(), Some(lat.len() as u64), "{name}");
        assert!(lat.len() >= 50, "{name}: {} responses", lat.len());
        for (key, q) in [
            ("p50_ms", 50.0),
            ("p90_ms", 90.0),
            ("p95_ms", 95.0),
            ("p99_ms", 99.0),
            ("p999_ms", 99.9),
        ] {
            let want = exact(&lat, q);
            let got = (u[key].as_f64().expect(key) * 1000.0).round() as u64;
            // The per-URL histogram keeps 2 significant digits: a
            // percentile is the top of its value's bucket, under 1 % above.
            assert!(
                got >= want && got <= want + want / 100 + 1,
                "{name} {key}: JSON {got} us, log {want} us"
            );
        }
        let max = (u["max_ms"].as_f64().expect("max") * 1000.0).round() as u64;
        assert_eq!(max, *lat.last().expect("a response"), "{name} max");
        let mean = lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1000.0;
        let got = u["mean_ms"].as_f64().expect("mean");
        assert!((got - mean).abs() < 1e-6, "{name} mean {got} vs {mean}");
    }
    // The slow URLs spread: their median is not their tail.
    let slow = urls
        .iter()
        .find(|u| u["name"] == "GET /slow?ms=6")
        .expect("slow url");
    assert!(slow["p50_ms"].as_f64() >= Some(6.0), "{slow}");
}
