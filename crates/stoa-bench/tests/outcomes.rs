//! Every outcome is counted by kind, against a server that injects faults.

mod common;
use common::{bench, bench_json, TestServer};

fn n(v: &serde_json::Value, path: &str) -> u64 {
    let mut x = v;
    for k in path.split('.') {
        x = &x[k];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("{path} missing in {v}"))
}

fn f(v: &serde_json::Value, path: &str) -> f64 {
    let mut x = v;
    for k in path.split('.') {
        x = &x[k];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{path} missing in {v}"))
}

#[test]
fn plain_responses_are_counted_with_their_bytes() {
    let s = TestServer::start();
    let (code, v, out) = bench_json(
        "plain",
        &["-n", "50", "-c", "5", "-k", &s.url("/ok?n=1000")],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(n(&v, "requests"), 50);
    assert_eq!(n(&v, "responses"), 50);
    assert_eq!(n(&v, "failed"), 0);
    assert_eq!(n(&v, "status.200"), 50);
    assert_eq!(n(&v, "bytes.body"), 50 * 1000);
    assert_eq!(n(&v, "document_length"), 1000);
    assert_eq!(n(&v, "keep_alive_requests"), 50);
    assert_eq!(n(&v, "connections"), 5, "one connection per client with -k");
    assert!(out.contains("Complete requests:      50"), "{out}");
}

#[test]
fn without_keep_alive_every_request_opens_a_connection() {
    let s = TestServer::start();
    let (code, v, out) = bench_json("nokeep", &["-n", "30", "-c", "3", &s.url("/ok")]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(n(&v, "responses"), 30);
    assert_eq!(n(&v, "connections"), 30);
    assert_eq!(n(&v, "keep_alive_requests"), 0);
}

#[test]
fn resets_are_counted_as_resets_and_the_run_goes_on() {
    let s = TestServer::start();
    let (code, v, out) = bench_json("reset", &["-n", "20", "-c", "2", &s.url("/reset")]);
    assert_eq!(code, 1, "no response at all is an error exit: {out}");
    assert_eq!(n(&v, "requests"), 20);
    assert_eq!(n(&v, "responses"), 0);
    assert_eq!(n(&v, "errors.reset"), 20, "{v}");
    assert_eq!(n(&v, "failed"), 20);
    assert!(out.contains("no response from"), "{out}");
}

#[test]
fn a_body_shorter_than_its_content_length_is_a_short_body_not_a_response() {
    let s = TestServer::start();
    let (_, v, out) = bench_json("short", &["-n", "10", "-c", "2", &s.url("/short")]);
    assert_eq!(n(&v, "errors.short_body"), 10, "{out}");
    assert_eq!(n(&v, "responses"), 0);
    assert_eq!(n(&v, "requests"), 10);
}

#[test]
fn chunked_bodies_are_decoded_and_counted_by_their_data() {
    let s = TestServer::start();
    for keep in [true, false] {
        let mut args = vec!["-n", "12", "-c", "3"];
        if keep {
            args.push("-k");
        }
        let url = s.url("/chunked?n=1000");
        args.push(&url);
        let (code, v, out) = bench_json(&format!("chunked-{keep}"), &args);
        assert_eq!(code, 0, "{out}");
        assert_eq!(n(&v, "responses"), 12, "{out}");
        assert_eq!(n(&v, "failed"), 0, "{out}");
        assert_eq!(n(&v, "bytes.body"), 12 * 1000);
        assert_eq!(n(&v, "keep_alive_requests"), if keep { 12 } else { 0 });
    }
}

#[test]
fn server_errors_are_responses_counted_by_status_and_as_non_2xx() {
    let s = TestServer::start();
    let (code, v, out) = bench_json(
        "5xx",
        &["-n", "20", "-c", "4", "-k", &s.url("/status?code=503")],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(n(&v, "status.503"), 20);
    assert_eq!(n(&v, "non_2xx"), 20);
    assert_eq!(n(&v, "failed"), 0);
    assert!(out.contains("Non-2xx responses:      20"), "{out}");
}

#[test]
fn a_closed_port_is_counted_as_refused_and_exits_non_zero() {
    // Bind, note the port, close: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let (code, v, out) = bench_json("refused", &["-n", "5", "-c", "1", &url]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(n(&v, "errors.connect_refused"), 5, "{v}");
    assert_eq!(n(&v, "requests"), 5);
    assert!(out.contains("connection refused"), "{out}");
}

#[test]
fn requests_in_flight_when_a_timed_run_ends_are_reported_apart() {
    let s = TestServer::start();
    let (code, v, out) = bench_json("inflight", &["-d", "0.3", "-c", "4", "-k", &s.url("/hang")]);
    assert_eq!(code, 1, "not a single response: {out}");
    assert_eq!(n(&v, "in_flight_at_end"), 4, "{v}");
    assert_eq!(n(&v, "failed"), 0);
    assert_eq!(n(&v, "requests"), 0);
    assert!(out.contains("In flight at end: 4"), "{out}");
    assert!((f(&v, "duration_s") - 0.3).abs() < 0.05, "{v}");
}

#[test]
fn a_response_past_the_per_request_timeout_is_a_timeout() {
    let s = TestServer::start();
    let (_, v, out) = bench_json(
        "timeout",
        &["-n", "3", "-c", "1", "-s", "0.1", &s.url("/slow?ms=400")],
    );
    assert_eq!(n(&v, "errors.timeout"), 3, "{out}");
    assert_eq!(n(&v, "responses"), 0);
}

#[test]
fn garbage_and_early_close_are_malformed_and_closed() {
    let s = TestServer::start();
    let (_, v, _) = bench_json("garbage", &["-n", "4", &s.url("/garbage")]);
    assert_eq!(n(&v, "errors.malformed"), 4, "{v}");
    let (_, v, _) = bench_json("close", &["-n", "4", &s.url("/close")]);
    assert_eq!(n(&v, "errors.closed"), 4, "{v}");
}

#[test]
fn a_kept_alive_connection_closed_by_the_server_is_retried_once_not_failed() {
    let s = TestServer::start();
    let (code, v, out) = bench_json(
        "close-after",
        &["-n", "40", "-c", "2", "-k", &s.url("/close-after")],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(n(&v, "responses"), 40, "{v}");
    assert_eq!(n(&v, "failed"), 0, "{v}");
    assert_eq!(n(&v, "keep_alive_requests"), 40);
}

/// The percentiles of the JSON are those of the run's own per-request log
/// (HdrHistogram keeps three significant digits), and no response is
/// reported faster than the server really took. The client's latency also
/// holds the loopback and the scheduler, which a loaded machine stretches
/// without bound, so the truth is a floor here, not a target.
#[test]
fn slow_responses_give_the_percentiles_of_the_request_log_and_never_less_than_the_true_delay() {
    let s = TestServer::start();
    let log = common::tmpdir("slow-log").join("requests.csv");
    let (code, v, out) = bench_json(
        "slow",
        &[
            "-n",
            "20",
            "-c",
            "4",
            "-k",
            "--log",
            &log.to_string_lossy(),
            &s.url("/slow?ms=200"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    // The truth: what the server really took (its sleep overshoots on a
    // busy machine), in ms, sorted.
    let mut truth: Vec<f64> = s
        .delays
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    truth.sort_by(f64::total_cmp);
    assert_eq!(truth.len(), 20);
    // The client's latencies from its log (column 2, ms), sorted.
    let text = std::fs::read_to_string(&log).expect("request log");
    let mut seen: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).and_then(|x| x.parse().ok()).expect(l))
        .collect();
    seen.sort_by(f64::total_cmp);
    assert_eq!(seen.len(), 20, "{text}");
    // Each response took at least its server time, so the i-th fastest
    // seen is at least the i-th fastest true delay (less 0.1 ms of clock
    // granularity between the two processes' stamps).
    for (c, t) in seen.iter().zip(&truth) {
        assert!(*c >= t - 0.1, "seen {seen:?}, truth {truth:?}");
    }
    let rank = |xs: &[f64], p: f64| {
        xs[((p / 100.0 * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1]
    };
    for (k, p) in [
        ("latency_ms.min", 0.0),
        ("latency_ms.p50", 50.0),
        ("latency_ms.p90", 90.0),
        ("latency_ms.p99", 99.0),
        ("latency_ms.max", 100.0),
    ] {
        let x = f(&v, k);
        let want = rank(&seen, p);
        assert!(
            (x - want).abs() <= 0.01 * want,
            "{k} = {x} ms, the log's {want} ms (1%): {out}"
        );
        assert!(
            x >= 0.99 * rank(&truth, p),
            "{k} = {x} ms under the true delay {} ms: {out}",
            rank(&truth, p)
        );
    }
    let ct = &v["connection_times_ms"];
    for row in ["connect", "processing", "waiting", "total"] {
        let r = &ct[row];
        let (min, mean, med, max) = (
            r["min"].as_f64().unwrap(),
            r["mean"].as_f64().unwrap(),
            r["median"].as_f64().unwrap(),
            r["max"].as_f64().unwrap(),
        );
        assert!(
            min <= med && med <= max && min <= mean && mean <= max,
            "{row}: {r}"
        );
    }
}

#[test]
fn a_mix_of_faults_adds_up_to_the_requests_made() {
    // Each path alone is checked above; here the totals must agree when
    // outcomes of every kind come from one run.
    let s = TestServer::start();
    let d = common::tmpdir("mix");
    let sc = d.join("mix.toml");
    std::fs::write(
        &sc,
        format!(
            "[run]\nurl = \"{}\"\nrequests = 120\nseed = 3\ntimeout = \"200ms\"\nvariable_length = true\n\
             [clients]\nstart = 4\n\
             [[mix]]\npath = \"/ok\"\n[[mix]]\npath = \"/reset\"\n[[mix]]\npath = \"/short\"\n\
             [[mix]]\npath = \"/status?code=500\"\n[[mix]]\npath = \"/chunked\"\n[[mix]]\npath = \"/garbage\"\n",
            s.url("/")
        ),
    )
    .unwrap();
    let scs = sc.to_string_lossy().into_owned();
    let (code, v, out) = bench_json("mixrun", &["--scenario", &scs, "-k"]);
    assert_eq!(code, 0, "{out}");
    let e = &v["errors"];
    let errs: u64 = [
        "connect_refused",
        "connect",
        "reset",
        "closed",
        "timeout",
        "short_body",
        "malformed",
    ]
    .iter()
    .map(|k| e[*k].as_u64().unwrap())
    .sum();
    assert_eq!(n(&v, "responses") + errs, 120, "{v}");
    assert_eq!(n(&v, "requests"), 120);
    assert!(
        n(&v, "errors.reset") > 0
            && n(&v, "errors.short_body") > 0
            && n(&v, "errors.malformed") > 0
    );
    assert!(n(&v, "status.500") > 0 && n(&v, "status.200") > 0);
}

#[test]
fn bad_input_gets_a_clear_message_and_a_non_zero_exit() {
    let (code, _, err) = bench(&["-n", "5", "-c", "10", "http://127.0.0.1:1/"]);
    assert_eq!(code, 2);
    assert!(err.contains("smaller than -c"), "{err}");
    let (code, _, err) = bench(&["-n", "1", "ftp://x/"]);
    assert_eq!(code, 2);
    assert!(err.contains("only http://"), "{err}");
    let (code, _, err) = bench(&["-n", "1", "http://no-such-host.invalid/"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot resolve"), "{err}");
    let (code, _, err) = bench(&["-q", "--frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown option --frobnicate"), "{err}");
    let d = common::tmpdir("badscenario");
    let sc = d.join("bad.toml");
    std::fs::write(
        &sc,
        "[run]\nurl = \"http://127.0.0.1:1/\"\n\n[think]\ndistribution = \"sometimes\"\n",
    )
    .unwrap();
    let (code, _, err) = bench(&["--scenario", &sc.to_string_lossy()]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.toml:5:"), "{err}");
    let (code, out, _) = bench(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--rate R"));
}

#[test]
fn a_timed_run_in_which_no_response_arrived_exits_1() {
    let s = TestServer::start();
    let (code, v, out) = bench_json("noresp", &["-d", "0.3", "-c", "2", &s.url("/hang")]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(n(&v, "responses"), 0, "{v}");
    assert!(out.contains("no response from"), "{out}");
    assert!(out.contains("still in flight"), "{out}");
}

#[test]
fn the_server_software_is_reported_with_variable_lengths_too() {
    let s = TestServer::start();
    let (code, v, out) = bench_json("lserver", &["-l", "-n", "5", &s.url("/var")]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v["server_software"].as_str(), Some("fault-server"), "{v}");
    assert!(
        out.contains("Server Software:        fault-server"),
        "{out}"
    );
    assert_eq!(n(&v, "failed"), 0, "{v}");
}

#[test]
fn a_connect_that_never_completes_is_a_connect_error_not_a_receive_timeout() {
    use socket2::{Domain, Socket, Type};
    use std::time::Duration;
    // A listener that never accepts, with the smallest backlog: once its
    // accept queue is full, Linux drops further SYNs, so a connect neither
    // completes nor fails until the client gives up.
    let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    l.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    l.listen(0).unwrap();
    let addr = l.local_addr().unwrap().as_socket().unwrap();
    // Fill the queue; connects past it time out here (and are kept).
    let mut held = Vec::new();
    for _ in 0..4 {
        if let Ok(c) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            held.push(c);
        }
    }
    assert!(!held.is_empty());
    let url = format!("http://{addr}/");
    let (code, v, out) = bench_json("syn-dropped", &["-n", "1", "-c", "1", "-s", "0.3", &url]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(n(&v, "errors.connect"), 1, "{v}");
    assert_eq!(n(&v, "errors.timeout"), 0, "{v}");
    drop(held);
}
