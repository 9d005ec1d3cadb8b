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
    let (code, v, out) = bench_json("levels-fail", &["-n", "6", "-c", "2", &s.url("/reset")]);
    assert_eq!(code, 1, "{out}");
    let levels = v["levels"].as_array().expect("levels");
    let errors: u64 = levels
        .iter()
        .map(|l| l["errors"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(errors, 6, "{out}");
    assert!(levels.iter().all(|l| l["mean_ms"].is_null()), "{out}");
}
