//! The application library's blocking driver on real sockets, in a thread
//! (or a child process for fd 0), spoken to by the gateway state machine
//! over a std `UnixStream`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stoa_fastcgi::app::blocking::{self, Listener, Output};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::gateway::{Connection, Event};
use stoa_fastcgi::{ProtocolStatus, Role, Values};

fn socket_path(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "stoa-fcgi-{}-{}-{name}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&p);
    p
}

/// Starts the driver on a fresh Unix socket in a thread.
fn start_app<H: blocking::Handler>(settings: Settings, handler: H) -> PathBuf {
    let path = socket_path("app");
    let listener = UnixListener::bind(&path).unwrap();
    thread::spawn(move || blocking::serve(Listener::Unix(listener), settings, handler));
    path
}

fn settings(multiplex: bool) -> Settings {
    Settings {
        max_conns: 4,
        max_reqs: 16,
        multiplex,
        roles: vec![Role::Responder, Role::Authorizer, Role::Filter],
        ..Settings::default()
    }
}

/// The test application: echoes for a Responder, checks a token for an
/// Authorizer, upper-cases FCGI_DATA for a Filter.
fn echo(req: &Request, out: &mut Output) -> u32 {
    match req.role {
        Role::Authorizer => {
            if req.param("HTTP_AUTHORIZATION") == Some("Bearer good") {
                let _ = out.write_all(b"Status: 200\r\nVariable-USER: bob\r\n\r\n");
                0
            } else {
                let _ = out.write_all(b"Status: 401\r\nContent-Type: text/plain\r\n\r\nno\n");
                0
            }
        }
        Role::Filter => {
            let _ = out.write_all(b"Content-Type: text/plain\r\n\r\n");
            let _ = out.write_all(&req.data.to_ascii_uppercase());
            0
        }
        _ => {
            if let Some(w) = req.param("WARN") {
                let _ = out.stderr(w.as_bytes());
            }
            let _ = write!(
                out,
                "Content-Type: text/plain\r\n\r\nid={} tag={} len={}\n",
                req.id,
                req.param("TAG").unwrap_or(""),
                req.stdin.len()
            );
            let _ = out.write_all(&req.stdin);
            req.param("STATUS")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        }
    }
}

#[derive(Debug, Default)]
struct Reply {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    end: Option<(u32, ProtocolStatus)>,
}

struct Client {
    stream: UnixStream,
    conn: Connection,
    out: Vec<u8>,
    replies: HashMap<u16, Reply>,
    values: Vec<Values>,
    eof: bool,
}

impl Client {
    /// Connects, then unlinks the socket file: each test connects once.
    fn connect(path: &PathBuf) -> Client {
        let stream = UnixStream::connect(path).unwrap();
        let _ = std::fs::remove_file(path);
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            stream,
            conn: Connection::new(),
            out: Vec::new(),
            replies: HashMap::new(),
            values: Vec::new(),
            eof: false,
        }
    }

    /// Starts a request with the whole body and the end of stdin.
    fn request(
        &mut self,
        role: Role,
        keep_conn: bool,
        params: &[(&str, &str)],
        body: &[u8],
    ) -> u16 {
        let id = self
            .conn
            .start_request(role, keep_conn, params.iter().copied(), &mut self.out)
            .unwrap();
        self.conn.stdin(id, body, &mut self.out).unwrap();
        self.conn.end_stdin(id, &mut self.out).unwrap();
        id
    }

    fn flush(&mut self) {
        self.stream.write_all(&self.out).unwrap();
        self.out.clear();
    }

    /// Reads until `done` holds or the application closes.
    fn read_until(&mut self, done: impl Fn(&Client) -> bool) {
        self.flush();
        let mut buf = vec![0u8; 65536];
        while !done(self) {
            let n = self.stream.read(&mut buf).expect("read (timed out?)");
            if n == 0 {
                self.conn.eof().unwrap();
                self.eof = true;
                return;
            }
            self.conn.feed(&buf[..n]).unwrap();
            while let Some(ev) = self.conn.poll_event() {
                match ev {
                    Event::Stdout { id, data } => {
                        self.replies.entry(id).or_default().stdout.extend(data)
                    }
                    Event::Stderr { id, data } => {
                        self.replies.entry(id).or_default().stderr.extend(data)
                    }
                    Event::End {
                        id,
                        app_status,
                        protocol_status,
                    } => {
                        self.replies.entry(id).or_default().end =
                            Some((app_status, protocol_status))
                    }
                    Event::Values(v) => self.values.push(v),
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
    }

    /// Waits for the ends of `ids` and takes their replies.
    fn wait(&mut self, ids: &[u16]) -> Vec<Reply> {
        self.read_until(|c| {
            ids.iter()
                .all(|id| c.replies.get(id).is_some_and(|r| r.end.is_some()))
        });
        ids.iter()
            .map(|id| self.replies.remove(id).expect("a reply"))
            .collect()
    }
}

fn text(r: &Reply) -> String {
    String::from_utf8_lossy(&r.stdout).into_owned()
}

const COMPLETE: ProtocolStatus = ProtocolStatus::RequestComplete;

#[test]
fn several_requests_in_turn_on_one_kept_connection_with_bodies_of_0_1_and_10m_bytes_spec_3_5() {
    let path = start_app(settings(false), echo);
    let mut c = Client::connect(&path);
    let big: Vec<u8> = (0..10 << 20).map(|i| (i % 251) as u8).collect();
    for (tag, body) in [("zero", &b""[..]), ("one", b"x"), ("big", &big[..])] {
        let len = body.len().to_string();
        let id = c.request(
            Role::Responder,
            true,
            &[("TAG", tag), ("CONTENT_LENGTH", &len)],
            body,
        );
        assert_eq!(id, 1, "the id is reused once the last request ended");
        let r = c.wait(&[id]).pop().unwrap();
        assert_eq!(r.end, Some((0, COMPLETE)));
        let head = format!("Content-Type: text/plain\r\n\r\nid=1 tag={tag} len={len}\n");
        assert!(r.stdout.starts_with(head.as_bytes()), "{tag}");
        assert_eq!(&r.stdout[head.len()..], body, "{tag}");
    }
    // GET_VALUES on the same connection, between requests.
    c.conn.query_values(&mut c.out);
    c.read_until(|c| !c.values.is_empty());
    assert_eq!(
        c.values[0],
        Values {
            max_conns: Some(4),
            max_reqs: Some(16),
            mpxs_conns: Some(false)
        }
    );
}

#[test]
fn multiplexed_requests_run_concurrently_on_one_connection_spec_3_3() {
    let barrier = Arc::new(Barrier::new(4));
    let b = barrier.clone();
    let path = start_app(settings(true), move |req: &Request, out: &mut Output| {
        if req.param("BARRIER").is_some() {
            // Only passes if all four handlers run at once.
            b.wait();
        }
        echo(req, out)
    });
    let mut c = Client::connect(&path);
    c.conn.query_values(&mut c.out);
    c.read_until(|c| !c.values.is_empty());
    assert_eq!(c.values[0].mpxs_conns, Some(true));
    c.conn.set_max_concurrent(4);
    for round in 0..2 {
        let tags = ["a", "b", "c", "d"];
        let ids: Vec<u16> = tags
            .iter()
            .map(|t| {
                c.request(
                    Role::Responder,
                    true,
                    &[("TAG", t), ("BARRIER", "1"), ("WARN", t)],
                    t.repeat(100_000).as_bytes(),
                )
            })
            .collect();
        assert_eq!(ids, [1, 2, 3, 4], "round {round}: ids from 1, reused");
        for (r, t) in c.wait(&ids).iter().zip(tags) {
            assert_eq!(r.end, Some((0, COMPLETE)));
            assert!(text(r).contains(&format!("tag={t} len=100000\n")));
            assert!(r.stdout.ends_with(t.repeat(100_000).as_bytes()));
            assert_eq!(r.stderr, t.as_bytes());
        }
    }
}

#[test]
fn a_second_request_to_an_application_that_does_not_multiplex_gets_cant_mpx_conn_spec_5_5() {
    let (release, hold) = mpsc::channel::<()>();
    let hold = Mutex::new(hold);
    let path = start_app(settings(false), move |req: &Request, out: &mut Output| {
        if req.param("HOLD").is_some() {
            let _ = hold.lock().unwrap().recv_timeout(Duration::from_secs(20));
        }
        echo(req, out)
    });
    let mut c = Client::connect(&path);
    c.conn.set_max_concurrent(2);
    let first = c.request(Role::Responder, true, &[("TAG", "1"), ("HOLD", "1")], b"");
    let second = c.request(Role::Responder, true, &[("TAG", "2")], b"");
    let r = c.wait(&[second]).pop().unwrap();
    assert_eq!(r.end, Some((0, ProtocolStatus::CantMpxConn)));
    assert!(r.stdout.is_empty());
    assert_eq!(c.conn.max_concurrent(), 1);
    release.send(()).unwrap();
    let r = c.wait(&[first]).pop().unwrap();
    assert_eq!(r.end, Some((0, COMPLETE)));
    assert!(text(&r).contains("tag=1"));
    // The refused request goes again once the connection is free.
    let again = c.request(Role::Responder, true, &[("TAG", "2")], b"");
    assert!(text(&c.wait(&[again])[0]).contains("tag=2"));
}

#[test]
fn an_authorizer_answers_200_with_variables_or_denies_without_any_stdin_spec_6_3() {
    let path = start_app(settings(false), echo);
    let mut c = Client::connect(&path);
    for (token, want) in [
        ("Bearer good", "Status: 200\r\nVariable-USER: bob\r\n\r\n"),
        ("Bearer bad", "Status: 401\r\n"),
    ] {
        // No FCGI_STDIN at all: the application must not wait for it.
        let id = c
            .conn
            .start_request(
                Role::Authorizer,
                true,
                [("HTTP_AUTHORIZATION", token), ("REQUEST_METHOD", "GET")],
                &mut c.out,
            )
            .unwrap();
        let r = c.wait(&[id]).pop().unwrap();
        assert_eq!(r.end, Some((0, COMPLETE)));
        assert!(text(&r).starts_with(want), "{token}: {}", text(&r));
    }
}

#[test]
fn a_filter_gets_stdin_then_its_data_stream_spec_6_4() {
    let path = start_app(settings(true), echo);
    let mut c = Client::connect(&path);
    let id = c
        .conn
        .start_request(Role::Filter, true, [("FCGI_DATA_LENGTH", "11")], &mut c.out)
        .unwrap();
    c.conn.end_stdin(id, &mut c.out).unwrap();
    c.conn.data(id, b"hello ", &mut c.out).unwrap();
    c.conn.data(id, b"world", &mut c.out).unwrap();
    c.conn.end_data(id, &mut c.out).unwrap();
    let r = c.wait(&[id]).pop().unwrap();
    assert_eq!(text(&r), "Content-Type: text/plain\r\n\r\nHELLO WORLD");
}

#[test]
fn without_keep_conn_the_application_closes_after_the_request_spec_3_5() {
    let path = start_app(settings(true), echo);
    let mut c = Client::connect(&path);
    let id = c.request(
        Role::Responder,
        false,
        &[("TAG", "x"), ("STATUS", "5")],
        b"",
    );
    let r = c.wait(&[id]).pop().unwrap();
    assert_eq!(r.end, Some((5, COMPLETE)));
    c.read_until(|_| false);
    assert!(c.eof, "the application closed the connection");
}

#[test]
fn a_role_the_application_does_not_offer_gets_unknown_role_spec_5_5() {
    let path = start_app(
        Settings {
            roles: vec![Role::Responder],
            ..settings(true)
        },
        echo,
    );
    let mut c = Client::connect(&path);
    c.conn.set_max_concurrent(2);
    let a = c.request(Role::Filter, true, &[], b"");
    let b = c.request(Role::Other(9), true, &[], b"");
    for r in c.wait(&[a, b]) {
        assert_eq!(r.end, Some((0, ProtocolStatus::UnknownRole)));
    }
    // The connection still serves the role it offers.
    let ok = c.request(Role::Responder, true, &[("TAG", "ok")], b"");
    assert!(text(&c.wait(&[ok])[0]).contains("tag=ok"));
}

#[test]
fn an_abort_reaches_a_running_handler_spec_5_4() {
    let path = start_app(settings(true), |_: &Request, out: &mut Output| {
        let _ = out.write_all(b"Content-Type: text/plain\r\n\r\nworking");
        let _ = out.flush();
        let t = Instant::now();
        while !out.is_aborted() && t.elapsed() < Duration::from_secs(20) {
            thread::sleep(Duration::from_millis(2));
        }
        if out.is_aborted() {
            3
        } else {
            0
        }
    });
    let mut c = Client::connect(&path);
    let id = c.request(Role::Responder, true, &[], b"");
    c.read_until(|c| c.replies.get(&1).is_some_and(|r| !r.stdout.is_empty()));
    c.conn.abort(id, &mut c.out).unwrap();
    let r = c.wait(&[id]).pop().unwrap();
    assert_eq!(r.end, Some((3, COMPLETE)));
}

#[test]
fn a_panicking_handler_still_ends_its_request() {
    let path = start_app(settings(true), |req: &Request, out: &mut Output| {
        if req.param("PANIC").is_some() {
            panic!("test panic");
        }
        echo(req, out)
    });
    let mut c = Client::connect(&path);
    let id = c.request(Role::Responder, true, &[("PANIC", "1")], b"");
    let r = c.wait(&[id]).pop().unwrap();
    assert_eq!(r.end, Some((1, COMPLETE)));
    assert!(!r.stderr.is_empty());
    let id = c.request(Role::Responder, true, &[("TAG", "after")], b"");
    assert!(text(&c.wait(&[id])[0]).contains("tag=after"));
}

#[test]
fn a_tcp_listener_accepts_only_fcgi_web_server_addrs_spec_3_2() {
    for (allowed, served) in [("127.0.0.1", true), ("10.9.9.9", false)] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let s = Settings {
            web_server_addrs: Some(vec![allowed.parse().unwrap()]),
            ..settings(true)
        };
        thread::spawn(move || blocking::serve(Listener::Tcp(l), s, echo));
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut conn = Connection::new();
        let mut out = Vec::new();
        let id = conn
            .start_request(Role::Responder, true, [("TAG", "tcp")], &mut out)
            .unwrap();
        conn.end_stdin(id, &mut out).unwrap();
        let _ = stream.write_all(&out);
        let mut buf = vec![0u8; 4096];
        let mut ended = false;
        while !ended {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    conn.feed(&buf[..n]).unwrap();
                    while let Some(ev) = conn.poll_event() {
                        ended |= matches!(ev, Event::End { .. });
                    }
                }
            }
        }
        assert_eq!(ended, served, "{allowed}");
    }
}

/// Not a test of its own: the body of the child process that
/// `an_application_started_with_its_listening_socket_as_fd_0_serves_spec_2_2`
/// starts from this test binary.
#[test]
fn fd0_child_app() {
    if std::env::var_os("STOA_FCGI_FD0_CHILD").is_none() {
        return;
    }
    let r = blocking::run(settings(false), echo);
    panic!("run returned {r:?}");
}

#[test]
fn an_application_started_with_its_listening_socket_as_fd_0_serves_spec_2_2() {
    let path = socket_path("fd0");
    let listener = UnixListener::bind(&path).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fd0_child_app",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STOA_FCGI_FD0_CHILD", "1")
        .stdin(Stdio::from(OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut c = Client::connect(&path);
    c.conn.query_values(&mut c.out);
    c.read_until(|c| !c.values.is_empty());
    assert_eq!(c.values[0].mpxs_conns, Some(false));
    let id = c.request(Role::Responder, true, &[("TAG", "fd0")], b"hi");
    let r = c.wait(&[id]).pop().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(text(&r).contains("tag=fd0 len=2\nhi"), "{}", text(&r));
}
