//! tests/cache_support/origin.py for the response cache's tests: an
//! application whose every response is chosen by the request's query
//! (freshness, validators, Vary, errors, slowness), with per-path request
//! counters read from its `/__count` endpoint.

// Each test file uses some of it.
#![allow(dead_code)]

use super::common::{require, Conn};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An origin.py process, killed on drop.
pub struct Origin {
    child: Child,
    pub addr: SocketAddr,
}

/// The script's path (for scripts outside the tests too).
pub fn origin_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cache_support/origin.py")
}

impl Origin {
    pub fn start() -> Origin {
        require("python3", "python3");
        let mut child = Command::new("python3")
            .arg(origin_script())
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start origin.py");
        let out = child.stdout.take().expect("origin stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("origin's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("origin.py said {line:?}"));
        Origin { child, addr }
    }

    fn counts(&self, path: &str) -> (u64, u64) {
        let r = Conn::connect(self.addr).request(
            format!("GET /__count?path={path} HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("count JSON");
        (
            v["requests"].as_u64().expect("requests"),
            v["completed"].as_u64().expect("completed"),
        )
    }

    /// Requests the origin has seen for `path` (whatever the query).
    pub fn count(&self, path: &str) -> u64 {
        self.counts(path).0
    }

    /// Responses for `path` the origin has completely written.
    pub fn completed(&self, path: &str) -> u64 {
        self.counts(path).1
    }

    /// Waits (up to `within`) until `path` has seen `n` requests.
    pub fn wait_count(&self, path: &str, n: u64, within: Duration) -> bool {
        wait_for(within, || self.count(path) >= n)
    }

    /// Waits (up to `within`) until `n` responses for `path` are written.
    pub fn wait_completed(&self, path: &str, n: u64, within: Duration) -> bool {
        wait_for(within, || self.completed(path) >= n)
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `cond` every 10 ms until it holds or `within` has passed.
pub fn wait_for(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The origin's filler: byte `i` of a body with `size=N` is `i % 251` past
/// the text line that names the request.
pub fn filler_ok(body: &[u8], from: usize) -> bool {
    body.iter()
        .enumerate()
        .skip(from)
        .all(|(i, &b)| b == (i % 251) as u8)
}

/// Where the text part of an origin body ends (after "--\n").
pub fn text_end(body: &[u8]) -> usize {
    super::common::find(body, b"\n--\n").map_or(0, |i| i + 4)
}
