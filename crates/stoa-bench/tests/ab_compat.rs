//! ab compatibility: the same counts as ApacheBench on the same run shape
//! against the same server. Needs `ab` (Debian: apache2-utils); the test
//! fails with a clear message when it is missing (test.sh installs it).

mod common;
use common::{bench, TestServer};
use std::collections::BTreeMap;
use std::process::Command;

/// The counting lines of an ab-style report.
fn counts(report: &str) -> BTreeMap<String, String> {
    let keys = [
        "Document Length:",
        "Complete requests:",
        "Failed requests:",
        "Non-2xx responses:",
        "Keep-Alive requests:",
        "Total transferred:",
        "HTML transferred:",
    ];
    let mut m = BTreeMap::new();
    for line in report.lines() {
        for k in keys {
            if let Some(v) = line.strip_prefix(k) {
                m.insert(k.to_string(), v.trim().to_string());
            }
        }
        if line.trim_start().starts_with("(Connect:") {
            m.insert("breakdown".into(), line.trim().to_string());
        }
    }
    m
}

fn ab(args: &[&str]) -> String {
    let out = Command::new("ab").args(args).output().unwrap_or_else(|e| {
        panic!(
            "cannot run ab ({e}): install ApacheBench (Debian package apache2-utils) to run the ab-compatibility tests"
        )
    });
    assert!(
        out.status.success(),
        "ab {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs ab and stoa bench, each against a fresh server, on `path`.
fn same_counts(args: &[&str], path: &str) {
    let s = TestServer::start();
    let url = s.url(path);
    let mut a: Vec<&str> = args.to_vec();
    a.push(&url);
    let theirs = counts(&ab(&a));
    let s = TestServer::start();
    let url = s.url(path);
    let mut ours_args = vec!["--http1.0"];
    ours_args.extend_from_slice(args);
    ours_args.push(&url);
    let (code, out, err) = bench(&ours_args);
    assert_eq!(code, 0, "{out}{err}");
    let ours = counts(&out);
    assert_eq!(ours, theirs, "stoa bench {ours_args:?}\n--- ours:\n{out}");
}

#[test]
fn plain_runs_count_like_ab() {
    same_counts(&["-n", "200", "-c", "5"], "/ok");
}

#[test]
fn keep_alive_runs_count_like_ab() {
    same_counts(&["-k", "-n", "300", "-c", "6"], "/ok?n=3000");
}

#[test]
fn non_2xx_responses_count_like_ab() {
    same_counts(&["-k", "-n", "50", "-c", "2"], "/status?code=503");
    same_counts(&["-n", "50", "-c", "2"], "/status?code=404");
}

#[test]
fn responses_of_other_lengths_fail_like_ab() {
    // One client: the first response (10 bytes) sets the document length,
    // every later one (20 bytes) is a Length failure for both tools.
    same_counts(&["-n", "20", "-c", "1"], "/var");
}

#[test]
fn head_requests_count_like_ab() {
    same_counts(&["-i", "-k", "-n", "40", "-c", "4"], "/ok");
}
