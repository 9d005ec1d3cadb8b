//! What the reports say about a run: the per-URL figures checked against
//! the run's own per-request log, the headline percentiles, thresholds,
//! `compare`'s grouping of repeated runs, and the request phases.

mod common;
use common::{bench, bench_json, tmpdir, TestServer};
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

#[test]
fn the_headline_gives_p50_to_p99_9_in_the_text_and_the_json() {
    let s = TestServer::start();
    let (code, v, out) = bench_json("headline", &["-n", "200", "-c", "4", "-k", &s.url("/ok")]);
    assert_eq!(code, 0, "{out}");
    let l = &v["latency_ms"];
    let p = |k: &str| {
        l[k].as_f64()
            .unwrap_or_else(|| panic!("latency_ms.{k}: {v}"))
    };
    assert!(p("p50") <= p("p90") && p("p90") <= p("p95") && p("p95") <= p("p99"));
    assert!(p("p99") <= p("p999") && p("p999") <= p("max"));
    let line = out
        .lines()
        .find(|l| l.starts_with("Latency percentiles:"))
        .unwrap_or_else(|| panic!("no headline percentiles: {out}"));
    for k in ["p50 ", "p90 ", "p95 ", "p99 ", "p99.9 "] {
        assert!(line.contains(k), "{line}");
    }
    // wrk's layout has it too.
    let (_, out, _) = bench(&["-d", "0.3", "-c", "2", &s.url("/ok")]);
    assert!(out.contains("Latency Percentiles  p50 "), "{out}");
}

#[test]
fn a_failed_threshold_is_reported_and_makes_the_exit_status_3() {
    // k6: a threshold that fails marks the test failed (k6 exits 99).
    let s = TestServer::start();
    let url = s.url("/ok");
    let (code, v, out) = bench_json(
        "thr-pass",
        &[
            "-n",
            "100",
            "-k",
            "--threshold",
            "p99<10s",
            "--threshold",
            "errors<0.1%",
            "--threshold",
            "rps>1",
            &url,
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Thresholds"), "{out}");
    assert!(out.contains("3 of 3 passed"), "{out}");
    let t = v["thresholds"].as_array().expect("thresholds");
    assert_eq!(t.len(), 3, "{v}");
    assert!(t.iter().all(|t| t["pass"] == true), "{v}");
    assert_eq!(t[1]["unit"], "%");
    assert_eq!(t[1]["value"].as_f64(), Some(0.0));

    let (code, v, out) = bench_json(
        "thr-fail",
        &[
            "-n",
            "50",
            "-k",
            "--threshold",
            "p50<1us",
            "--threshold",
            "errors<=0",
            &url,
        ],
    );
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("FAIL"), "{out}");
    assert!(out.contains("1 of 2 passed"), "{out}");
    let t = &v["thresholds"][0];
    assert_eq!(t["pass"], false, "{v}");
    assert!(t["value"].as_f64() > Some(0.001), "{v}");
}

#[test]
fn per_url_thresholds_check_one_entry_of_the_mix_and_an_unknown_url_is_a_usage_error() {
    let s = TestServer::start();
    let d = tmpdir("thr-url");
    let sc = d.join("mix.toml");
    std::fs::write(
        &sc,
        format!(
            "[run]\nurl = \"{}\"\nrequests = 60\nconnections = 2\nkeep_alive = true\n\
             [[mix]]\npath = \"/ok?n=10\"\n[[mix]]\npath = \"/slow?ms=5\"\n",
            s.url("/")
        ),
    )
    .expect("write scenario");
    let sc = sc.to_str().expect("utf-8 path");
    let (code, v, out) = bench_json(
        "thr-url-run",
        &[
            "--scenario",
            sc,
            "-l",
            "--threshold",
            "p50{/slow?ms=5}>=5ms",
            "--threshold",
            "p50{GET /slow?ms=5}<5ms",
            "--threshold",
            "errors{/ok?n=10}<1%",
        ],
    );
    assert_eq!(code, 3, "{out}");
    let t = v["thresholds"].as_array().expect("thresholds");
    assert_eq!(t[0]["url"], "GET /slow?ms=5", "{v}");
    assert_eq!(
        [&t[0]["pass"], &t[1]["pass"], &t[2]["pass"]],
        [true, false, true],
        "{v}"
    );
    let (code, _, err) = bench(&["--scenario", sc, "--threshold", "p99{/nope}<1s"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no URL \"/nope\""), "{err}");
    let (code, _, err) = bench(&["--threshold", "p98<1s", &s.url("/ok")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("p50, p90, p95, p99 and p99.9"), "{err}");
}

#[test]
fn compare_groups_repeated_runs_per_target_with_median_and_spread_in_a_narrow_table() {
    // Three rounds against each of two targets, interleaved as a lab
    // script runs them: two columns, not six.
    let s = TestServer::start();
    let d = tmpdir("cmp-groups");
    let mut files = Vec::new();
    for round in 1..=3 {
        for (name, path) in [("fast", "/ok"), ("slow", "/slow?ms=3")] {
            let j = d.join(format!("{name}-{round}.json"));
            let (code, out, err) = bench(&[
                "-n",
                "30",
                "-c",
                "2",
                "-k",
                "--name",
                name,
                "--json",
                &j.to_string_lossy(),
                &s.url(path),
            ]);
            assert_eq!(code, 0, "{out}{err}");
            files.push(j.to_string_lossy().into_owned());
        }
    }
    let (json, html) = (d.join("cmp.json"), d.join("cmp.html"));
    let mut args = vec!["compare".to_string()];
    args.extend(files.iter().cloned());
    args.extend(["--json".into(), json.to_string_lossy().into_owned()]);
    args.extend(["--html".into(), html.to_string_lossy().into_owned()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = bench(&a);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let head = lines[1];
    assert!(
        head.contains("fast [3]") && head.contains("slow [3]"),
        "{out}"
    );
    // Readable without scrolling: no line past 120 columns.
    assert!(
        lines.iter().all(|l| l.chars().count() <= 120),
        "a line is too wide:\n{out}"
    );
    // Median (min–max) of three rounds.
    let p50 = lines
        .iter()
        .find(|l| l.starts_with("latency p50 ms"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(p50.contains('–'), "{out}");
    // Every run still has its line, under its group.
    for f in ["fast-1", "slow-3"] {
        assert!(
            lines.iter().any(|l| l.starts_with(f)),
            "{f} missing:\n{out}"
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("parse");
    let g = v["groups"].as_array().expect("groups");
    assert_eq!(g.len(), 2, "{v}");
    assert_eq!(g[0]["name"], "fast");
    assert_eq!(g[1]["runs"].as_array().map(Vec::len), Some(3));
    // The median is the middle run's value, between min and max.
    let vals: Vec<f64> = (0..3)
        .map(|k| {
            v["runs"][2 * k + 1]["values"]["latency_p50_ms"]
                .as_f64()
                .expect("p50")
        })
        .collect();
    let mut sorted = vals.clone();
    sorted.sort_by(f64::total_cmp);
    let m = &g[1]["values"]["latency_p50_ms"];
    assert_eq!(m["median"].as_f64(), Some(sorted[1]), "{v}");
    assert_eq!(m["min"].as_f64(), Some(sorted[0]), "{v}");
    assert_eq!(m["max"].as_f64(), Some(sorted[2]), "{v}");
    assert!(m["ratio_to_first"].as_f64() > Some(1.0), "{v}");
    // The HTML report opens with the same groups.
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("Groups of repeated runs"), "no groups table");
    assert!(
        page.contains("<tr><th>slow</th><td>slow-1, slow-2, slow-3</td>"),
        "slow group row missing"
    );
    // --each: every run in its own column, as before.
    let mut each = a.clone();
    each.push("--each");
    let (code, out, _) = bench(&each);
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .next()
            .is_some_and(|l| l.contains("fast-1") && l.contains("slow-3")),
        "{out}"
    );
}

#[test]
fn the_request_phases_of_the_json_are_rendered_in_the_text_and_html_reports() {
    // Without keep-alive every request connects: connect, first byte and
    // transfer for each (curl's -w timings); no TLS row over plain TCP.
    let s = TestServer::start();
    let d = tmpdir("phases");
    let html = d.join("r.html");
    let (code, v, out) = bench_json(
        "phases-run",
        &[
            "-n",
            "40",
            "-c",
            "2",
            "--html",
            &html.to_string_lossy(),
            &s.url("/slow?ms=2"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let p = &v["phases_ms"];
    assert_eq!(p["connect"]["n"].as_u64(), Some(40), "{v}");
    assert!(p["tls"].is_null(), "{v}");
    let text: Vec<&str> = out.lines().collect();
    let at = text
        .iter()
        .position(|l| *l == "Request phases (ms)")
        .unwrap_or_else(|| panic!("no phases: {out}"));
    let row = |name: &str| {
        text[at..at + 6]
            .iter()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row: {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // The first byte waits for the 2 ms sleep; its p50 is the JSON's.
    let fb = row("first byte");
    assert_eq!(fb[2], "40", "{out}");
    let p50: f64 = fb[4].parse().expect("p50");
    assert!(p50 >= 2.0, "{out}");
    assert!((p50 - p["first_byte"]["p50"].as_f64().expect("p50")).abs() < 0.0005);
    assert_eq!(row("connect")[1], "40", "{out}");
    assert!(
        !text[at..at + 6].iter().any(|l| l.starts_with("tls")),
        "{out}"
    );
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("<h2>Request phases</h2>"), "no phases table");
    assert!(
        page.contains("<tr><th>first byte</th><td>40</td>"),
        "{page}"
    );
}

#[test]
fn a_scenarios_thresholds_are_checked_with_the_command_lines_and_a_bad_one_names_its_line() {
    let s = TestServer::start();
    let d = tmpdir("thr-sc");
    let sc = d.join("s.toml");
    std::fs::write(
        &sc,
        format!(
            "[run]\nurl = \"{}\"\nrequests = 20\nthresholds = [\"errors<1%\", \"p99<10s\"]\n",
            s.url("/ok")
        ),
    )
    .expect("write");
    let sc_s = sc.to_str().expect("utf-8");
    let (code, v, out) = bench_json(
        "thr-sc-run",
        &["--scenario", sc_s, "--threshold", "max<1us"],
    );
    assert_eq!(code, 3, "{out}");
    let t: Vec<&str> = v["thresholds"]
        .as_array()
        .expect("thresholds")
        .iter()
        .map(|t| t["threshold"].as_str().expect("threshold"))
        .collect();
    assert_eq!(t, ["errors<1%", "p99<10s", "max<1us"], "{v}");
    std::fs::write(
        &sc,
        format!(
            "[run]\nurl = \"{}\"\n\nthresholds = [\"p98<1s\"]\n",
            s.url("/ok")
        ),
    )
    .expect("write");
    let (code, _, err) = bench(&["--scenario", sc_s]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("s.toml:4: thresholds: \"p98<1s\": percentiles are"),
        "{err}"
    );
}

#[test]
fn compare_puts_many_runs_that_do_not_repeat_in_rows_so_the_table_stays_narrow() {
    // A sweep over -c: six runs, no two alike.
    let s = TestServer::start();
    let d = tmpdir("cmp-sweep");
    let mut args = vec!["compare".to_string()];
    for c in ["1", "2", "3", "4", "5", "6"] {
        let j = d.join(format!("sweep-c{c}.json"));
        let (code, out, err) = bench(&[
            "-n",
            "24",
            "-c",
            c,
            "-k",
            "--json",
            &j.to_string_lossy(),
            &s.url("/ok"),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        args.push(j.to_string_lossy().into_owned());
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = bench(&a);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().all(|l| l.chars().count() <= 120), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("run ") && lines[0].contains("p99.9 ms"),
        "{out}"
    );
    let c6: Vec<&str> = lines[6].split_whitespace().collect();
    assert_eq!(&c6[..2], ["sweep-c6", "6"], "{out}");
    assert_eq!(lines[1].split_whitespace().nth(3), Some("1.00x"), "{out}");
}

#[test]
fn the_throughput_against_clients_chart_draws_one_line_per_server_with_whole_client_ticks() {
    // WebBench's figure: each server's runs at 1, 2 and 3 clients, two
    // servers interleaved; a line for each, not one line through all six.
    let s = TestServer::start();
    let d = tmpdir("cmp-lines");
    let mut args = vec!["compare".to_string()];
    for c in ["1", "2", "3"] {
        for (name, path) in [("fast", "/ok"), ("slow", "/slow?ms=2")] {
            let j = d.join(format!("{name}-c{c}.json"));
            let (code, out, err) = bench(&[
                "-n",
                "12",
                "-c",
                c,
                "-k",
                "--name",
                name,
                "--json",
                &j.to_string_lossy(),
                &s.url(path),
            ]);
            assert_eq!(code, 0, "{out}{err}");
            args.push(j.to_string_lossy().into_owned());
        }
    }
    let html = d.join("c.html");
    args.extend(["--html".into(), html.to_string_lossy().into_owned()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = bench(&a);
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&html).expect("html");
    let start = page
        .find("Throughput against active clients")
        .expect("clients chart");
    let svg = &page[start..start + page[start..].find("</svg>").expect("svg end")];
    // Two legend entries, one polyline of three points each.
    assert!(
        svg.contains(">fast</text>") && svg.contains(">slow</text>"),
        "{svg}"
    );
    let lines: Vec<&str> = svg.split("<polyline").skip(1).collect();
    assert_eq!(lines.len(), 2, "{svg}");
    for l in &lines {
        let pts = l
            .split("points=\"")
            .nth(1)
            .and_then(|p| p.split('"').next());
        assert_eq!(pts.map(|p| p.split_whitespace().count()), Some(3), "{l}");
    }
    // Client ticks are whole numbers.
    for t in svg
        .split("text-anchor=\"middle\" font-size=\"11\">")
        .skip(1)
    {
        let label = &t[..t.find('<').unwrap_or(0)];
        if let Ok(x) = label.parse::<f64>() {
            assert_eq!(x.fract(), 0.0, "tick {label}");
        }
    }
}
