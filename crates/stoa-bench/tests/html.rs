//! The HTML report renders in headless Chromium (Debian package
//! `chromium`; test.sh installs it). Without it this test fails and says so.

mod common;
use common::{bench, tmpdir, TestServer};
use std::process::Command;
use std::time::{Duration, Instant};

fn chromium() -> String {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return c.to_string();
        }
    }
    panic!("headless Chromium is needed to check the HTML report: install the Debian package `chromium` (test.sh does)");
}

/// Runs Chromium with a deadline; returns its stdout.
fn run_chromium(bin: &str, args: &[String]) -> String {
    let mut child = Command::new(bin)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start chromium");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait chromium").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("chromium output");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let bin = chromium();
    let s = TestServer::start();
    let d = tmpdir("html");
    let html = d.join("report.html");
    let (code, out, err) = bench(&[
        "-d",
        "1.3",
        "-c",
        "2",
        "-k",
        "--html",
        &html.to_string_lossy(),
        &s.url("/ok"),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    // Throughput, status codes, bytes, latency per second, active
    // clients, resilience, percentiles, histogram; and the bar of the
    // request phases.
    assert_eq!(page.matches("<svg").count(), 9, "eight plots and a bar");
    for h in [
        "requests",
        "successful / s",
        "errors",
        "p50 ms",
        "p90 ms",
        "p95 ms",
        "p99 ms",
        "p99.9 ms",
        "received / s",
    ] {
        assert!(page.contains(&format!("<span>{h}</span>")), "headline {h}");
    }
    assert!(
        page.contains("stoa bench -d 1.3 -c 2 -k --html"),
        "command line"
    );
    let profile = d.join("profile");
    let png = d.join("shot.png");
    let common_args = |extra: &[String]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.push(format!("--user-data-dir={}", profile.display()));
        v.extend_from_slice(extra);
        v.push(format!("file://{}", html.display()));
        v
    };
    run_chromium(
        &bin,
        &common_args(&[
            format!("--screenshot={}", png.display()),
            "--window-size=1200,1600".into(),
        ]),
    );
    let shot = std::fs::read(&png).expect("chromium wrote no screenshot");
    assert!(shot.starts_with(b"\x89PNG"), "not a PNG");
    assert!(
        shot.len() > 20_000,
        "a nearly empty screenshot ({} bytes)",
        shot.len()
    );
    // The rendered DOM still holds the plots and their polylines.
    let dom = run_chromium(&bin, &common_args(&["--dump-dom".into()]));
    assert!(
        dom.matches("<svg").count() == 9,
        "{}",
        &dom[..dom.len().min(500)]
    );
    assert!(dom.contains("<polyline"), "no plotted line");
}
