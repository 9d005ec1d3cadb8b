//! `stoa bench`'s reports against the real `stoa` binary: the reported
//! case of an open-loop mix of static files and a CGI script, whose
//! per-URL percentiles must be those of the run's own per-request log,
//! and thresholds as a CI job uses them (k6's `thresholds`: exit status 3
//! when one fails).

mod common;

use common::*;
use std::collections::BTreeMap;
use std::process::Command;

/// `stoa bench -q ARGS...`: (exit status, stdout, stderr).
fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(stoa_bin())
        .arg("bench")
        .arg("-q")
        .args(args)
        .output()
        .expect("run stoa bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A site of static files of several sizes and a shell CGI script.
fn site() -> (TempDir, Server) {
    let dir = TempDir::new("bench-reports");
    for (name, len) in [("a.html", 100), ("b.html", 2_000), ("c.bin", 40_000)] {
        dir.write(&format!("www/{name}"), pattern(len, 7));
    }
    let script = dir.write(
        "cgi-bin/hello.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nhello %s\\n' \"$QUERY_STRING\"\n",
    );
    let mut perm = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&script, perm).expect("chmod");
    let cfg = dir.config(
        "stoa.toml",
        "\n[[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/cgi-bin/\"\n\
         cgi = { dir = \"cgi-bin\", timeout = \"10s\" }\n",
    );
    let server = Server::with_config(&cfg);
    (dir, server)
}

#[test]
fn per_url_percentiles_of_an_open_loop_mix_with_a_cgi_match_the_request_log() {
    let (dir, server) = site();
    let paths = [
        "/a.html",
        "/b.html",
        "/c.bin",
        "/cgi-bin/hello.sh",
        "/cgi-bin/hello.sh?x=1",
    ];
    let mut toml = format!(
        "[run]\nurl = \"http://{}/\"\nrate = 150\nconnections = 8\nrequests = 600\nkeep_alive = true\n",
        server.addr
    );
    for p in paths {
        toml.push_str(&format!("[[mix]]\npath = \"{p}\"\n"));
    }
    let sc = dir.write("mix.toml", toml);
    let (log, json) = (dir.join("req.csv"), dir.join("run.json"));
    let (code, out, err) = bench(&[
        "--scenario",
        &sc.to_string_lossy(),
        "-l",
        "--log",
        &log.to_string_lossy(),
        "--json",
        &json.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("parse json");
    // The log's latencies by request target (columns found by name).
    let text = std::fs::read_to_string(&log).expect("log");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| head.iter().position(|c| *c == n).expect(n);
    let (lat, status, url) = (col("latency_ms"), col("status"), col("url"));
    let phase_cols = [
        ("connect", col("connect_ms")),
        ("tls", col("tls_ms")),
        ("first_byte", col("first_byte_ms")),
        ("transfer", col("transfer_ms")),
    ];
    let us_of = |v: &str| {
        let (a, b) = v.split_once('.').expect("M.UUU");
        a.parse::<u64>().expect("ms") * 1000 + b.parse::<u64>().expect("us")
    };
    let mut by: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    // (URL, phase) -> the phase's values; "request" is first byte plus
    // transfer (written to last byte).
    let mut phases: BTreeMap<(String, &str), Vec<u64>> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f[status] != "200" {
            continue;
        }
        by.entry(f[url].to_string())
            .or_default()
            .push(us_of(f[lat]));
        for (name, c) in phase_cols {
            if !f[c].is_empty() {
                phases
                    .entry((f[url].to_string(), name))
                    .or_default()
                    .push(us_of(f[c]));
            }
        }
        let request = us_of(f[col("first_byte_ms")]) + us_of(f[col("transfer_ms")]);
        phases
            .entry((f[url].to_string(), "request"))
            .or_default()
            .push(request);
    }
    // Exact rank ceil(q * n) of the sorted values against the JSON's
    // figure: 2 significant digits, the top of the value's bucket, < 1 %
    // (and a microsecond either way: "request" sums two rounded values).
    let check = |what: &str, xs: &mut Vec<u64>, v: &serde_json::Value, keys: [&str; 3]| {
        xs.sort_unstable();
        for (key, q) in keys.iter().zip([50.0, 90.0, 99.0]) {
            let rank = ((q / 100.0 * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
            let want = xs[rank - 1];
            let got = (v[key].as_f64().expect(key) * 1000.0).round() as u64;
            assert!(
                got + 1 >= want && got <= want + want / 100 + 2,
                "{what} {key}: JSON {got} us, log {want} us"
            );
        }
    };
    let urls = v["urls"].as_array().expect("urls");
    assert_eq!(urls.len(), paths.len(), "{v}");
    for p in paths {
        let name = format!("GET {p}");
        let u = urls
            .iter()
            .find(|u| u["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name}"));
        let mut xs = by.remove(p).unwrap_or_default();
        xs.sort_unstable();
        assert!(xs.len() >= 50, "{name}: {} responses", xs.len());
        assert_eq!(u["responses"].as_u64(), Some(xs.len() as u64), "{name}");
        // Its phases from the same log: each phase its responses had.
        for phase in ["connect", "first_byte", "transfer", "request"] {
            let Some(mut ys) = phases.remove(&(p.to_string(), phase)) else {
                continue;
            };
            let ph = &u["phases_ms"][phase];
            assert_eq!(
                ph["n"].as_u64(),
                Some(ys.len() as u64),
                "{name} {phase}: {u}"
            );
            check(
                &format!("{name} {phase}"),
                &mut ys,
                ph,
                ["p50", "p90", "p99"],
            );
        }
        for (key, q) in [("p50_ms", 50.0), ("p90_ms", 90.0), ("p99_ms", 99.0)] {
            let rank = ((q / 100.0 * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
            let want = xs[rank - 1];
            let got = (u[key].as_f64().expect(key) * 1000.0).round() as u64;
            // 2 significant digits: the top of the value's bucket, < 1 %.
            assert!(
                got >= want && got <= want + want / 100 + 1,
                "{name} {key}: JSON {got} us, log {want} us"
            );
        }
    }
    // A CGI request forks a shell: its figures are not all one value.
    let cgi = urls
        .iter()
        .find(|u| u["name"] == "GET /cgi-bin/hello.sh")
        .expect("cgi");
    assert!(cgi["p50_ms"].as_f64() < cgi["max_ms"].as_f64(), "{cgi}");
}

#[test]
fn a_ci_job_gets_exit_status_3_and_a_table_when_a_threshold_fails() {
    let (_dir, server) = site();
    let url = format!("http://{}/b.html", server.addr);
    let (code, out, err) = bench(&[
        "-n",
        "200",
        "-c",
        "4",
        "-k",
        "--threshold",
        "p99<10s",
        "--threshold",
        "errors<0.1%",
        &url,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 of 2 passed"), "{out}");
    let cgi = format!("http://{}/cgi-bin/hello.sh", server.addr);
    let (code, out, err) = bench(&["-n", "20", "--threshold", "p50<1us", &cgi]);
    assert_eq!(code, 3, "{out}{err}");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("p50<1us"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.ends_with("FAIL"), "{row}");
}
