//! The reverse proxy (issue 12) in front of the servlet container the seeds
//! name (apache-dynamic-content-technologies.txt §2.2): two real Tomcat 10
//! instances (Debian's `tomcat10`, each a private CATALINA_BASE set up by
//! tests/proxy-peers/tomcat/tomcat.sh on a free loopback port) as one
//! `protocol = "http"` pool with `affinity = "cookie:JSESSIONID"` and
//! active health checks.
//!
//! A JVM takes about 3 s to start, so one test owns both instances (started
//! in parallel) and runs the phases in turn, the destructive one last; each
//! phase is a function named for what it shows. The instances are stopped
//! by PID when the test ends, also on a panic.

mod common;

use common::*;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CATALINA: &str = "/usr/share/tomcat10/bin/catalina.sh";
const SERVLET_API: &str = "/usr/share/java/tomcat10-servlet-api.jar";
const SQLITE_JDBC: &str = "/usr/share/java/sqlite-jdbc.jar";
/// How long a Tomcat may take to answer /health after its JVM starts
/// (3 s by hand; the machine may be busy).
const START_LIMIT: Duration = Duration::from_secs(60);

fn tomcat_sh() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/proxy-peers/tomcat/tomcat.sh")
}

/// Fails (never skips) naming the Debian package that is missing.
fn require_tomcat() {
    require(CATALINA, "tomcat10");
    require(SERVLET_API, "libtomcat10-java");
    require(SQLITE_JDBC, "libxerial-sqlite-jdbc-java");
    require("javac", "default-jdk-headless");
    require("java", "default-jdk-headless");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One Tomcat instance: its JVM is our child (tomcat.sh `run` execs
/// catalina.sh, which execs java). Stopped on drop: SIGTERM, then SIGKILL
/// after 5 s.
struct Tomcat {
    name: String,
    addr: SocketAddr,
    base: PathBuf,
    child: Option<Child>,
}

impl Tomcat {
    /// `tomcat.sh setup` (compiles the servlets) and `tomcat.sh run`;
    /// returns once the JVM runs, before it answers.
    fn launch(base: &Path, name: &str, db: &Path) -> Tomcat {
        let port = free_port();
        let out = Command::new("sh")
            .arg(tomcat_sh())
            .args(["setup"])
            .arg(base)
            .arg(port.to_string())
            .arg(name)
            .env("TOMCAT_DB", db)
            .output()
            .expect("run tomcat.sh setup");
        assert!(
            out.status.success(),
            "tomcat.sh setup {name} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let log = File::create(base.join("logs/console.log")).expect("console.log");
        let child = Command::new("sh")
            .arg(tomcat_sh())
            .arg("run")
            .arg(base)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("console.log"))
            .stderr(log)
            .spawn()
            .expect("start tomcat.sh run");
        Tomcat {
            name: name.to_owned(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            base: base.to_owned(),
            child: Some(child),
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    fn console(&self) -> String {
        std::fs::read_to_string(self.base.join("logs/console.log")).unwrap_or_default()
    }

    /// Waits until /health answers "ok NAME" straight from the instance.
    fn wait_ready(&mut self) {
        let until = Instant::now() + START_LIMIT;
        loop {
            let ok = Conn::try_connect(self.addr).ok().and_then(|mut c| {
                c.try_send(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    .ok()?;
                c.try_read_final().ok()
            });
            if let Some(r) = ok {
                assert_eq!(r.status, 200, "{} /health: {r:?}", self.name);
                assert_eq!(r.text().trim(), format!("ok {}", self.name));
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "Tomcat {} exited at start-up ({st}):\n{}",
                    self.name,
                    self.console()
                );
            }
            assert!(
                Instant::now() < until,
                "Tomcat {} did not answer on {} within {START_LIMIT:?}:\n{}",
                self.name,
                self.addr,
                self.console()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL by PID (the test's "crash"), reaped.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Tomcat {
    fn drop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The session cookie's value from a response's Set-Cookie.
fn jsessionid(r: &Response) -> Option<String> {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .find_map(|(_, v)| {
            v.split(';')
                .next()?
                .trim()
                .strip_prefix("JSESSIONID=")
                .map(str::to_owned)
        })
}

fn counter(s: &Server, cookie: Option<&str>) -> Response {
    let c = cookie.map_or(String::new(), |v| format!("Cookie: JSESSIONID={v}\r\n"));
    s.request(
        format!("GET /app/counter HTTP/1.1\r\nHost: t\r\n{c}Connection: close\r\n\r\n").as_bytes(),
    )
}

/// The seeds' Figure 2 through the proxy: a form POSTed to the servlet is
/// stored in SQLite (through JDBC) and listed back by a GET, whichever
/// instance each request reaches (both share the database file).
fn figure_2_a_form_posted_through_stoa_is_stored_and_listed_back(s: &Server) {
    let form = "name=Ada&email=ada%40example.org&comments=Servlets+%3C3+proxies";
    let r = s.request(
        format!(
            "POST /app/comments HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "POST /app/comments: {r:?}\n{}", s.stderr());
    assert!(r.text().contains("All done ok"), "{}", r.text());
    assert!(r.header("x-instance").is_some(), "{r:?}");
    for _ in 0..2 {
        let r = s.get("/app/comments");
        assert_eq!(r.status, 200, "GET /app/comments: {r:?}");
        assert!(
            r.text()
                .contains("<li>Ada &lt;ada@example.org&gt;: Servlets &lt;3 proxies</li>"),
            "the comment is not listed (from {:?}): {}",
            r.header("x-instance"),
            r.text()
        );
    }
}

/// `affinity = "cookie:JSESSIONID"`: a client holding a session keeps
/// reaching the instance that holds it (the counter goes 1, 2, 3... and the
/// session id's `.tcN` route suffix stays) from its second request on,
/// several clients' sessions end up on both instances, and clients without
/// a cookie are balanced. (Hashing alone sent half the new sessions'
/// second requests to the other instance, which made a new session: Stoa
/// now learns the cookie from the `Set-Cookie` of the instance that made
/// it.)
fn sessions_stick_to_their_instance_and_clients_without_one_are_balanced(s: &Server) {
    let mut owners = Vec::new();
    for client in 0..6 {
        let r = counter(s, None);
        assert_eq!(r.status, 200, "{r:?}\n{}", s.stderr());
        let id = jsessionid(&r).unwrap_or_else(|| panic!("no JSESSIONID set: {r:?}"));
        let owner = r.header("x-instance").unwrap_or("").to_owned();
        assert!(
            id.ends_with(&format!(".{owner}")),
            "session {id} from {owner}"
        );
        assert!(r.text().starts_with("count=1 "), "{}", r.text());
        for n in 2..=5 {
            let r = counter(s, Some(&id));
            assert_eq!(r.status, 200, "{r:?}");
            assert_eq!(
                (r.header("x-instance").unwrap_or(""), jsessionid(&r)),
                (owner.as_str(), None),
                "client {client}: request {n} with session {id} (made by {owner}) left it: {}",
                r.text()
            );
            assert!(
                r.text().starts_with(&format!("count={n} session={id} ")),
                "client {client}: request {n}: {}",
                r.text()
            );
        }
        owners.push(owner);
    }
    let balanced: Vec<String> = (0..8)
        .map(|_| {
            let r = s.get("/app/headers");
            assert_eq!(r.status, 200, "{r:?}");
            r.header("x-instance").unwrap_or("").to_owned()
        })
        .collect();
    for name in ["tc1", "tc2"] {
        assert!(
            balanced.iter().any(|n| n == name),
            "no cookie-less request reached {name}: {balanced:?}"
        );
        assert!(
            owners.iter().any(|n| n == name),
            "no session was made by {name}: {owners:?}"
        );
    }
}

/// One request of the load: when it started and ended, its method and how
/// it went (a status, or the client's error).
struct Done {
    start: Instant,
    end: Instant,
    post: bool,
    outcome: Result<u16, String>,
}

/// Four clients loop on kept-alive connections (GET and POST in turn)
/// until `stop`.
fn load(addr: SocketAddr, stop: Arc<AtomicBool>, client: usize) -> Vec<Done> {
    let mut done = Vec::new();
    let mut conn: Option<Conn> = None;
    let mut k = 0usize;
    let limit = Instant::now() + Duration::from_secs(30);
    while !stop.load(Ordering::Relaxed) && Instant::now() < limit {
        k += 1;
        let post = k.is_multiple_of(2);
        let req = if post {
            let form = format!("name=load{client}&email=&comments=n{k}");
            format!(
                "POST /app/comments HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
                form.len()
            )
        } else {
            "GET /app/headers HTTP/1.1\r\nHost: t\r\n\r\n".to_owned()
        };
        let start = Instant::now();
        let outcome = (|| {
            if conn.is_none() {
                conn = Some(Conn::try_connect(addr).map_err(|e| format!("connect: {e}"))?);
            }
            let c = conn.as_mut().ok_or("no connection")?;
            c.try_send(req.as_bytes())
                .map_err(|e| format!("send: {e}"))?;
            let r = c.try_read_final().map_err(|e| format!("read: {e}"))?;
            if r.header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close"))
            {
                conn = None;
            }
            Ok(r.status)
        })();
        if !matches!(outcome, Ok(200)) {
            conn = None;
        }
        done.push(Done {
            start,
            end: Instant::now(),
            post,
            outcome,
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    done
}

/// Killing an instance (SIGKILL by PID) under a small load fails at most
/// the requests it had in flight (those started before the kill and not
/// finished when it was done; GETs among them may be sent again, so only
/// POSTs should fail), and the pool's health checks take it out of
/// rotation: afterwards every request goes to the survivor at once,
/// without a connection attempt to the dead one.
fn killing_an_instance_under_load_fails_only_its_in_flight_requests_and_health_checks_take_it_out(
    s: &Server,
    victim: &mut Tomcat,
    survivor: &Tomcat,
    victim_index: usize,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let stop = stop.clone();
            let addr = s.addr;
            std::thread::spawn(move || load(addr, stop, i))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let log_at = s.stderr().len();
    let kill_at = Instant::now();
    victim.kill();
    let dead_at = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let done: Vec<Done> = clients
        .into_iter()
        .flat_map(|t| t.join().expect("a load client panicked"))
        .collect();
    let before = done.iter().filter(|d| d.end < kill_at).count();
    let after: Vec<&Done> = done.iter().filter(|d| d.start > dead_at).collect();
    assert!(
        before >= 20 && after.len() >= 20,
        "too little load: {before} requests before the kill, {} after\n{}",
        after.len(),
        s.stderr()
    );
    let failed: Vec<&Done> = done
        .iter()
        .filter(|d| !matches!(d.outcome, Ok(200)))
        .collect();
    let describe = |d: &&Done| {
        format!(
            "{} {:?} from {:?} to {:?} after the kill",
            if d.post { "POST" } else { "GET" },
            d.outcome,
            d.start
                .checked_duration_since(kill_at)
                .map_or_else(|| format!("-{:?}", kill_at - d.start), |t| format!("{t:?}")),
            d.end.saturating_duration_since(kill_at)
        )
    };
    for d in &failed {
        assert!(
            d.start <= dead_at && d.end >= kill_at,
            "a request not in flight at the kill failed: {}\n{}",
            describe(d),
            s.stderr()
        );
    }
    // One request in flight per client at most.
    assert!(
        failed.len() <= 4,
        "{:?}",
        failed.iter().map(describe).collect::<Vec<_>>()
    );
    eprintln!(
        "kill under load: {} requests, {} failed ({}), {} sent after the kill all answered by {}",
        done.len(),
        failed.len(),
        failed.iter().map(describe).collect::<Vec<_>>().join("; "),
        after.len(),
        survivor.name
    );

    // Active health: the dead one is out of rotation...
    assert!(
        s.wait_stderr(
            log_at,
            &format!("#{victim_index} failed 2 health checks in a row; out of rotation"),
            Duration::from_secs(5)
        ),
        "the health checks did not take {} out:\n{}",
        victim.name,
        s.stderr()
    );
    // ...so no request tries it any more: every one reaches the survivor
    // without a connection error logged for the dead one.
    let quiet_from = s.stderr().len();
    for i in 0..10 {
        let r = s.get(&format!("/app/headers?after={i}"));
        assert_eq!(r.status, 200, "{r:?}\n{}", s.stderr());
        assert_eq!(r.header("x-instance"), Some(survivor.name.as_str()));
    }
    let later = s.stderr()[quiet_from..].to_owned();
    assert!(
        !later.contains(&format!("server #{victim_index}")),
        "the dead server was still tried:\n{later}"
    );
}

#[test]
fn issue_12_two_tomcat_10_instances_behind_stoa_store_forms_keep_sessions_and_survive_losing_one() {
    require_tomcat();
    let started = Instant::now();
    let dir = TempDir::new("proxy-tomcat");
    let db = dir.join("comments.db");
    // Both JVMs start at once (setup compiles the servlets, then `run`).
    let (a, b) = (dir.join("tc1"), dir.join("tc2"));
    let (db1, db2) = (db.clone(), db.clone());
    let t1 = std::thread::spawn(move || Tomcat::launch(&a, "tc1", &db1));
    let t2 = std::thread::spawn(move || Tomcat::launch(&b, "tc2", &db2));
    let mut tc1 = t1.join().expect("setting up tc1");
    let mut tc2 = t2.join().expect("setting up tc2");
    tc1.wait_ready();
    tc2.wait_ready();
    eprintln!(
        "tc1 (PID {}) and tc2 (PID {}) answered after {:?}",
        tc1.pid(),
        tc2.pid(),
        started.elapsed()
    );

    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"tomcat\"\nprotocol = \"http\"\naddress = [\"{}\", \"{}\"]\naffinity = \"cookie:JSESSIONID\"\ntimeout = \"10s\"\nhealth = {{ path = \"/health\", interval = \"200ms\", timeout = \"1s\", fails = 2, passes = 2 }}\n\n[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nproxy = {{ pool = \"tomcat\", strip_prefix = true }}\n",
            tc1.addr, tc2.addr
        ),
    );
    let s = Server::with_config(&cfg);

    figure_2_a_form_posted_through_stoa_is_stored_and_listed_back(&s);
    sessions_stick_to_their_instance_and_clients_without_one_are_balanced(&s);
    // Server #1 of the pool is tc2.
    killing_an_instance_under_load_fails_only_its_in_flight_requests_and_health_checks_take_it_out(
        &s, &mut tc2, &tc1, 1,
    );
    eprintln!("the whole test took {:?}", started.elapsed());
}
