//! PostgreSQL from Lua (issue 13): a private cluster made by the test
//! (Debian `postgresql`: `initdb` and `pg_ctl`, on a Unix socket in a
//! temporary directory, as the `postgres` user when the test runs as
//! root), and a script that keeps its connection per worker across
//! requests (the mod_perl advantage), binds parameters, gets rows as Lua
//! tables and PostgreSQL's errors as Lua errors, without blocking the
//! worker while a query runs.

mod common;

use common::postgres::Cluster;
use common::*;
use std::time::{Duration, Instant};

const APP: &str = r#"
local pg = stoa.postgres(CONNINFO)   -- opened on the first query, kept by this worker

return function(req)
  local p = req.path
  if p == "/pg/pid" then
    return 200, {}, tostring(pg:query("SELECT pg_backend_pid() AS pid")[1].pid)
  elseif p == "/pg/setup" then
    pg:batch([[
      CREATE TABLE IF NOT EXISTS c (id serial PRIMARY KEY, who text NOT NULL, body text,
        n int, price numeric(10, 2), ok boolean, at timestamptz, doc jsonb);
      TRUNCATE c RESTART IDENTITY]])
    return 200, {}, "ready"
  elseif p == "/pg/add" then
    local n = pg:exec("INSERT INTO c (who, body, n, price, ok, at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      req.args.who, req.args.body, tonumber(req.args.n), "12.50", true, "2024-02-29 13:14:15.25+00", '{"a": [1, 2]}')
    return 200, {}, "added " .. n
  elseif p == "/pg/list" then
    local out = {}
    for _, r in ipairs(pg:query("SELECT id, who, body, n, price, ok, at, doc FROM c WHERE id >= $1 ORDER BY id", 1)) do
      out[#out + 1] = table.concat({ math.type(r.id), r.id, r.who, tostring(r.body), tostring(r.n),
        r.price, tostring(r.ok), r.at, r.doc }, "|")
    end
    return 200, { ["content-type"] = "text/plain" }, table.concat(out, "\n")
  elseif p == "/pg/error" then
    pg:query("SELECT * FROM no_such_table")
  elseif p == "/pg/pcall" then
    local ok, e = pcall(pg.query, pg, "SELECT 1 / $1::int", 0)
    return 200, {}, tostring(ok) .. " " .. e
  elseif p == "/pg/kill" then
    local ok, e = pcall(pg.query, pg, "SELECT pg_terminate_backend(pg_backend_pid())")
    return 200, {}, tostring(ok)
  elseif p == "/pg/slow" then
    pg:query("SELECT pg_sleep(1.5)")
    return 200, {}, "slow"
  elseif p == "/pg/fast" then
    return 200, {}, "fast"
  end
  return 404, {}, "no such page"
end
"#;

fn site(dir: &TempDir, cluster: &Cluster) -> Server {
    dir.write(
        "app.lua",
        APP.replace("CONNINFO", &format!("{:?}", cluster.conninfo())),
    );
    let cfg = dir.config(
        "stoa.toml",
        "[[site]]\n[[site.route]]\nprefix = \"/pg/\"\nlua = { script = \"app.lua\" }\n",
    );
    Server::with_config(&cfg)
}

#[test]
fn issue_13_postgres_from_lua_keeps_its_connection_binds_parameters_and_raises_errors() {
    let dir = TempDir::new("lua-pg");
    let cluster = Cluster::start(&dir);
    let s = site(&dir, &cluster);
    let log = || std::fs::read_to_string(&cluster.log).unwrap_or_default();

    // One connection per worker, kept across requests (and connections).
    let a = s.get("/pg/pid");
    assert_eq!(a.status, 200, "{}\n{}", s.stderr(), log());
    let pid: i32 = a.text().parse().expect("a backend PID");
    assert_eq!(s.get("/pg/pid").text(), pid.to_string());
    assert_eq!(s.get("/pg/setup").text(), "ready", "{}", s.stderr());

    // Bound parameters: quotes and SQL in a value are data.
    let evil = "O%27Brien%27%3B+DROP+TABLE+c%3B+--";
    let r = s.get(&format!("/pg/add?who={evil}&body=caf%C3%A9&n=7"));
    assert_eq!(r.text(), "added 1", "{}", s.stderr());
    let r = s.get("/pg/add?who=bob");
    assert_eq!(r.text(), "added 1", "{}", s.stderr());
    assert_eq!(
        s.get("/pg/list").text(),
        "integer|1|O'Brien'; DROP TABLE c; --|café|7|12.50|true|2024-02-29 13:14:15.25+00|{\"a\": [1, 2]}\n\
         integer|2|bob|nil|nil|12.50|true|2024-02-29 13:14:15.25+00|{\"a\": [1, 2]}"
    );

    // A PostgreSQL error is a Lua error: a 500 naming the script's line...
    let mark = s.stderr().len();
    assert_eq!(s.get("/pg/error").status, 500);
    assert!(
        s.wait_stderr(
            mark,
            "app.lua:26: postgres: ERROR: relation \"no_such_table\" does not exist",
            Duration::from_secs(5)
        ),
        "{}",
        s.stderr()
    );
    // ...that pcall catches; the connection goes on.
    assert_eq!(
        s.get("/pg/pcall").text(),
        "false postgres: ERROR: division by zero (SQLSTATE 22012)"
    );
    assert_eq!(s.get("/pg/pid").text(), pid.to_string());

    // A query does not hold the worker: another request is answered
    // while it runs.
    let addr = s.addr;
    let slow = std::thread::spawn(move || {
        let t = Instant::now();
        let mut c = Conn::connect(addr);
        let r = c.request(&get("/pg/slow"));
        (r.text(), t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    assert_eq!(s.get("/pg/fast").text(), "fast");
    assert!(
        t.elapsed() < Duration::from_millis(700),
        "{:?}",
        t.elapsed()
    );
    let (text, took) = slow.join().expect("the slow request");
    assert_eq!(text, "slow");
    assert!(took >= Duration::from_millis(1500), "{took:?}");

    // A connection the server ends is opened again on the next query.
    s.get("/pg/kill");
    std::thread::sleep(Duration::from_millis(300));
    let again = s.get("/pg/pid");
    assert_eq!(again.status, 200, "{}", s.stderr());
    assert_ne!(again.text(), pid.to_string());
    assert_eq!(s.get("/pg/pid").text(), again.text());
}
