//! The lab's table application (`stoa demo-app table`, issue 15) on
//! PostgreSQL: a private cluster made by the test, the application as a
//! Stoa [[pool]] with `STOA_TABLE_PG`. FastCGI 1.0 §1: the application
//! process is persistent, so it keeps its database connection across
//! requests (the seeds' Figure 1 application does, and the lab measures
//! it); the page is byte for byte the one every version of the lab writes.

mod common;

use common::postgres::Cluster;
use common::*;
use std::time::{Duration, Instant};

const HEAD: &str = "<html><head><title>comments</title></head><body>\n<table>\n\
                    <tr><th>name</th><th>email</th><th>comments</th></tr>\n";
const FOOT: &str = "</table>\n</body></html>\n";

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The backends the application holds (its connections carry
/// `application_name=stoa-table`).
fn backends(c: &Cluster) -> Vec<String> {
    let out = c.psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'stoa-table'");
    out.lines().map(str::to_owned).collect()
}

#[test]
fn issue_15_the_rust_table_app_keeps_one_postgresql_connection_answers_byte_for_byte_and_reconnects(
) {
    let dir = TempDir::new("table-pg");
    let cluster = Cluster::start(&dir);
    cluster.psql(
        "CREATE TABLE comments (name TEXT, email TEXT, comments TEXT);
         CREATE TABLE b1 (name TEXT, email TEXT, comments TEXT);
         INSERT INTO b1 VALUES ('Reader 1', 'r1@example.org', 'one & <two> \"three\"'),
                               ('Zoë', 'z@example.org', 'café');",
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"t\"\ncommand = [\"{{stoa}}\", \"demo-app\", \"table\"]\n\
             processes = 1\nenv = {{ STOA_TABLE_PG = {:?} }}\n\
             [[site]]\n[[site.route]]\nprefix = \"/t/\"\nfastcgi = {{ pool = \"t\" }}\n",
            format!("{} application_name=stoa-table", cluster.conninfo())
        ),
    );
    let s = Server::with_config(&cfg);
    let b1 = format!(
        "{HEAD}<tr><td>Reader 1</td><td>r1@example.org</td><td>one &amp; &lt;two&gt; &quot;three&quot;</td></tr>\n\
         <tr><td>Zoë</td><td>z@example.org</td><td>café</td></tr>\n{FOOT}"
    );

    // Select *: the page, byte for byte.
    let r = s.get("/t/?t=b1&db=pg");
    assert_eq!(r.status, 200, "{}\n{}", r.text(), s.stderr());
    assert_eq!(r.text(), b1);
    let pid = backends(&cluster);
    assert_eq!(pid.len(), 1, "one connection: {pid:?}");

    // A POST is inserted with bound parameters: SQL in a value is data.
    let r = s.request(&post(
        "/t/?db=pg",
        "name=O%27Brien%27%3B+DROP+TABLE+b1%3B+--&email=o%40x&comments=%3Cb%3Ehi%3C%2Fb%3E",
    ));
    assert_eq!(r.status, 200, "{}\n{}", r.text(), s.stderr());
    assert_eq!(r.text(), "All done OK\n");
    assert_eq!(
        cluster.psql("SELECT name || '|' || email || '|' || comments FROM comments"),
        "O'Brien'; DROP TABLE b1; --|o@x|<b>hi</b>"
    );
    assert_eq!(
        s.get("/t/?db=pg").text(),
        format!("{HEAD}<tr><td>O'Brien'; DROP TABLE b1; --</td><td>o@x</td><td>&lt;b&gt;hi&lt;/b&gt;</td></tr>\n{FOOT}")
    );

    // Concurrent requests share the process's one connection.
    let addr = s.addr;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                (0..10)
                    .map(|_| Conn::connect(addr).request(&get("/t/?t=b1&db=pg")))
                    .map(|r| (r.status, r.text()))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for t in threads {
        for (status, text) in t.join().expect("a client thread") {
            assert_eq!(status, 200, "{text}");
            assert_eq!(text, b1);
        }
    }
    assert_eq!(backends(&cluster), pid, "the connection was kept");

    // A database error is a 500 that names it; the connection goes on.
    let r = s.get("/t/?t=b2&db=pg");
    assert_eq!(r.status, 500);
    assert!(
        r.text().contains("relation \"b2\" does not exist"),
        "{}",
        r.text()
    );
    // SQLite was not configured: a 500 that says so.
    let r = s.get("/t/?t=b1");
    assert_eq!(
        (r.status, r.text()),
        (500, "database error: STOA_TABLE_DB is not set\n".to_owned())
    );
    assert_eq!(s.get("/t/?t=b1&db=pg").text(), b1);
    assert_eq!(backends(&cluster), pid);

    // A connection the server ends is opened again by the next request.
    cluster.psql(&format!("SELECT pg_terminate_backend({})", pid[0]));
    let t = Instant::now();
    while !backends(&cluster).is_empty() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(backends(&cluster).is_empty(), "the backend did not end");
    std::thread::sleep(Duration::from_millis(300));
    let r = s.get("/t/?t=b1&db=pg");
    assert_eq!(r.status, 200, "{}\n{}", r.text(), s.stderr());
    assert_eq!(r.text(), b1);
    let again = backends(&cluster);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_ne!(again, pid);
}
