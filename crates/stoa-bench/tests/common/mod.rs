//! A test server that injects faults, chosen by the request path, and
//! helpers to run `stoa bench` in-process.
//!
//! Paths (query `?ms=N`, `?n=N` where it says):
//! - `/ok?n=N`: 200 with an N-byte body (default 1358), Content-Length.
//! - `/slow?ms=N`: the same after sleeping N ms.
//! - `/chunked?n=N`: 200 with a chunked body of N data bytes (in 3 chunks).
//! - `/status?code=C`: status C with a short body.
//! - `/short`: Content-Length 100, 50 bytes, then close.
//! - `/reset`: reads the request, then resets the connection (RST).
//! - `/close`: reads the request, closes without a byte.
//! - `/garbage`: answers something that is not HTTP.
//! - `/hang`: reads the request and never answers (until the client goes).
//! - `/var`: the first response has 10 body bytes, every later one 20.
//! - `/stall-once?ms=N&at=K`: the K-th request to this path sleeps N ms.
//! - `/close-after`: 200 that keeps the connection alive, then closes it
//!   (a server-side keep-alive timeout racing the next request).
//!
//! - `/files/...`: 200 with 100 bytes (for workload trees).
//!
//! Every request path is recorded (in arrival order), and every request
//! line with its connection number.

#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

pub struct TestServer {
    pub addr: SocketAddr,
    pub paths: Arc<Mutex<Vec<String>>>,
    /// (connection number, request line) of every request.
    pub requests: Arc<Mutex<Vec<(u64, String)>>>,
    /// The time each `/slow` response really took in the server, from the
    /// request's last byte to the start of the response's write.
    pub delays: Arc<Mutex<Vec<Duration>>>,
    /// Every request: (path, header lines, body).
    pub full: Arc<Mutex<Vec<FullRequest>>>,
    stop: Arc<AtomicBool>,
}

pub type FullRequest = (String, Vec<String>, Vec<u8>);
type Shared = (
    Arc<Mutex<Vec<String>>>,
    Arc<Mutex<Vec<Duration>>>,
    Arc<Mutex<Vec<(u64, String)>>>,
    Arc<Mutex<Vec<FullRequest>>>,
);

impl TestServer {
    pub fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let paths = Arc::new(Mutex::new(Vec::new()));
        let delays = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let full = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let (p, s, dl, rq, fu) = (
            paths.clone(),
            stop.clone(),
            delays.clone(),
            requests.clone(),
            full.clone(),
        );
        thread::spawn(move || {
            for (id, conn) in listener.incoming().enumerate() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let shared = (p.clone(), dl.clone(), rq.clone(), fu.clone());
                let (s, c) = (s.clone(), counters.clone());
                thread::spawn(move || serve(conn, id as u64, shared, s, c));
            }
        });
        TestServer {
            addr,
            paths,
            requests,
            delays,
            full,
            stop,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn query(path: &str, key: &str) -> Option<u64> {
    let q = path.split_once('?')?.1;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

fn body(n: u64) -> Vec<u8> {
    (0..n)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz\n"[(i % 27) as usize])
        .collect()
}

fn serve(
    conn: TcpStream,
    id: u64,
    (paths, delays, requests, full): Shared,
    stop: Arc<AtomicBool>,
    counters: Arc<(AtomicU64, AtomicU64)>,
) {
    let _ = conn.set_nodelay(true);
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut parts = line.split_whitespace();
        let (method, path, version) = match (parts.next(), parts.next(), parts.next()) {
            (Some(m), Some(p), Some(v)) => (m.to_string(), p.to_string(), v.to_string()),
            _ => return,
        };
        let mut len = 0usize;
        let mut conn_hdr = String::new();
        let mut lines = Vec::new();
        loop {
            let mut h = String::new();
            match r.read_line(&mut h) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
            lines.push(h.trim_end().to_string());
            if let Some((k, v)) = h.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    len = v.trim().parse().unwrap_or(0);
                } else if k == "connection" {
                    conn_hdr = v.trim().to_ascii_lowercase();
                }
            }
        }
        let mut discard = vec![0; len];
        if r.read_exact(&mut discard).is_err() {
            return;
        }
        paths.lock().expect("paths lock").push(path.clone());
        full.lock()
            .expect("full lock")
            .push((path.clone(), lines, discard.clone()));
        requests
            .lock()
            .expect("requests lock")
            .push((id, format!("{method} {path} body={len}")));
        let http10 = version == "HTTP/1.0";
        let keep = if http10 {
            conn_hdr.contains("keep-alive")
        } else {
            !conn_hdr.contains("close")
        };
        let conn_line = if keep {
            if http10 {
                "Connection: keep-alive\r\n"
            } else {
                ""
            }
        } else {
            "Connection: close\r\n"
        };
        let route = path.split('?').next().unwrap_or("").to_string();
        let respond = |out: &mut TcpStream, status: &str, b: &[u8]| -> bool {
            let head = format!(
                "HTTP/1.1 {status}\r\nServer: fault-server\r\nContent-Length: {}\r\n{conn_line}\r\n",
                b.len()
            );
            let mut all = head.into_bytes();
            if method != "HEAD" {
                all.extend_from_slice(b);
            }
            out.write_all(&all).is_ok()
        };
        let route = if route.starts_with("/files/") {
            "/files/".to_string()
        } else {
            route
        };
        let ok = match route.as_str() {
            "/files/" => respond(&mut out, "200 OK", &body(100)),
            "/ok" | "/" => respond(&mut out, "200 OK", &body(query(&path, "n").unwrap_or(1358))),
            "/slow" => {
                let t0 = std::time::Instant::now();
                thread::sleep(Duration::from_millis(query(&path, "ms").unwrap_or(50)));
                // Stamped before the write: a stamp after it can come after
                // the client's own (this thread preempted between the two on
                // a loaded machine), and the delay is a floor for the client.
                let took = t0.elapsed();
                let ok = respond(&mut out, "200 OK", &body(query(&path, "n").unwrap_or(100)));
                delays.lock().expect("delays lock").push(took);
                ok
            }
            "/chunked" => {
                let n = query(&path, "n").unwrap_or(1000) as usize;
                let b = body(n as u64);
                let mut all = format!(
                    "HTTP/1.1 200 OK\r\nServer: fault-server\r\nTransfer-Encoding: chunked\r\n{conn_line}\r\n"
                )
                .into_bytes();
                let third = n / 3;
                for part in [&b[..third], &b[third..2 * third], &b[2 * third..]] {
                    if !part.is_empty() {
                        all.extend_from_slice(format!("{:x};ext=1\r\n", part.len()).as_bytes());
                        all.extend_from_slice(part);
                        all.extend_from_slice(b"\r\n");
                    }
                }
                all.extend_from_slice(b"0\r\nX-Trailer: 1\r\n\r\n");
                out.write_all(&all).is_ok()
            }
            "/status" => {
                let code = query(&path, "code").unwrap_or(500);
                respond(&mut out, &format!("{code} Test"), b"status body\n")
            }
            "/short" => {
                let _ = out.write_all(
                    b"HTTP/1.1 200 OK\r\nServer: fault-server\r\nContent-Length: 100\r\n\r\n",
                );
                let _ = out.write_all(&body(50));
                return;
            }
            "/reset" => {
                let _ = socket2::SockRef::from(&out).set_linger(Some(Duration::ZERO));
                return;
            }
            "/close" => return,
            "/garbage" => {
                let _ = out.write_all(b"HELLO WORLD\r\n\r\n");
                return;
            }
            "/hang" => {
                let mut buf = [0u8; 64];
                let _ = out.set_read_timeout(Some(Duration::from_millis(100)));
                for _ in 0..300 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    match r.get_mut().read(&mut buf) {
                        Ok(0) => return,
                        Ok(_) => {}
                        Err(_) => {}
                    }
                }
                return;
            }
            "/var" => {
                let i = counters.0.fetch_add(1, Ordering::Relaxed);
                respond(&mut out, "200 OK", &body(if i == 0 { 10 } else { 20 }))
            }
            "/stall-once" => {
                let i = counters.1.fetch_add(1, Ordering::Relaxed);
                if i == query(&path, "at").unwrap_or(10) {
                    thread::sleep(Duration::from_millis(query(&path, "ms").unwrap_or(300)));
                }
                respond(&mut out, "200 OK", &body(100))
            }
            "/close-after" => {
                // Says keep-alive, then closes: a keep-alive timeout racing
                // the client's next request.
                let _ = respond(&mut out, "200 OK", &body(100));
                return;
            }
            _ => respond(&mut out, "404 Not Found", b"not found\n"),
        };
        if !ok || !keep {
            return;
        }
    }
}

/// Runs `stoa bench ARGS` in-process: (exit status, stdout, stderr).
pub fn bench(args: &[&str]) -> (u8, String, String) {
    let mut a: Vec<OsString> = vec!["stoa bench".into()];
    a.extend(args.iter().map(OsString::from));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = stoa_bench::run(&a, &mut out, &mut err);
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// A fresh temporary directory for one test.
pub fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("stoa-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// Runs with `--json` and returns the parsed summary and the exit status.
pub fn bench_json(name: &str, args: &[&str]) -> (u8, serde_json::Value, String) {
    let d = tmpdir(name);
    let j = d.join("out.json");
    let js = j.to_string_lossy().into_owned();
    let mut a: Vec<&str> = args.to_vec();
    a.push("--json");
    a.push(&js);
    let (code, out, err) = bench(&a);
    let v = std::fs::read(&j)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (code, v, format!("{out}\n{err}"))
}
