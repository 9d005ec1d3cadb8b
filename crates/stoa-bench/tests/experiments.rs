//! The instruments the seeds' experiments need: the per-level table
//! (BENCH2, WebBench), per-client request templates (the FastCGI
//! personalized test), a delay before each client's first request, the
//! per-request log (latency bands and scatter), and the running mean and
//! deviation per response (BENCH4), against a server of known delays.

mod common;
use common::{bench_json, tmpdir, TestServer};

fn write(name: &str, body: &str) -> String {
    let d = tmpdir(name);
    let p = d.join(format!("{name}.toml"));
    std::fs::write(&p, body).expect("write scenario");
    p.to_string_lossy().into_owned()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn the_per_level_table_gives_each_number_of_clients_its_own_time_rate_and_latency() {
    // BENCH2's shape, shortened: one client, a second at 0.4 s, a third at
    // 0.8 s, to 1.2 s; every request takes 20 ms, back to back.
    let s = TestServer::start();
    let sc = write(
        "levels",
        &format!(
            "[run]\nurl = \"{}\"\nkeep_alive = true\nduration = \"1.2s\"\n\
             [clients]\nstart = 1\nadd = 1\nevery = \"400ms\"\nmax = 3\n",
            s.url("/slow?ms=20")
        ),
    );
    let (code, v, out) = bench_json("levels-run", &["--scenario", &sc]);
    assert_eq!(code, 0, "{out}");
    let levels = v["levels"].as_array().expect("levels");
    let actives: Vec<u64> = levels
        .iter()
        .map(|l| l["active"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(actives, vec![1, 2, 3], "{out}");
    for l in levels {
        let k = f(&l["active"]);
        let t = f(&l["time_s"]);
        assert!((0.38..0.45).contains(&t), "level {k}: {t} s: {out}");
        // k clients each getting a response every ~20 ms.
        let rps = f(&l["rps"]);
        assert!(
            (k * 35.0..k * 51.0).contains(&rps),
            "level {k}: {rps}/s: {out}"
        );
        let mean = f(&l["mean_ms"]);
        assert!(
            (20.0..26.0).contains(&mean),
            "level {k}: mean {mean}: {out}"
        );
        assert!(f(&l["p99_ms"]) >= f(&l["p50_ms"]), "{out}");
        assert_eq!(l["errors"].as_u64(), Some(0), "{out}");
    }
    // Every request ended at exactly one level.
    let sum: u64 = levels
        .iter()
        .map(|l| l["requests"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(sum, v["requests"].as_u64().unwrap_or(0), "{out}");
    assert!(out.contains("Per concurrency level"), "{out}");
}

#[test]
fn failures_are_counted_at_the_level_their_request_started() {
    let s = TestServer::start();
    let sc = write(
        "levels-fail",
        &format!(
            "[run]\nurl = \"{}\"\n[clients]\nstart = 2\nrequests = 3\n",
            s.url("/reset")
        ),
    );
    let (code, v, out) = bench_json("levels-fail-run", &["--scenario", &sc]);
    assert_eq!(code, 1, "{out}");
    let levels = v["levels"].as_array().expect("levels");
    let errors: u64 = levels
        .iter()
        .map(|l| l["errors"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(errors, 6, "{out}");
    assert!(levels.iter().all(|l| l["mean_ms"].is_null()), "{out}");
    // A fixed -c run has one level (the table is not kept: it would cost
    // a record per response for nothing).
    let (_, v, out) = bench_json("levels-fixed", &["-n", "6", "-c", "2", &s.url("/ok")]);
    assert_eq!(v["levels"].as_array().map(Vec::len), Some(0), "{out}");
}

#[test]
fn placeholders_give_each_client_its_own_numbered_requests_in_the_url_headers_and_body() {
    let s = TestServer::start();
    let sc = write(
        "templates",
        &format!(
            "[run]\nurl = \"{}\"\nkeep_alive = true\nthreads = 2\n\
             [clients]\nstart = 3\nrequests = 4\n\
             [[mix]]\npath = \"/ok?n=5&c={{client}}&s={{seq}}\"\n\
             headers = [\"X-User: u{{client}}\"]\n\
             form = {{ user = \"user {{client}}\", n = \"{{seq}}\" }}\n",
            s.url("/")
        ),
    );
    let (code, v, out) = bench_json("templates-run", &["--scenario", &sc]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v["responses"].as_u64(), Some(12), "{out}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{out}");
    let full = s.full.lock().expect("lock").clone();
    let mut seen = Vec::new();
    for (path, headers, body) in &full {
        let q = path.split_once('?').map_or("", |x| x.1);
        let get = |k: &str| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .unwrap_or("?")
                .to_string()
        };
        let (c, n) = (get("c"), get("s"));
        assert!(
            headers.contains(&format!("X-User: u{c}")),
            "{path}: {headers:?}"
        );
        // Form fields in sorted order, the placeholder's digits in place,
        // and a Content-Length that fits (the server read exactly it).
        assert_eq!(
            String::from_utf8_lossy(body),
            format!("n={n}&user=user+{c}"),
            "{path}"
        );
        let cl = format!("Content-Length: {}", body.len());
        assert!(headers.contains(&cl), "{headers:?}");
        seen.push((c, n));
    }
    seen.sort();
    let want: Vec<(String, String)> = (1..=3)
        .flat_map(|c| (1..=4).map(move |n| (c.to_string(), n.to_string())))
        .collect();
    assert_eq!(seen, want, "every client numbers its own requests");
}

#[test]
fn open_loop_placeholders_number_the_arrivals_of_the_run() {
    let s = TestServer::start();
    let (code, v, out) = bench_json(
        "templates-open",
        &[
            "--rate",
            "200",
            "-n",
            "20",
            "-c",
            "4",
            "--threads",
            "2",
            "-H",
            "X-Conn: {client}",
            &s.url("/ok?s={seq}"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(v["responses"].as_u64(), Some(20), "{out}");
    let full = s.full.lock().expect("lock").clone();
    let mut seqs: Vec<u64> = full
        .iter()
        .filter_map(|(p, _, _)| p.split_once("s=").and_then(|x| x.1.parse().ok()))
        .collect();
    seqs.sort();
    assert_eq!(seqs, (1..=20).collect::<Vec<u64>>(), "{out}");
    for (_, h, _) in &full {
        let c: u64 = h
            .iter()
            .find_map(|l| l.strip_prefix("X-Conn: "))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        assert!((1..=4).contains(&c), "{h:?}");
    }
}

#[test]
fn a_fixed_first_request_delay_holds_every_client_back_and_a_range_spreads_them() {
    // -n 4 -c 4 with a fixed 300 ms delay: nothing before 300 ms, so the
    // run's last response comes after it.
    let s = TestServer::start();
    let (code, v, out) = bench_json(
        "delay-fixed",
        &[
            "-n",
            "4",
            "-c",
            "4",
            "--first-delay",
            "300ms",
            &s.url("/ok"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let d = f(&v["duration_s"]);
    assert!((0.3..0.6).contains(&d), "{d}: {out}");
    assert_eq!(
        v["settings"]["first_delay_s"][0].as_f64(),
        Some(0.3),
        "{out}"
    );
    // A range: 6 clients with one request each, delays drawn in
    // [0, 600 ms]: the request log shows each client's first request at
    // its delay, spread over the range, and the same seed draws the same
    // delays.
    let starts = |name: &str| {
        let s = TestServer::start();
        let sc = write(
            name,
            &format!(
                "[run]\nurl = \"{}\"\nseed = 3\n\
                 [clients]\nstart = 6\nrequests = 1\nfirst_delay = [\"0s\", \"600ms\"]\n",
                s.url("/ok")
            ),
        );
        let log = tmpdir(&format!("{name}-log")).join("log.csv");
        let (code, v, out) = bench_json(
            &format!("{name}-run"),
            &["--scenario", &sc, "--log", &log.to_string_lossy()],
        );
        assert_eq!(code, 0, "{out}");
        assert_eq!(v["responses"].as_u64(), Some(6), "{out}");
        let mut by_client: Vec<(u64, f64)> = log_lines(&log)
            .iter()
            .map(|l| (l[4].parse().unwrap_or(0), l[0].parse().unwrap_or(-1.0)))
            .collect();
        by_client.sort_by_key(|x| x.0);
        by_client
    };
    let a = starts("delay-range");
    let b = starts("delay-range2");
    assert_eq!(a.len(), 6);
    for ((ca, ta), (cb, tb)) in a.iter().zip(&b) {
        assert_eq!(ca, cb);
        assert!((0.0..0.65).contains(ta), "{a:?}");
        assert!(
            (ta - tb).abs() < 0.03,
            "the same seed, the same delays: {a:?} {b:?}"
        );
    }
    let (lo, hi) = a
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(x.1), hi.max(x.1)));
    assert!(hi - lo > 0.15, "delays spread over the range: {a:?}");
}

#[test]
fn a_first_request_delay_is_refused_with_an_open_loop() {
    let (code, _, err) = common::bench(&[
        "--rate",
        "10",
        "-d",
        "1",
        "--first-delay",
        "1s",
        "http://127.0.0.1:1/",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("closed loop"), "{err}");
}

/// The request log's lines after the header, split into fields (a quoted
/// URL kept whole).
fn log_lines(p: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(p).expect("read the log");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("start_s,latency_ms,status,bytes,client,connect_ms,tls_ms,first_byte_ms,transfer_ms,url")
    );
    lines
        .map(|l| {
            let (head, url) = match l.find(",\"") {
                Some(i) => (&l[..i], l[i + 1..].to_string()),
                None => {
                    let i = l.rfind(',').expect("six fields");
                    (&l[..i], l[i + 1..].to_string())
                }
            };
            let mut v: Vec<String> = head.split(',').map(str::to_string).collect();
            v.push(url);
            v
        })
        .collect()
}

#[test]
fn the_request_log_has_a_line_per_request_with_its_start_latency_status_bytes_client_and_url() {
    let s = TestServer::start();
    let d = tmpdir("reqlog");
    let log = d.join("requests.csv");
    let html = d.join("report.html");
    let (code, v, out) = bench_json(
        "reqlog-run",
        &[
            "-n",
            "30",
            "-c",
            "3",
            "-k",
            "--log",
            &log.to_string_lossy(),
            "--html",
            &html.to_string_lossy(),
            &s.url("/slow?ms=20&a=1,2"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 30, "{out}");
    let dur = f(&v["duration_s"]);
    let mut clients = std::collections::BTreeSet::new();
    for l in &lines {
        assert_eq!(l.len(), 10, "{l:?}");
        // Microseconds, always: six decimals of seconds, three of ms.
        assert_eq!(l[0].split('.').nth(1).map(str::len), Some(6), "{l:?}");
        assert_eq!(l[1].split('.').nth(1).map(str::len), Some(3), "{l:?}");
        let start: f64 = l[0].parse().expect("start");
        let lat: f64 = l[1].parse().expect("latency");
        // At least the server's 20 ms sleep; at most the run's slowest
        // response (a loaded box stretches a sleep past any fixed bound).
        assert!(
            lat >= 20.0 && lat <= f(&v["latency_ms"]["max"]) + 0.001,
            "{l:?}"
        );
        assert!(
            start >= 0.0 && start + lat / 1000.0 <= dur + 0.002,
            "{l:?} {dur}"
        );
        assert_eq!(l[2], "200");
        // Head and the 100-byte body.
        let bytes: u64 = l[3].parse().expect("bytes");
        assert!(bytes > 100, "{l:?}");
        clients.insert(l[4].clone());
        // A URL with a comma is quoted.
        assert_eq!(l[9], "\"/slow?ms=20&a=1,2\"");
    }
    assert_eq!(clients.into_iter().collect::<Vec<_>>(), ["1", "2", "3"]);
    // The phases (h2load's "time for connect" / "time to 1st byte"): with
    // -k each client connects once, so 3 lines have a connect time; none
    // has a TLS one over http://; every response has its first byte
    // (after the server's 20 ms) and its transfer.
    let with_connect = lines.iter().filter(|l| !l[5].is_empty()).count();
    assert_eq!(with_connect, 3, "{lines:?}");
    assert!(lines.iter().all(|l| l[6].is_empty()), "{lines:?}");
    for l in &lines {
        let first: f64 = l[7].parse().expect("first_byte_ms");
        let transfer: f64 = l[8].parse().expect("transfer_ms");
        let lat: f64 = l[1].parse().expect("latency");
        assert!(first >= 19.0 && first + transfer <= lat + 0.002, "{l:?}");
    }
    let ph = &v["phases_ms"];
    assert_eq!(ph["connect"]["n"].as_u64(), Some(3), "{ph}");
    assert!(ph["tls"].is_null(), "{ph}");
    assert_eq!(ph["first_byte"]["n"].as_u64(), Some(30), "{ph}");
    assert!(f(&ph["first_byte"]["p50"]) >= 19.0, "{ph}");
    assert_eq!(ph["transfer"]["n"].as_u64(), Some(30), "{ph}");
    assert_eq!(
        v["request_log"].as_str(),
        Some(log.to_string_lossy().as_ref())
    );
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("Latency of every request"), "no scatter");
    assert_eq!(page.matches("h0").count(), 30, "a dot per request");
}

#[test]
fn failures_are_logged_with_their_kind_and_many_threads_write_whole_lines() {
    let s = TestServer::start();
    let d = tmpdir("reqlog-fail");
    let log = d.join("fail.csv");
    let (code, _, out) = bench_json(
        "reqlog-fail-run",
        &["-n", "4", "--log", &log.to_string_lossy(), &s.url("/reset")],
    );
    assert_eq!(code, 1, "{out}");
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines.iter().all(|l| l[2] == "reset"), "{lines:?}");
    // Enough lines for each thread to write its buffer several times.
    let log = d.join("many.csv");
    let (code, v, out) = bench_json(
        "reqlog-many-run",
        &[
            "-n",
            "6000",
            "-c",
            "4",
            "-k",
            "--threads",
            "2",
            "--log",
            &log.to_string_lossy(),
            &s.url("/ok?n=10"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let lines = log_lines(&log);
    assert_eq!(lines.len() as u64, v["requests"].as_u64().unwrap_or(0));
    for l in &lines {
        assert!(
            l.len() == 10 && l[2] == "200" && l[9] == "/ok?n=10",
            "{l:?}"
        );
    }
}

#[test]
fn the_running_mean_and_deviation_are_given_every_n_responses_in_completion_order() {
    // One client whose k-th request sleeps k ms ({seq} as the delay):
    // after n responses the mean is (n + 1) / 2 ms and the deviation
    // sqrt(n (n + 1) / 12) ms, whatever the per-second timeline says.
    let s = TestServer::start();
    let sc = write(
        "running",
        &format!(
            "[run]\nurl = \"{}\"\nkeep_alive = true\nrunning_every = 5\n\
             [clients]\nstart = 1\nrequests = 23\n\
             [[mix]]\npath = \"/slow?ms={{seq}}\"\n",
            s.url("/")
        ),
    );
    let d = tmpdir("running-html");
    let html = d.join("r.html");
    let (code, v, out) = bench_json(
        "running-run",
        &["--scenario", &sc, "--html", &html.to_string_lossy()],
    );
    assert_eq!(code, 0, "{out}");
    let pts = v["running"].as_array().expect("running");
    let ns: Vec<u64> = pts.iter().map(|p| p["n"].as_u64().unwrap_or(0)).collect();
    assert_eq!(ns, vec![5, 10, 15, 20, 23], "{out}");
    for p in pts {
        let n = p["n"].as_u64().unwrap_or(0) as f64;
        // The mean of 1..=n ms, plus a little overhead per request.
        let want = (n + 1.0) / 2.0;
        let mean = f(&p["mean_ms"]);
        assert!(mean >= want && mean < want + 3.0, "n {n}: {mean} vs {want}");
        // The sample deviation of 1..=n is sqrt(n (n + 1) / 12).
        let sd_want = (n * (n + 1.0) / 12.0).sqrt();
        let sd = f(&p["stddev_ms"]);
        assert!((sd - sd_want).abs() < 1.5, "n {n}: sd {sd} vs {sd_want}");
        assert!(f(&p["t"]) > 0.0);
    }
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("response time per response"), "no chart");
    // Off by default: no points.
    let (_, v, _) = bench_json("running-off", &["-n", "3", &s.url("/ok")]);
    assert_eq!(v["running"].as_array().map(Vec::len), Some(0));
}

#[test]
fn reports_break_the_mix_down_by_url_and_the_timeline_by_status_code() {
    let s = TestServer::start();
    let sc = write(
        "by-url",
        &format!(
            "[run]\nurl = \"{}\"\nkeep_alive = true\nrequests = 40\nseed = 2\n\
             [clients]\nstart = 1\n\
             [[mix]]\npath = \"/slow?ms=10\"\n[[mix]]\npath = \"/status?code=503\"\n",
            s.url("/")
        ),
    );
    let d = tmpdir("by-url-html");
    let html = d.join("r.html");
    let (code, v, out) = bench_json(
        "by-url-run",
        &["--scenario", &sc, "--html", &html.to_string_lossy()],
    );
    assert_eq!(code, 0, "{out}");
    let urls = v["urls"].as_array().expect("urls");
    let names: Vec<&str> = urls
        .iter()
        .map(|u| u["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["GET /slow?ms=10", "GET /status?code=503"], "{out}");
    let (slow, fast) = (&urls[0], &urls[1]);
    assert!(f(&slow["mean_ms"]) >= 10.0, "{out}");
    assert!(f(&fast["mean_ms"]) < 5.0, "{out}");
    let n = |u: &serde_json::Value| u["requests"].as_u64().unwrap_or(0);
    assert_eq!(n(slow) + n(fast), 40, "{out}");
    assert!(out.contains("Per URL"), "{out}");
    // Status codes per second add up to the responses.
    let mut by_code = std::collections::BTreeMap::new();
    for sec in v["timeline"].as_array().expect("timeline") {
        for (k, c) in sec["status"].as_object().expect("status") {
            *by_code.entry(k.clone()).or_insert(0) += c.as_u64().unwrap_or(0);
        }
    }
    assert_eq!(by_code.get("503").copied(), Some(n(fast)), "{out}");
    assert_eq!(by_code.get("200").copied(), Some(n(slow)), "{out}");
    // The latency histogram holds every response, its bins in order.
    let bins = v["latency_histogram"].as_array().expect("histogram");
    let total: u64 = bins.iter().map(|b| b[2].as_u64().unwrap_or(0)).sum();
    assert_eq!(total, 40, "{out}");
    assert!(bins.windows(2).all(|w| f(&w[0][1]) <= f(&w[1][0]) + 1e-9));
    let cmd = v["command_line"].as_str().unwrap_or("");
    assert!(cmd.starts_with("stoa bench --scenario "), "{cmd}");
    let t = v["start_time"].as_str().unwrap_or("");
    assert!(
        t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
        "{t}"
    );
    let page = std::fs::read_to_string(&html).expect("html");
    for h in [
        "By URL",
        "Status codes per second",
        "Latency histogram",
        "503",
    ] {
        assert!(page.contains(h), "{h}");
    }
}

#[test]
fn a_ramp_plots_response_time_and_throughput_against_active_clients() {
    let s = TestServer::start();
    let sc = write(
        "ramp-chart",
        &format!(
            "[run]\nurl = \"{}\"\nkeep_alive = true\nduration = \"600ms\"\n\
             [clients]\nstart = 1\nadd = 1\nevery = \"200ms\"\nmax = 3\n",
            s.url("/slow?ms=5")
        ),
    );
    let d = tmpdir("ramp-chart-html");
    let html = d.join("r.html");
    let (code, _, out) = bench_json(
        "ramp-chart-run",
        &["--scenario", &sc, "--html", &html.to_string_lossy()],
    );
    assert_eq!(code, 0, "{out}");
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("Response time against active clients"));
    assert!(page.contains("Throughput against active clients"));
}

#[test]
fn compare_labels_runs_distinctly_keeps_each_runs_colour_and_writes_json_with_clients() {
    let s = TestServer::start();
    let d = tmpdir("cmp-lab");
    let mut files = Vec::new();
    for (dir, c) in [("one", "1"), ("four", "4")] {
        std::fs::create_dir_all(d.join(dir)).expect("mkdir");
        let j = d.join(dir).join("run.json");
        let (code, out, err) = common::bench(&[
            "-n",
            "40",
            "-c",
            c,
            "-k",
            "--json",
            &j.to_string_lossy(),
            &s.url("/slow?ms=10"),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        files.push(j.to_string_lossy().into_owned());
    }
    let (html, json) = (d.join("cmp.html"), d.join("cmp.json"));
    let (code, out, err) = common::bench(&[
        "compare",
        &files[0],
        &files[1],
        "--html",
        &html.to_string_lossy(),
        "--json",
        &json.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{err}");
    // Two files named run.json: labelled by their directories.
    assert!(
        out.lines()
            .next()
            .is_some_and(|l| l.contains("one/run") && l.contains("four/run")),
        "{out}"
    );
    let clients = out
        .lines()
        .find(|l| l.starts_with("clients"))
        .expect("clients row");
    assert_eq!(
        clients.split_whitespace().collect::<Vec<_>>(),
        ["clients", "1", "4"],
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("parse");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs[0]["name"], "one/run");
    assert_eq!(runs[1]["clients"]["value"].as_f64(), Some(4.0));
    let r1 = f(&runs[1]["values"]["requests_per_second"]);
    let r0 = f(&runs[0]["values"]["requests_per_second"]);
    let ratio = f(&runs[1]["ratio_to_first"]["requests_per_second"]);
    assert!((ratio - r1 / r0).abs() < 1e-9 && ratio > 2.0, "{v}");
    assert_eq!(runs[0]["ratio_to_first"]["failed"], serde_json::Value::Null);
    // Every legend entry of a run has that run's colour, in every chart.
    let page = std::fs::read_to_string(&html).expect("html");
    for (name, colour) in [("one/run", "#1f77b4"), ("four/run", "#d62728")] {
        let mut seen = 0;
        // A legend entry: <line ... stroke="C" stroke-width="2"/><text>NAME ...
        for part in page.split("<line ").skip(1) {
            let legend = &part[..part.find("</text>").unwrap_or(part.len())];
            if legend.contains("stroke-width=\"2\"") && legend.contains(&format!(">{name} ")) {
                assert!(
                    legend.contains(&format!("stroke=\"{colour}\"")),
                    "{name}: {legend}"
                );
                seen += 1;
            }
        }
        assert!(seen >= 6, "{name}: {seen} legend entries");
    }
    assert!(page.contains("Throughput against active clients"));
}
