//! Open loop (`--rate`): latency counts from each request's intended send
//! time, so a stall cannot hide behind the requests it delayed.

mod common;
use common::{bench_json, TestServer};

fn f(v: &serde_json::Value, a: &str, b: &str) -> f64 {
    v[a][b]
        .as_f64()
        .unwrap_or_else(|| panic!("{a}.{b} missing: {v}"))
}

#[test]
fn a_stall_shows_in_the_open_loop_latency_of_every_request_it_delayed() {
    let s = TestServer::start();
    // 200 requests/s on one connection; request 10 stalls 300 ms, so the
    // ~60 requests due during the stall wait up to 300 ms each.
    let url = s.url("/stall-once?ms=300&at=10");
    let (code, v, out) = bench_json(
        "open",
        &["--rate", "200", "-c", "1", "-k", "-n", "100", &url],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(v["responses"].as_u64(), Some(100), "{out}");
    assert!(f(&v, "latency_ms", "max") >= 295.0, "{out}");
    assert!(
        f(&v, "latency_ms", "p50") >= 40.0,
        "median hides the stall: {out}"
    );
    assert!(out.contains("intended send time"), "{out}");

    // The same shape in a closed loop only sees the one slow request.
    let s = TestServer::start();
    let url = s.url("/stall-once?ms=300&at=10");
    let (_, v, out) = bench_json("closed", &["-c", "1", "-k", "-n", "100", &url]);
    assert!(f(&v, "latency_ms", "p50") < 20.0, "{out}");
    assert!(f(&v, "latency_ms", "max") >= 295.0, "{out}");
}

#[test]
fn requests_the_schedule_could_not_send_are_counted_as_not_sent() {
    let s = TestServer::start();
    let url = s.url("/slow?ms=300");
    let (code, v, out) = bench_json(
        "notsent",
        &["--rate", "200", "-c", "1", "-k", "-d", "0.5", &url],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(v["responses"].as_u64(), Some(1), "{out}");
    assert_eq!(v["in_flight_at_end"].as_u64(), Some(1), "{out}");
    let ns = v["not_sent"].as_u64().unwrap();
    assert!((90..=101).contains(&ns), "not sent {ns}: {out}");
}

#[test]
fn the_open_loop_keeps_its_rate() {
    let s = TestServer::start();
    let (code, v, out) = bench_json(
        "rate",
        &[
            "--rate",
            "400",
            "-c",
            "4",
            "-k",
            "-d",
            "1",
            "--threads",
            "2",
            &s.url("/ok"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let n = v["responses"].as_u64().unwrap();
    assert!(
        (380..=402).contains(&n),
        "{n} responses in 1 s at 400/s: {out}"
    );
    assert_eq!(v["failed"].as_u64(), Some(0));
}

#[test]
fn a_timed_run_far_below_capacity_has_nothing_not_sent() {
    // 100/s for 0.5 s: arrivals at 0, 10, ..., 490 ms; the one that would
    // be due at 500 ms is after the run, not behind it.
    let s = TestServer::start();
    for threads in ["1", "2"] {
        let (code, v, out) = bench_json(
            &format!("boundary{threads}"),
            &[
                "--rate",
                "100",
                "-c",
                "4",
                "-k",
                "--threads",
                threads,
                "-d",
                "0.5",
                &s.url("/ok"),
            ],
        );
        assert_eq!(code, 0, "{out}");
        assert_eq!(v["not_sent"].as_u64(), Some(0), "{out}");
        assert!(!out.contains("Not sent"), "{out}");
        let (r, f) = (
            v["responses"].as_u64().unwrap_or(0),
            v["in_flight_at_end"].as_u64().unwrap_or(0),
        );
        assert_eq!(r + f, 50, "{out}");
    }
    // 14/s for 1 s: a period that is not a whole number of nanoseconds
    // (the 15th arrival, due at the end, lands 6 ns before it once the
    // period is rounded down).
    for threads in ["1", "2"] {
        let (code, v, out) = bench_json(
            &format!("boundary14-{threads}"),
            &[
                "--rate",
                "14",
                "-c",
                "4",
                "--threads",
                threads,
                "-d",
                "1",
                &s.url("/ok"),
            ],
        );
        assert_eq!(code, 0, "{out}");
        assert_eq!(v["not_sent"].as_u64(), Some(0), "{out}");
        let (r, f) = (
            v["responses"].as_u64().unwrap_or(0),
            v["in_flight_at_end"].as_u64().unwrap_or(0),
        );
        assert_eq!(r + f, 14, "{out}");
    }
}

#[test]
fn a_closed_loop_report_says_which_latency_it_shows_and_corrected_shows_the_stall() {
    // One client, request 10 stalls 300 ms. The closed-loop view (from
    // each request's actual send) shows the stall in one request only, and
    // says so; --corrected back-fills the requests the client would have
    // sent during the stall at its observed rate, so the stall shows in
    // the percentiles.
    let s = TestServer::start();
    let url = s.url("/stall-once?ms=300&at=10");
    let (code, v, out) = bench_json("view", &["-c", "1", "-k", "-n", "100", &url]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v["latency_view"].as_str(), Some("sent"), "{v}");
    assert!(
        out.contains("from each request's actual send time"),
        "{out}"
    );
    assert!(v["corrected_latency_ms"].is_null(), "{v}");

    let s = TestServer::start();
    let url = s.url("/stall-once?ms=300&at=10");
    let (code, v, out) = bench_json(
        "corrected",
        &["-c", "1", "-k", "-n", "100", "--corrected", &url],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        f(&v, "latency_ms", "p99") < 100.0,
        "the sent view stays: {out}"
    );
    assert!(f(&v, "corrected_latency_ms", "p99") >= 200.0, "{out}");
    assert!(f(&v, "corrected_latency_ms", "p50") >= 20.0, "{out}");
    assert!(f(&v, "corrected_latency_ms", "max") >= 295.0, "{out}");
    assert!(out.contains("corrected for coordinated omission"), "{out}");

    let (code, _, err) = common::bench(&["--rate", "10", "-n", "5", "--corrected", &url]);
    assert_eq!(code, 2, "{err}");
}
