//! tests/proxy-peers/backend.py for the proxy's test files.

// Each test file uses some of it.
#![allow(dead_code)]

use super::common::require;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A backend.py process, killed on drop.
pub struct Backend {
    child: Child,
    pub addr: SocketAddr,
}

impl Backend {
    pub fn start(args: &[&str]) -> Backend {
        require("python3", "python3");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/proxy-peers/backend.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start backend.py");
        let out = child.stdout.take().expect("backend stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("backend's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("backend.py said {line:?}"));
        Backend { child, addr }
    }
}

impl Backend {
    /// Requests the backend has received (its `/stats`, asked directly).
    pub fn requests(&self) -> u64 {
        let r = super::common::Conn::connect(self.addr)
            .request(b"GET /stats HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("stats JSON");
        v["requests"].as_u64().expect("requests")
    }

    /// Waits (up to 10 s) until the backend has received `n` requests.
    pub fn wait_requests(&self, n: u64) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.requests() < n {
            assert!(
                std::time::Instant::now() < until,
                "the backend never got {n} requests"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
