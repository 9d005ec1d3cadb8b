//! The proxy's header rules (`header_up`, `header_down`), the access
//! phase's identity passed on to the application, and `strip_prefix`
//! seen by an application (`X-Forwarded-Prefix`, redirects put back
//! under the prefix), against tests/proxy-peers/backend.py, which echoes
//! the request head it got.

mod common;
mod proxy_peer;

use common::*;
use proxy_peer::Backend;
use std::process::Command;

/// Stoa with pool `app` on `b` and the site's routes `routes` (TOML).
fn stoa(dir: &TempDir, b: &Backend, routes: &str) -> Server {
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\n[[site]]\nroot = \"www\"\n{routes}\n",
            b.addr
        ),
    );
    Server::with_config(&cfg)
}

/// The values of field `name` (any case) the backend received.
fn echoed(r: &Response, name: &str) -> Vec<String> {
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("echo JSON");
    v["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .filter(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
        .map(|h| h[1].as_str().unwrap_or("").to_owned())
        .collect()
}

fn req(path: &str, headers: &[&str]) -> Vec<u8> {
    let mut r = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    r.into_bytes()
}

/// nginx `proxy_set_header X-Remote-User $remote_user` behind
/// `auth_basic`: the application trusts the field, so the client's own
/// must never arrive; with no user (a route without auth) the value is
/// empty and the field is left out, still never the client's.
#[test]
fn the_basic_auth_user_reaches_the_application_and_a_client_cannot_forge_it() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("rules-basic");
    dir.write("htpasswd", "alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n");
    let rules = r#"header_up = { set = { "X-Remote-User" = "$remote_user" } }"#;
    let s = stoa(
        &dir,
        &b,
        &format!(
            "[[site.route]]\nprefix = \"/private/\"\nbasic_auth = {{ realm = \"r\", users = \"htpasswd\" }}\nproxy = {{ pool = \"app\", {rules} }}\n\
             [[site.route]]\nprefix = \"/open/\"\nproxy = {{ pool = \"app\", {rules} }}\n"
        ),
    );
    // alice:secret, and a forged field in another case.
    let r = s.request(&req(
        "/private/x",
        &[
            "Authorization: Basic YWxpY2U6c2VjcmV0",
            "x-remote-user: root",
        ],
    ));
    assert_eq!(echoed(&r, "x-remote-user"), ["alice"]);
    let r = s.request(&req("/private/x", &["X-Remote-User: root"]));
    assert_eq!(r.status, 401);
    let r = s.request(&req("/open/x", &["X-Remote-User: root"]));
    assert!(echoed(&r, "x-remote-user").is_empty(), "{}", r.text());
}

/// A Lua access script's variables (as an Authorizer's `Variable-NAME`)
/// reach the application as fields the route names: `$remote_user` from
/// its `REMOTE_USER`, `$auth_NAME` from the rest (nginx passes
/// `auth_request_set` variables with `proxy_set_header` the same way).
#[test]
fn a_lua_access_scripts_variables_reach_the_application_as_named_fields() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("rules-lua");
    dir.write(
        "auth.lua",
        "return function(req)\n  return nil, { REMOTE_USER = \"bob\", team = \"ops\" }\nend\n",
    );
    let s = stoa(
        &dir,
        &b,
        r#"[[site.route]]
prefix = "/app/"
lua = { access = "auth.lua" }
proxy = { pool = "app", header_up = { set = { "X-User" = "$remote_user", "X-Team" = "team=${auth_team}" }, add = { "X-Seen" = "$uri" } } }
"#,
    );
    let r = s.request(&req("/app/p?q=1", &["X-Team: admins", "X-Seen: client"]));
    assert_eq!(echoed(&r, "x-user"), ["bob"]);
    assert_eq!(echoed(&r, "x-team"), ["team=ops"]);
    // `add` keeps the client's and appends the route's.
    assert_eq!(echoed(&r, "x-seen"), ["client", "/app/p"]);
}

/// A FastCGI Authorizer's `Variable-NAME` (FastCGI 1.0 §6.3) reaches a
/// proxied application as `$auth_NAME`, as nginx passes an
/// `auth_request_set` variable on with `proxy_set_header`; a forged
/// `X-Remote-User` is removed even though the Authorizer named no user.
#[test]
fn a_fastcgi_authorizers_variables_reach_the_application_as_auth_fields() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("rules-authz");
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"authz\"\ncommand = [\"{}\", \"--authorizer\"]\nprocesses = 1\n\n\
             [[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nauthorizer = \"authz\"\n\
             proxy = {{ pool = \"app\", header_up = {{ set = {{ \"X-User\" = \"$auth_USER\", \"X-Remote-User\" = \"$remote_user\" }} }} }}\n",
            env!("CARGO_BIN_EXE_stoa-hello-fcgi"),
            b.addr
        ),
    );
    let s = Server::with_config(&cfg);
    let r = s.request(&req(
        "/app/x",
        &[
            "Authorization: Bearer good",
            "X-Remote-User: root",
            "X-User: root",
        ],
    ));
    assert_eq!(echoed(&r, "x-user"), ["alice"]);
    assert!(echoed(&r, "x-remote-user").is_empty(), "{}", r.text());
    let r = s.request(&req("/app/x", &["Authorization: Bearer bad"]));
    assert_eq!(r.status, 403);
}

/// Caddy `header_up -Cookie` and nginx `proxy_set_header Accept-Encoding
/// ""`: removed fields never reach the application; the proxy's own
/// `X-Forwarded-For` can be replaced by a rule too.
#[test]
fn header_up_removes_fields_and_replaces_the_proxys_own() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("rules-up");
    let s = stoa(
        &dir,
        &b,
        r#"[[site.route]]
prefix = "/app/"
proxy = { pool = "app", header_up = { remove = ["Cookie"], set = { "Accept-Encoding" = "", "X-Forwarded-For" = "$http_host" } } }
"#,
    );
    let r = s.request(&req(
        "/app/x",
        &[
            "Cookie: s=1",
            "Accept-Encoding: gzip",
            "X-Forwarded-For: 6.6.6.6",
        ],
    ));
    assert!(echoed(&r, "cookie").is_empty());
    assert!(echoed(&r, "accept-encoding").is_empty());
    assert_eq!(echoed(&r, "x-forwarded-for"), ["t"]);
}

/// nginx `proxy_hide_header X-Backend` and `add_header`; Caddy
/// `header_down -X-Backend`, `header_down Cache-Control no-store`.
#[test]
fn header_down_hides_replaces_and_adds_fields_toward_the_client() {
    let b = Backend::start(&["--name", "node-3"]);
    let dir = TempDir::new("rules-down");
    let s = stoa(
        &dir,
        &b,
        r#"[[site.route]]
prefix = "/app/"
proxy = { pool = "app", header_down = { remove = ["X-Backend"], set = { "Content-Type" = "text/plain; x=$scheme" }, add = { "X-Path" = "$uri" } } }
"#,
    );
    let r = s.request(&req("/app/x", &[]));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-backend"), None, "{:?}", r.headers);
    assert_eq!(r.header_count("content-type"), 1);
    assert_eq!(r.header("content-type"), Some("text/plain; x=http"));
    assert_eq!(r.header("x-path"), Some("/app/x"));
}

/// As `nginx -t` refuses an unknown variable: a rule that cannot work is
/// a load error naming the key, never a silent empty field at run time.
#[test]
fn a_rule_with_an_unknown_variable_or_a_framing_field_fails_the_load() {
    let dir = TempDir::new("rules-bad");
    dir.mkdir("www");
    for (rule, why) in [
        (
            r#"header_up = { set = { "X-A" = "$nope" } }"#,
            "unknown variable",
        ),
        (
            r#"header_down = { remove = ["Transfer-Encoding"] }"#,
            "written by the proxy",
        ),
    ] {
        let cfg = dir.config(
            "stoa.toml",
            &format!(
                "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"127.0.0.1:9\"]\n[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nproxy = {{ pool = \"app\", {rule} }}\n"
            ),
        );
        let o = Command::new(stoa_bin())
            .args(["check", cfg.to_str().expect("utf-8")])
            .output()
            .expect("stoa check");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{rule}: {err}");
        assert!(err.contains(why) && err.contains("proxy.header_"), "{err}");
    }
}

/// Caddy's `handle_path` and Traefik's StripPrefix send
/// `X-Forwarded-Prefix` (Spring, Django with a prefix middleware read
/// it): the application learns where it is mounted. A client's own is
/// replaced, as the other `X-Forwarded-*` fields are.
#[test]
fn strip_prefix_sends_x_forwarded_prefix_and_replaces_a_clients() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("rules-prefix");
    let s = stoa(
        &dir,
        &b,
        "[[site.route]]\nprefix = \"/app/\"\nproxy = { pool = \"app\", strip_prefix = true }\n",
    );
    let r = s.request(&req("/app/x", &["X-Forwarded-Prefix: /evil"]));
    assert_eq!(echoed(&r, "x-forwarded-prefix"), ["/app"]);
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("echo");
    assert_eq!(v["target"], "/x");
}

/// Django's `login_required` behind a prefix-aware proxy answers
/// `302 /app/accounts/login/?next=/app/admin/`: the application wrote the
/// prefix itself, so the proxy leaves it (no `/app/app/`); nginx's
/// `proxy_redirect` and Caddy leave such a Location as it is too.
#[test]
fn a_django_like_login_redirect_keeps_next_under_the_prefix_once() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("rules-django");
    let s = stoa(
        &dir,
        &b,
        "[[site.route]]\nprefix = \"/app/\"\nproxy = { pool = \"app\", strip_prefix = true }\n",
    );
    let r = s.request(&req("/app/admin/users", &[]));
    assert_eq!(r.status, 302, "{}", r.text());
    assert_eq!(
        r.header("location"),
        Some("/app/accounts/login/?next=/app/admin/users")
    );
}

/// An application that knows nothing of the prefix redirects to
/// `http://HOST/target` (built from the preserved Host) or `/target`;
/// both go back under the stripped prefix, as nginx's `proxy_redirect`
/// maps its `proxy_pass` URL.
#[test]
fn a_redirect_built_from_the_preserved_host_goes_back_under_the_prefix() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("rules-redirect");
    let s = stoa(
        &dir,
        &b,
        "[[site.route]]\nprefix = \"/app/\"\nproxy = { pool = \"app\", strip_prefix = true }\n",
    );
    let r = s.request(&req("/app/redirect?to=http://t/target", &[]));
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("http://t/app/target"));
    let r = s.request(&req("/app/redirect?to=/target%3Fa", &[]));
    assert_eq!(r.header("location"), Some("/app/target?a"));
    // Another host's URL is not the application's to map.
    let r = s.request(&req("/app/redirect?to=http://other/target", &[]));
    assert_eq!(r.header("location"), Some("http://other/target"));
}
