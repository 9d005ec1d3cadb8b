//! Machine-readable outputs: the JSON summary, the HDR interval log,
//! `compare`, and the wrk-style report.

mod common;
use common::{bench, bench_json, tmpdir, TestServer};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

fn unbase64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64 byte {c}"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for ch in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in ch.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if ch.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if ch.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

#[test]
fn the_json_summary_has_every_documented_field() {
    let s = TestServer::start();
    let (code, v, out) = bench_json("json", &["-d", "1.2", "-c", "3", "-k", &s.url("/ok")]);
    assert_eq!(code, 0, "{out}");
    for k in [
        "requests",
        "duration_s",
        "requests_per_second",
        "bytes",
        "status",
        "errors",
        "latency_ms",
        "timeline",
        "in_flight_at_end",
        "connection_times_ms",
        "percentiles_ms",
    ] {
        assert!(!v[k].is_null(), "{k} missing: {v}");
    }
    assert_eq!(v["interrupted"], serde_json::Value::Bool(false), "{v}");
    for k in ["min", "mean", "stddev", "p50", "p90", "p99", "p999", "max"] {
        assert!(v["latency_ms"][k].is_number(), "latency_ms.{k}");
    }
    let l = &v["latency_ms"];
    let g = |k: &str| l[k].as_f64().unwrap();
    assert!(g("min") <= g("p50") && g("p50") <= g("p90") && g("p90") <= g("p99"));
    assert!(
        g("p99") <= g("p999")
            && g("p999") <= g("max")
            && g("min") <= g("mean")
            && g("mean") <= g("max")
    );
    let tl = v["timeline"].as_array().unwrap();
    assert_eq!(tl.len(), 2, "one full second and a partial one: {v}");
    let sum: u64 = tl.iter().map(|s| s["responses"].as_u64().unwrap()).sum();
    assert_eq!(sum, v["responses"].as_u64().unwrap());
    assert!(out.contains("Requests/sec:"), "wrk-style with -d: {out}");
}

#[test]
fn the_hdr_log_holds_every_response_once() {
    let s = TestServer::start();
    let d = tmpdir("hdr");
    let log = d.join("run.hlog");
    let (code, v, out) = bench_json(
        "hdr-json",
        &[
            "-d",
            "1.5",
            "-c",
            "2",
            "-k",
            "--threads",
            "2",
            "--hdr-log",
            &log.to_string_lossy(),
            &s.url("/ok"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("#[StartTime: "), "{text}");
    let mut total: Option<Histogram<u64>> = None;
    let mut lines = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
    {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 4, "{line}");
        let bytes = unbase64(f[3]);
        let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        match total.as_mut() {
            Some(t) => t.add(&h).unwrap(),
            None => total = Some(h),
        }
        lines += 1;
    }
    assert_eq!(lines, 2, "{text}");
    assert_eq!(total.unwrap().len(), v["responses"].as_u64().unwrap());
}

#[test]
fn compare_prints_each_run_with_its_ratio_to_the_first() {
    let s = TestServer::start();
    let d = tmpdir("compare");
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    let (code, _, _) = bench(&[
        "-n",
        "50",
        "-c",
        "2",
        "-k",
        "--json",
        &a.to_string_lossy(),
        &s.url("/ok"),
    ]);
    assert_eq!(code, 0);
    let (code, _, _) = bench(&[
        "-n",
        "50",
        "-c",
        "2",
        "--json",
        &b.to_string_lossy(),
        &s.url("/ok"),
    ]);
    assert_eq!(code, 0);
    let html = d.join("cmp.html");
    let (code, out, err) = bench(&[
        "compare",
        &a.to_string_lossy(),
        &b.to_string_lossy(),
        "--html",
        &html.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("requests/s") && out.contains("ratio") && out.contains("x"),
        "{out}"
    );
    let requests_line = out.lines().find(|l| l.starts_with("requests ")).unwrap();
    assert!(requests_line.contains("1.00x"), "{out}");
    assert!(std::fs::read_to_string(&html).unwrap().contains("run 2"));
    let (code, _, err) = bench(&["compare", &a.to_string_lossy()]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn the_wrk_style_report_prints_the_latency_distribution() {
    let s = TestServer::start();
    let (code, out, err) = bench(&["-d", "0.3", "-c", "2", "-k", "--latency", &s.url("/ok")]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "Running 300ms test @",
        "Thread Stats",
        "Latency Distribution",
        "     99%",
        "requests in",
        "Requests/sec:",
        "Transfer/sec:",
    ] {
        assert!(out.contains(want), "{want:?} missing: {out}");
    }
}

#[test]
fn a_server_that_resets_every_connection_has_no_successful_rate_and_ranks_below_a_working_one() {
    let s = TestServer::start();
    let d = tmpdir("rank");
    let (ok, bad) = (d.join("ok.json"), d.join("reset.json"));
    let (code, _, err) = bench(&[
        "-n",
        "40",
        "-c",
        "2",
        "-k",
        "--json",
        &ok.to_string_lossy(),
        &s.url("/slow?ms=5"),
    ]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = bench(&[
        "-n",
        "40",
        "-c",
        "2",
        "--json",
        &bad.to_string_lossy(),
        &s.url("/reset"),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&bad).unwrap()).unwrap();
    assert_eq!(v["requests_per_second"].as_f64(), Some(0.0), "{v}");
    assert!(
        v["failures_per_second"].as_f64().unwrap_or(0.0) > 0.0,
        "{v}"
    );
    assert!(out.contains("Requests per second:    0.00"), "{out}");
    assert!(out.contains("Failures per second:"), "{out}");
    let (code, out, err) = bench(&["compare", &ok.to_string_lossy(), &bad.to_string_lossy()]);
    assert_eq!(code, 0, "{err}");
    let row: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("requests/s "))
        .unwrap_or_else(|| panic!("{out}"))
        .split_whitespace()
        .collect();
    let (good, reset): (f64, f64) = (row[1].parse().unwrap(), row[2].parse().unwrap());
    assert!(good > 0.0 && reset == 0.0, "{out}");
    assert!(out.lines().any(|l| l.starts_with("failures/s ")), "{out}");
    // B against A: B is 0 successful responses per second, ratio 0x; and
    // a large finite gap is not printed as 0.00x.
    assert_eq!(row.get(3), Some(&"0x"), "{out}");
    assert!(!out.contains(" 0.00x"), "{out}");
}

#[test]
fn a_run_without_a_response_shows_no_latency_figures_rather_than_zeros() {
    // Bind, note the port, close: every connect is refused, no response.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let d = tmpdir("empty");
    let j = d.join("empty.json");
    let (_, out, _) = bench(&[
        "-d",
        "0.3",
        "-c",
        "1",
        "--latency",
        "--json",
        &j.to_string_lossy(),
        &url,
    ]);
    assert!(!out.contains("0.00us"), "{out}");
    let lat = out.lines().find(|l| l.contains("Latency   ")).unwrap();
    assert!(lat.split_whitespace().skip(1).all(|w| w == "-"), "{out}");
    let p99 = out.lines().find(|l| l.contains("     99%")).unwrap();
    assert_eq!(p99.split_whitespace().nth(1), Some("-"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    for k in [
        "latency_ms",
        "time_per_request_ms",
        "connection_times_ms",
        "latency_within_stddev_pct",
    ] {
        assert!(v[k].is_null(), "{k} should be null: {v}");
    }
    // compare reads it back and shows no figure either.
    let (code, out, err) = bench(&["compare", &j.to_string_lossy(), &j.to_string_lossy()]);
    assert_eq!(code, 0, "{err}");
    let p50 = out.lines().find(|l| l.starts_with("latency p50")).unwrap();
    assert!(p50.split_whitespace().skip(3).all(|w| w == "-"), "{out}");
}

#[test]
fn merge_adds_two_runs_logs_and_counts_exactly() {
    // Two client processes (here: two runs at once on threads) against one
    // server, each with its HDR log and JSON; `merge` gives one count that
    // is the sum, and latency figures from every interval's histogram.
    let s = TestServer::start();
    let d = tmpdir("merge");
    let run = |tag: &str, c: &str| {
        let (j, h) = (d.join(format!("{tag}.json")), d.join(format!("{tag}.hdr")));
        let url = s.url("/ok");
        let (js, hs) = (
            j.to_string_lossy().into_owned(),
            h.to_string_lossy().into_owned(),
        );
        let c = c.to_owned();
        std::thread::spawn(move || {
            let (code, _, out) = bench(&[
                "-d",
                "1.2",
                "-c",
                &c,
                "-k",
                "--json",
                &js,
                "--hdr-log",
                &hs,
                &url,
            ]);
            assert_eq!(code, 0, "{out}");
        })
    };
    let (a, b) = (run("a", "2"), run("b", "3"));
    a.join().unwrap();
    b.join().unwrap();
    let p = |n: &str| d.join(n).to_string_lossy().into_owned();
    let (code, out, err) = bench(&[
        "merge",
        "--json",
        &p("m.json"),
        "--hdr-log",
        &p("m.hdr"),
        &p("a.hdr"),
        &p("b.hdr"),
        &p("a.json"),
        &p("b.json"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("m.json")).unwrap()).unwrap();
    let va: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("a.json")).unwrap()).unwrap();
    let vb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("b.json")).unwrap()).unwrap();
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap();
    let responses = n(&va, "responses") + n(&vb, "responses");
    assert!(responses > 0);
    assert_eq!(m["results"]["responses"].as_u64(), Some(responses), "{m}");
    assert_eq!(
        m["hdr"]["latency_ms"]["count"].as_u64(),
        Some(responses),
        "{m}"
    );
    let share = m["results"]["inputs"][0]["share"].as_f64().unwrap();
    assert!(
        (share - n(&va, "requests") as f64 / (n(&va, "requests") + n(&vb, "requests")) as f64)
            .abs()
            < 1e-9
    );
    // The merged log reads back (as any --hdr-log) to the same count.
    let text = std::fs::read_to_string(d.join("m.hdr")).unwrap();
    let mut total = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
    {
        let f: Vec<&str> = line.split(',').collect();
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &unbase64(f[3])[..])
            .unwrap();
        total += h.len();
    }
    assert_eq!(total, responses);
    assert!(out.contains("merged"), "{out}");
}
