//! Ctrl-C: the run stops and its report says so. Alone in its own test
//! binary, because the flag the SIGINT handler sets is process-wide.

mod common;
use common::{bench, tmpdir, TestServer};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[test]
fn a_run_stopped_by_ctrl_c_is_marked_interrupted_in_the_report_and_the_json() {
    let s = TestServer::start();
    let d = tmpdir("interrupt");
    let j = d.join("out.json");
    // What the `stoa` binary's SIGINT handler does, 300 ms into the run.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(300));
        stoa_bench::engine::INTERRUPTED.store(true, Ordering::Relaxed);
    });
    let t = Instant::now();
    let (_, out, err) = bench(&[
        "-d",
        "10",
        "-c",
        "2",
        "-k",
        "--json",
        &j.to_string_lossy(),
        &s.url("/ok"),
    ]);
    assert!(t.elapsed() < Duration::from_secs(5), "not stopped: {out}");
    assert!(out.contains("Interrupted (Ctrl-C)"), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    assert_eq!(v["interrupted"], serde_json::Value::Bool(true), "{v}");
}
