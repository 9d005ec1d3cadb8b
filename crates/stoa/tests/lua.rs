//! The embedded Lua handler (issue 13): one interpreter per worker whose
//! module state persists across requests, errors and runaway code
//! contained (a 500 with the file and line in the log, and the worker
//! goes on), memory capped, subrequests through routing (and Lua output
//! included by an SSI page), streaming, SQLite kept open across requests,
//! and a new script after SIGHUP.

mod common;

use common::*;
use std::time::{Duration, Instant};

const APP: &str = r#"
local hits = 0                      -- module state: per worker
local db = stoa.sqlite("comments.db")
db:exec("CREATE TABLE IF NOT EXISTS c (id INTEGER PRIMARY KEY, who TEXT, text TEXT)")

return function(req)
  local p = req.path
  if p == "/lua/hits" then
    hits = hits + 1
    return 200, { ["content-type"] = "text/plain" }, "hello " .. (req.args.name or "") .. " " .. hits
  elseif p == "/lua/error" then
    error("boom")
  elseif p == "/lua/runaway" then
    while true do end
  elseif p == "/lua/sneaky" then
    while true do pcall(function() while true do end end) end
  elseif p == "/lua/memory" then
    local t = {}
    for i = 1, 1e9 do t[i] = string.rep("x", 1024) .. i end
  elseif p == "/lua/sub" then
    local status, body, headers = stoa.subrequest("/static/part.txt?x=1")
    local s2 = stoa.subrequest("/static/missing.txt")
    return 200, { ["x-sub-type"] = headers["content-type"] },
      "sub " .. status .. " " .. body .. " missing " .. s2
  elseif p == "/lua/self" then
    local status = stoa.subrequest("/lua/self")
    return 200, {}, "self " .. status
  elseif p == "/lua/stream" then
    req:start(201, { ["x-kind"] = "stream" })
    req:write("one ")
    req:flush()
    stoa.sleep(0.05)
    req:write("two")
    return
  elseif p == "/lua/cut" then
    req:start(200, {})
    req:write("partial ")
    req:flush()
    error("failed mid-body")
  elseif p == "/lua/comments" then
    if req.method == "POST" then
      db:exec("INSERT INTO c (who, text) VALUES (?, ?)", req.args.who, req.args.text)
      return 303, { location = "/lua/comments" }, ""
    end
    local out = {}
    for _, row in ipairs(db:query("SELECT id, who, text FROM c ORDER BY id")) do
      out[#out + 1] = row.id .. ":" .. row.who .. ":" .. row.text
    end
    return 200, { ["content-type"] = "text/plain" }, table.concat(out, "\n")
  elseif p == "/lua/badheader" then
    return 200, { ["x-a"] = "a\r\nx-injected: 1" }, "no"
  elseif p == "/lua/badname" then
    return 200, { ["x a"] = "1" }, "no"
  elseif p == "/lua/headers" then
    return 201, { ["x-list"] = { "a", "b" }, ["x-n"] = 7, ["content-length"] = "999" }, "ok"
  elseif p == "/lua/keep" then
    -- A req kept past its request shows nothing of later requests.
    local before = KEPT and tostring(KEPT.query) or "none"
    KEPT = req
    return 200, {}, before .. " " .. tostring(req.headers["x-test"])
  elseif p == "/lua/allheaders" then
    local h = req.headers
    local one = h["x-rep"]
    local upper = tostring(h["X-Rep"])
    local names = {}
    for k, v in pairs(h) do names[#names + 1] = k .. "=" .. v end
    table.sort(names)
    return 200, {}, one .. "|" .. upper .. "|" .. table.concat(names, ";")
  elseif p == "/lua/keepheaders" then
    -- A headers table read after its request is over reads nothing.
    local before = KEPT_H and tostring(KEPT_H["x-test"]) or "none"
    KEPT_H = req.headers
    return 200, {}, before
  elseif p == "/lua/late" then
    stoa.sleep(0.6)
    stoa.sleep(0.6)
    return 200, {}, "late"
  elseif p == "/lua/echo" then
    return 200, { ["content-type"] = "text/plain" },
      req.method .. " " .. (req.query or "-") .. " " .. (req.headers["x-test"] or "-") ..
      " " .. req:body() .. " " .. req.remote_addr
  end
  return 404, {}, "no such page"
end
"#;

fn site(tag: &str, lua_keys: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.write("app.lua", APP);
    dir.write("www/static/part.txt", "PART");
    dir.write(
        "www/page.shtml",
        "[<!--#include virtual=\"/lua/hits?name=ssi\" -->]",
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{}/www\"\n\n\
             [[site.route]]\nprefix = \"/lua/\"\nlua = {{ script = \"app.lua\"{lua_keys} }}\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n",
            dir.path().display()
        ),
    );
    let s = Server::with_config(&cfg);
    (dir, s)
}

#[test]
fn issue_13_module_state_persists_across_requests_in_a_worker() {
    let (_d, s) = site("lua-state", "");
    let a = s.get("/lua/hits?name=ada%20l");
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("text/plain"));
    assert_eq!(a.text(), "hello ada l 1");
    assert_eq!(s.get("/lua/hits").text(), "hello  2");
    // An SSI page includes Lua output through the same interpreter.
    assert_eq!(s.get("/page.shtml").text(), "[hello ssi 3]");
    let mut c = Conn::connect(s.addr);
    let mut req = request(
        "POST",
        "/lua/echo?q=1",
        &["X-Test: yes", "Content-Length: 4"],
    );
    req.extend_from_slice(b"body");
    let e = c.request(&req);
    assert_eq!(e.text(), "POST q=1 yes body 127.0.0.1");
}

#[test]
fn issue_13_a_lua_error_is_a_500_naming_file_and_line_and_the_worker_goes_on() {
    let (_d, s) = site("lua-error", "");
    assert_eq!(s.get("/lua/hits").text(), "hello  1");
    let r = s.get("/lua/error");
    assert_eq!(r.status, 500);
    assert!(
        s.wait_stderr(0, "app.lua:12: boom", Duration::from_secs(5)),
        "{}",
        s.stderr()
    );
    // Same interpreter, state intact.
    assert_eq!(s.get("/lua/hits").text(), "hello  2");
}

#[test]
fn issue_13_a_runaway_loop_is_stopped_by_the_instruction_hook_lua_nginx_module_770() {
    let (_d, s) = site("lua-runaway", ", timeout = \"1s\"");
    assert_eq!(s.get("/lua/hits").text(), "hello  1");
    let t = Instant::now();
    let r = s.get("/lua/runaway");
    assert_eq!(r.status, 500);
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    // The log line may reach stderr just after the response.
    assert!(
        s.wait_stderr(0, "limit reached", Duration::from_secs(5)),
        "{}",
        s.stderr()
    );
    // A pcall does not catch the stop.
    let t = Instant::now();
    assert_eq!(s.get("/lua/sneaky").status, 500);
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    // The instruction budget alone stops it too, well before the timeout.
    assert_eq!(s.get("/lua/hits").text(), "hello  2");
    let (_d2, s2) = site(
        "lua-budget",
        ", timeout = \"30s\", max_instructions = 1000000",
    );
    // An idle watchdog (no Lua for a second) still catches it.
    assert_eq!(s2.get("/lua/hits").text(), "hello  1");
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    assert_eq!(s2.get("/lua/runaway").status, 500);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        s2.wait_stderr(0, "instruction limit", Duration::from_secs(5)),
        "{}",
        s2.stderr()
    );
    assert_eq!(s2.get("/lua/hits").text(), "hello  2");
}

#[test]
fn issue_13_the_memory_cap_fails_the_request_not_the_worker() {
    let (_d, s) = site("lua-memory", ", memory = \"16 MiB\"");
    assert_eq!(s.get("/lua/hits").text(), "hello  1");
    assert_eq!(s.get("/lua/memory").status, 500);
    assert!(
        s.wait_stderr(0, "memory", Duration::from_secs(5)),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/lua/hits").text(), "hello  2");
}

#[test]
fn issue_13_subrequests_run_through_routing_and_a_self_subrequest_is_refused() {
    let (_d, s) = site("lua-sub", "");
    let r = s.get("/lua/sub");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "sub 200 PART missing 404");
    assert_eq!(r.header("x-sub-type"), Some("text/plain; charset=utf-8"));
    // 508 (a loop) comes back to the script as a status.
    assert_eq!(s.get("/lua/self").text(), "self 508");
}

#[test]
fn issue_13_req_write_streams_a_chunked_body_with_the_status_of_req_start() {
    let (_d, s) = site("lua-stream", "");
    let r = s.get("/lua/stream");
    assert_eq!(r.status, 201);
    assert_eq!(r.header("x-kind"), Some("stream"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.text(), "one two");
}

#[test]
fn issue_13_sqlite_rows_persist_across_requests_through_a_connection_kept_per_worker() {
    let (_d, s) = site("lua-sqlite", "");
    for (who, text) in [("ada", "first+post"), ("bob", "caf%C3%A9")] {
        let body = format!("who={who}&text={text}");
        let mut req = request(
            "POST",
            "/lua/comments",
            &[
                "Content-Type: application/x-www-form-urlencoded",
                &format!("Content-Length: {}", body.len()),
            ],
        );
        req.extend_from_slice(body.as_bytes());
        let r = Conn::connect(s.addr).request(&req);
        assert_eq!(r.status, 303, "{}", s.stderr());
        assert_eq!(r.header("location"), Some("/lua/comments"));
    }
    assert_eq!(
        s.get("/lua/comments").text(),
        "1:ada:first post\n2:bob:café"
    );
}

#[test]
fn issue_13_sighup_loads_the_new_script_in_each_worker() {
    let (d, s) = site("lua-reload", "");
    assert_eq!(s.get("/lua/hits").text(), "hello  1");
    d.write(
        "app.lua",
        "return function(req) return 200, {}, 'new script' end",
    );
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(
        s.wait_stderr(mark, "reload", Duration::from_secs(10)),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/lua/hits").text(), "new script");
}

/// An error after part of a streamed body went out cuts the response: no
/// last chunk (RFC 9112 §7.1), so the client can tell it from a whole body,
/// and the connection closes.
#[test]
fn rfc_9112_7_1_a_lua_error_mid_stream_is_a_visible_cut() {
    let (_d, s) = site("lua-cut", "");
    let mut c = s.connect();
    c.send(b"GET /lua/cut HTTP/1.1\r\nHost: t\r\n\r\n");
    let (_, bytes) = c
        .wait_closed(Duration::from_secs(5))
        .expect("the connection closes");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("partial "), "{text}");
    assert!(
        !text.ends_with("0\r\n\r\n"),
        "a last chunk was sent: {text:?}"
    );
}

const AUTH: &str = r#"
local seen = 0
return function(req)
  seen = seen + 1
  if req.args.go == "away" then
    return 302, { location = "/login" }, ""
  end
  local auth = req.headers.authorization
  if auth == nil then
    return 401, { ["www-authenticate"] = 'Bearer realm="stoa"' }, "who are you?"
  elseif auth == "Bearer refused" then
    return false
  elseif auth ~= "Bearer good" then
    return 403, { ["content-type"] = "text/plain" }, "not you"
  end
  return nil, { USER = "ada", SEEN = seen }
end
"#;

const AFTER_AUTH: &str = r#"
return function(req)
  return 200, { ["content-type"] = "text/plain" },
    "lua " .. (req.vars.USER or "-") .. " " .. req.method .. " " .. req:body()
end
"#;

/// `lua = { access = ... }` runs before any handler (static files, CGI,
/// Lua) and answers, or lets the request through with variables for the
/// handler (environment variables of a CGI script, `req.vars` in Lua),
/// as a FastCGI Authorizer does.
#[test]
fn issue_13_a_lua_access_script_guards_any_route_and_passes_variables() {
    let dir = TempDir::new("lua-access");
    dir.write("auth.lua", AUTH);
    dir.write("app.lua", AFTER_AUTH);
    dir.write("www/private/secret.txt", "SECRET");
    let script = dir.write(
        "cgi/who",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\ncgi %s %s' \"$USER\" \"$SEEN\"\n",
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{root}/www\"\n\n\
             [[site.route]]\nprefix = \"/private/\"\nstatic = {{}}\nlua = {{ access = \"auth.lua\" }}\n\n\
             [[site.route]]\nprefix = \"/cgi/\"\ncgi = {{ dir = \"{root}/cgi\" }}\nlua = {{ access = \"auth.lua\" }}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nlua = {{ script = \"app.lua\", access = \"auth.lua\" }}\n",
            root = dir.path().display()
        ),
    );
    let s = Server::with_config(&cfg);
    let with = |path: &str, auth: &str| {
        let h = format!("Authorization: {auth}");
        Conn::connect(s.addr).request(&request("GET", path, &[&h]))
    };

    // Answers: 401 with its header, 403 (its body, or Stoa's for `false`),
    // a redirect.
    let r = s.get("/private/secret.txt");
    assert_eq!(r.status, 401, "{}", s.stderr());
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"stoa\""));
    assert_eq!(r.text(), "who are you?");
    let r = with("/private/secret.txt", "Bearer wrong");
    assert_eq!(r.status, 403);
    assert_eq!(r.text(), "not you");
    assert_eq!(with("/private/secret.txt", "Bearer refused").status, 403);
    let r = s.get("/cgi/who?go=away");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("/login"));

    // Let through: the static file, the CGI script with the variables in
    // its environment, the Lua handler with them in req.vars and the
    // request body left for it.
    let r = with("/private/secret.txt", "Bearer good");
    assert_eq!((r.status, r.text().as_str()), (200, "SECRET"));
    let r = with("/cgi/who", "Bearer good");
    assert_eq!(r.status, 200, "{}", s.stderr());
    assert!(r.text().starts_with("cgi ada "), "{}", r.text());
    let mut req = request(
        "POST",
        "/app/x",
        &["Authorization: Bearer good", "Content-Length: 5"],
    );
    req.extend_from_slice(b"hello");
    let r = Conn::connect(s.addr).request(&req);
    assert_eq!(r.text(), "lua ada POST hello", "{}", s.stderr());

    // An error in the access script is a 500, never a way through.
    dir.write("auth.lua", "return function(req) error('auth down') end");
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(s.wait_stderr(mark, "reload", Duration::from_secs(10)));
    let r = with("/private/secret.txt", "Bearer good");
    assert_eq!(r.status, 500);
    assert!(
        s.wait_stderr(mark, "auth.lua:1: auth down", Duration::from_secs(5)),
        "{}",
        s.stderr()
    );
}

#[test]
fn issue_13_lua_access_and_a_fastcgi_authorizer_on_one_route_is_a_config_error() {
    let dir = TempDir::new("lua-access-both");
    dir.write("auth.lua", AUTH);
    let cfg = dir.config(
        "stoa.toml",
        "[[pool]]\nname = \"a\"\naddress = [\"127.0.0.1:9\"]\n\n[[site]]\n\
         [[site.route]]\nprefix = \"/x/\"\nstatic = { root = \"/tmp\" }\nauthorizer = \"a\"\nlua = { access = \"auth.lua\" }\n",
    );
    let out = std::process::Command::new(stoa_bin())
        .arg("check")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lua.access"), "{err}");
}

const SHARED: &str = r#"
local me = tostring({}):sub(8)      -- this worker's interpreter
local d = stoa.shared.counters
return function(req)
  if req.path == "/s/hit" then
    return 200, {}, me .. " " .. d:incr("hits")
  elseif req.path == "/s/ttl" then
    d:set("short", "here", 0.2)
    return 200, {}, d:get("short")
  elseif req.path == "/s/get" then
    return 200, {}, tostring(d:get(req.args.k))
  elseif req.path == "/s/big" then
    local ok, err = d:set("big", string.rep("x", 100000))
    d:set("gone", 1)
    d:delete("gone")
    return 200, {}, tostring(ok) .. " " .. tostring(err) .. " " .. tostring(d:get("gone"))
  end
end
"#;

/// `[lua.shared]`: one dictionary for every worker (OpenResty's
/// ngx.shared.DICT): two workers count on the same counter.
#[test]
fn issue_13_the_shared_dictionary_is_one_across_workers() {
    let dir = TempDir::new("lua-shared");
    dir.write("app.lua", SHARED);
    let cfg = dir.write(
        "stoa.toml",
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
         [lua.shared]\ncounters = \"64 KiB\"\n\n\
         [[site]]\n[[site.route]]\nprefix = \"/s/\"\nlua = { script = \"app.lua\" }\n",
    );
    let s = Server::with_config(&cfg);
    let mut workers = std::collections::BTreeSet::new();
    let mut counts = Vec::new();
    // Each request on a new connection: SO_REUSEPORT spreads them over
    // both workers' listeners.
    for _ in 0..60 {
        let t = s.get("/s/hit").text();
        let (who, n) = t.split_once(' ').expect("id and count");
        workers.insert(who.to_owned());
        counts.push(n.parse::<u32>().expect("a count"));
    }
    assert_eq!(workers.len(), 2, "both workers answered: {workers:?}");
    counts.sort();
    assert_eq!(counts, (1..=60).collect::<Vec<_>>());

    assert_eq!(s.get("/s/ttl").text(), "here");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.get("/s/get?k=short").text(), "nil");
    assert_eq!(s.get("/s/big").text(), "false no memory nil");
    assert_eq!(s.get("/s/get?k=hits").text(), "60");

    // A reload keeps the dictionary.
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(s.wait_stderr(mark, "reload", Duration::from_secs(10)));
    assert_eq!(s.get("/s/get?k=hits").text(), "60");
}

/// The route's timeout covers what the script waits for (sleeps,
/// subrequests, queries), not only the Lua code the hook sees.
#[test]
fn issue_13_the_timeout_covers_waits() {
    let (_d, s) = site("lua-late", ", timeout = \"1s\"");
    let t = Instant::now();
    assert_eq!(s.get("/lua/late").status, 500);
    assert!(
        t.elapsed() < Duration::from_millis(1150),
        "{:?}",
        t.elapsed()
    );
    assert!(
        s.wait_stderr(0, "timed out after 1s", Duration::from_secs(5)),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/lua/hits").text(), "hello  1");
}

/// Response headers: lists repeat a field, numbers are text, framing
/// fields are Stoa's; a CR/LF in a value or a bad name is a 500 (no
/// header injection).
#[test]
fn issue_13_response_headers_are_checked() {
    let (_d, s) = site("lua-headers", "");
    let r = s.get("/lua/headers");
    assert_eq!(r.status, 201);
    assert_eq!(r.header_count("x-list"), 2);
    assert_eq!(r.header("x-n"), Some("7"));
    assert_eq!(r.header("content-length"), Some("2"));
    assert_eq!(r.text(), "ok");
    for p in ["/lua/badheader", "/lua/badname"] {
        let r = s.get(p);
        assert_eq!(r.status, 500, "{p}");
        assert_eq!(r.header("x-injected"), None);
    }
    assert_eq!(s.get("/lua/hits").text(), "hello  1");
}

#[test]
fn issue_13_a_req_kept_past_its_request_reads_nothing_of_later_ones() {
    let (_d, s) = site("lua-keep", "");
    let get = |q: &str, v: &str| {
        let h = format!("X-Test: {v}");
        Conn::connect(s.addr)
            .request(&request("GET", &format!("/lua/keep?{q}"), &[&h]))
            .text()
    };
    assert_eq!(get("secret=1", "one"), "none one");
    // The first request's table was never asked for its query: it is gone
    // with it, and never the later request's (whose slot it had).
    assert_eq!(get("q=2", "two"), "nil two");
}

/// `req.headers` is filled as it is read, yet reads as the full table it
/// was: every field by lower-case name, repeated fields joined with ", "
/// (RFC 9110 §5.3), `pairs` sees them all; a field of it read once its
/// request is over is nil, as for the rest of a kept `req`.
#[test]
fn rfc_9110_5_3_req_headers_read_lazily_keep_the_table_behaviour() {
    let (_d, s) = site("lua-allheaders", "");
    let r = Conn::connect(s.addr).request(&request(
        "GET",
        "/lua/allheaders",
        &["X-Rep: a", "X-Test: t", "x-rep: b"],
    ));
    assert_eq!(r.status, 200);
    let text = r.text();
    let mut parts = text.splitn(3, '|');
    assert_eq!(parts.next(), Some("a, b"));
    assert_eq!(parts.next(), Some("nil"), "names are lower case");
    let names: Vec<&str> = parts.next().unwrap_or_default().split(';').collect();
    assert!(names.contains(&"x-rep=a, b"), "{text}");
    assert!(names.contains(&"x-test=t"), "{text}");
    assert!(names.iter().any(|n| n.starts_with("host=")), "{text}");
    let get = |v: &str| {
        let h = format!("X-Test: {v}");
        Conn::connect(s.addr)
            .request(&request("GET", "/lua/keepheaders", &[&h]))
            .text()
    };
    assert_eq!(get("one"), "none");
    assert_eq!(get("two"), "nil");
}
