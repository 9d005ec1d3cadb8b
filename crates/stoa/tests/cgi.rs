//! CGI/1.1 (RFC 3875) end to end: real scripts in shell, Perl, C (compiled
//! here with `cc`) and PHP (php-cgi) behind the real `stoa` binary. The
//! meta-variables of §4.1, script resolution and traversal, request bodies
//! (streamed, chunked, spilled to a file), response heads (§6: documents,
//! local and client redirects, NPH), failures (timeouts, silence, malformed
//! heads, clients that stall or leave) and the process hygiene around them
//! (process groups killed, no zombies, bounded memory).
//!
//! Needs the Debian packages perl, php-cgi and gcc; a missing one fails the
//! test that needs it with a message naming the package.

mod cgi_support;
mod common;

use cgi_support::*;
use common::*;
use std::io::Write;
use std::time::{Duration, Instant};

fn env_request(
    site: &Site,
    req: &[u8],
) -> (
    Response,
    std::collections::BTreeMap<String, String>,
    Vec<u8>,
) {
    let r = site.request(req);
    assert_eq!(r.status, 200, "{r:?}");
    let (env, body) = env_of(&r.body);
    (r, env, body)
}

/// The variables every request gets, whatever it carries.
const ALWAYS: &[&str] = &[
    "GATEWAY_INTERFACE",
    "QUERY_STRING",
    "REMOTE_ADDR",
    "REMOTE_PORT",
    "REQUEST_METHOD",
    "SCRIPT_NAME",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "SERVER_SOFTWARE",
    "DOCUMENT_ROOT",
    "SCRIPT_FILENAME",
    "REQUEST_URI",
    "REQUEST_SCHEME",
    "REDIRECT_STATUS",
    "PATH",
];

fn keys(env: &std::collections::BTreeMap<String, String>) -> Vec<&str> {
    env.keys().map(String::as_str).collect()
}

fn sorted(mut v: Vec<&str>) -> Vec<&str> {
    v.sort_unstable();
    v
}

// ---------------------------------------------------------------------------
// Meta-variables (RFC 3875 §4.1)

#[test]
fn rfc3875_4_1_a_get_gets_every_meta_variable_and_nothing_else() {
    require_perl();
    let site = Site::default_site();
    let mut c = site.connect();
    let client_port = c.stream.local_addr().expect("local addr").port();
    let target = "/cgi-bin/env.pl/some/p%20ath?a=1&b=%20x+y&c=%2F&d";
    let r = c.request(
        format!(
            "GET {target} HTTP/1.1\r\nHost: example.test:8080\r\nUser-Agent: cgi-test/1\r\n\
             X-Custom: v1\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-script"), Some("env.pl"));
    let (env, body) = env_of(&r.body);
    let www = site.www.display().to_string();
    let expect =
        |k: &str, v: &str| assert_eq!(env.get(k).map(String::as_str), Some(v), "{k} in {env:#?}");
    // §4.1.1, §4.1.11: no authentication by the server, so neither is set,
    // even though the client sent Authorization.
    assert!(!env.contains_key("AUTH_TYPE"), "{env:#?}");
    assert!(!env.contains_key("REMOTE_USER"), "{env:#?}");
    // §4.1.2, §4.1.3: no body, no CONTENT_LENGTH or CONTENT_TYPE.
    assert!(!env.contains_key("CONTENT_LENGTH"), "{env:#?}");
    assert!(!env.contains_key("CONTENT_TYPE"), "{env:#?}");
    expect("GATEWAY_INTERFACE", "CGI/1.1"); // §4.1.4
    expect("PATH_INFO", "/some/p ath"); // §4.1.5: decoded
    expect("PATH_TRANSLATED", &format!("{www}/some/p ath")); // §4.1.6
    expect("QUERY_STRING", "a=1&b=%20x+y&c=%2F&d"); // §4.1.7: as sent
    expect("REMOTE_ADDR", "127.0.0.1"); // §4.1.8
    expect("REMOTE_PORT", &client_port.to_string());
    expect("REQUEST_METHOD", "GET"); // §4.1.12
    expect("SCRIPT_NAME", "/cgi-bin/env.pl"); // §4.1.13
    expect("SERVER_NAME", "example.test"); // §4.1.14: from Host, no port
    expect("SERVER_PORT", &site.addr.port().to_string()); // §4.1.15: the real port
    expect("SERVER_PROTOCOL", "HTTP/1.1"); // §4.1.16
    assert!(
        env.get("SERVER_SOFTWARE")
            .is_some_and(|s| s.starts_with("stoa/")),
        "SERVER_SOFTWARE: {env:#?}"
    ); // §4.1.17
    expect("DOCUMENT_ROOT", &www);
    expect(
        "SCRIPT_FILENAME",
        &site.cgi_bin.join("env.pl").display().to_string(),
    );
    expect("REQUEST_URI", target);
    expect("REDIRECT_STATUS", "200");
    expect("REQUEST_SCHEME", "http");
    // §4.1.18: request headers as HTTP_*.
    expect("HTTP_HOST", "example.test:8080");
    expect("HTTP_USER_AGENT", "cgi-test/1");
    expect("HTTP_X_CUSTOM", "v1");
    assert!(!env.contains_key("HTTPS"), "plain TCP: {env:#?}");
    // The environment starts empty: only [cgi] pass_env (PATH) comes from
    // the server's own (which has NO_COLOR, CARGO_*, HOME...).
    expect("PATH", &std::env::var("PATH").unwrap_or_default());
    let mut want: Vec<&str> = ALWAYS.to_vec();
    want.extend([
        "PATH_INFO",
        "PATH_TRANSLATED",
        "HTTP_HOST",
        "HTTP_USER_AGENT",
        "HTTP_X_CUSTOM",
    ]);
    assert_eq!(keys(&env), sorted(want), "{env:#?}");
    assert!(body.is_empty());
}

#[test]
fn rfc3875_4_1_a_post_gets_content_length_and_content_type_and_its_body_on_stdin() {
    require_perl();
    let site = Site::default_site();
    let body = b"name=value&other=%41\r\nwith a line break\0and a NUL";
    let mut req = format!(
        "POST /cgi-bin/env.pl?x=y HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-test; charset=utf-8\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let mut c = site.connect();
    let client_port = c.stream.local_addr().expect("local addr").port();
    let r = c.request(&req);
    assert_eq!(r.status, 200, "{r:?}");
    let (env, echoed) = env_of(&r.body);
    let expect =
        |k: &str, v: &str| assert_eq!(env.get(k).map(String::as_str), Some(v), "{k} in {env:#?}");
    assert!(!env.contains_key("AUTH_TYPE") && !env.contains_key("REMOTE_USER"));
    expect("REQUEST_METHOD", "POST");
    expect("CONTENT_LENGTH", &body.len().to_string()); // §4.1.2
    expect("CONTENT_TYPE", "application/x-test; charset=utf-8"); // §4.1.3
    expect("QUERY_STRING", "x=y");
    expect("SCRIPT_NAME", "/cgi-bin/env.pl");
    expect("SERVER_NAME", "t");
    expect("REQUEST_URI", "/cgi-bin/env.pl?x=y");
    expect("GATEWAY_INTERFACE", "CGI/1.1");
    expect("REDIRECT_STATUS", "200");
    expect("REMOTE_ADDR", "127.0.0.1");
    expect("REMOTE_PORT", &client_port.to_string());
    expect("SERVER_PORT", &site.addr.port().to_string());
    expect("SERVER_PROTOCOL", "HTTP/1.1");
    assert!(env
        .get("SERVER_SOFTWARE")
        .is_some_and(|s| s.starts_with("stoa/")));
    expect("DOCUMENT_ROOT", &site.www.display().to_string());
    expect(
        "SCRIPT_FILENAME",
        &site.cgi_bin.join("env.pl").display().to_string(),
    );
    expect("REQUEST_SCHEME", "http");
    expect("HTTP_HOST", "t");
    expect("PATH", &std::env::var("PATH").unwrap_or_default());
    // §4.1.5, §4.1.6: no path info, so neither variable.
    assert!(!env.contains_key("PATH_INFO"), "{env:#?}");
    assert!(!env.contains_key("PATH_TRANSLATED"), "{env:#?}");
    // Content-Length / Content-Type have their own variables, not HTTP_*.
    let mut want: Vec<&str> = ALWAYS.to_vec();
    want.extend(["CONTENT_LENGTH", "CONTENT_TYPE", "HTTP_HOST"]);
    assert_eq!(keys(&env), sorted(want), "{env:#?}");
    assert_eq!(echoed, body, "the script read exactly the body, then EOF");
}

#[test]
fn rfc3875_4_1_14_http_1_0_without_host_gives_the_local_address_and_server_protocol_http_1_0() {
    require_perl();
    let site = Site::default_site();
    let r = site.request(b"GET /cgi-bin/env.pl HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200, "{r:?}");
    let (env, _) = env_of(&r.body);
    assert_eq!(env["SERVER_PROTOCOL"], "HTTP/1.0");
    assert_eq!(env["SERVER_NAME"], "127.0.0.1");
    assert!(!env.contains_key("HTTP_HOST"));
}

#[test]
fn rfc9112_3_2_2_an_absolute_form_authority_replaces_host_for_scripts_and_request_uri_is_the_origin_form(
) {
    require_perl();
    let site = Site::default_site();
    let (_, env, _) = env_request(
        &site,
        b"GET http://evil.example:81/cgi-bin/env.pl/p?x=1 HTTP/1.1\r\nHost: good.example\r\n\r\n",
    );
    let get = |k: &str| env.get(k).map(String::as_str);
    assert_eq!(get("SERVER_NAME"), Some("evil.example"), "{env:#?}");
    assert_eq!(get("HTTP_HOST"), Some("evil.example:81"), "{env:#?}");
    assert_eq!(
        get("REQUEST_URI"),
        Some("/cgi-bin/env.pl/p?x=1"),
        "{env:#?}"
    );
    assert_eq!(get("SCRIPT_NAME"), Some("/cgi-bin/env.pl"), "{env:#?}");
    assert_eq!(get("PATH_INFO"), Some("/p"), "{env:#?}");
    assert_eq!(get("QUERY_STRING"), Some("x=1"), "{env:#?}");
    // HTTP/1.0 needs no Host: the authority is the script's HTTP_HOST all
    // the same.
    let (_, env, _) = env_request(
        &site,
        b"GET HTTP://evil.example/cgi-bin/env.pl HTTP/1.0\r\n\r\n",
    );
    assert_eq!(
        env.get("SERVER_NAME").map(String::as_str),
        Some("evil.example")
    );
    assert_eq!(
        env.get("HTTP_HOST").map(String::as_str),
        Some("evil.example")
    );
    assert_eq!(
        env.get("REQUEST_URI").map(String::as_str),
        Some("/cgi-bin/env.pl")
    );
}

#[test]
fn rfc9112_3_2_a_host_that_is_not_uri_host_is_400_and_never_reaches_a_script() {
    let site = Site::default_site();
    for host in ["../../etc/x y", "../../etc", "a/b"] {
        let r = site.request(
            format!("GET /cgi-bin/flood.sh?1 HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 400, "Host: {host}: {r:?}");
    }
    assert!(
        !site.cgi_bin.join("flood.pid").exists(),
        "the script ran for a bad Host"
    );
}

#[test]
fn rfc3875_4_1_18_headers_become_http_variables_repeated_ones_joined_underscored_ones_dropped() {
    require_perl();
    let site = Site::default_site();
    let (_, env, _) = env_request(
        &site,
        b"GET /cgi-bin/env.pl HTTP/1.1\r\nHost: t\r\nAccept: text/plain\r\nX-Multi: one\r\n\
          x-multi: two\r\nX_Real_IP: 6.6.6.6\r\nX-Real-IP: 10.0.0.1\r\nAccept-Language: fr, en;q=0.5\r\n\r\n",
    );
    assert_eq!(env["HTTP_ACCEPT"], "text/plain");
    assert_eq!(env["HTTP_X_MULTI"], "one, two");
    assert_eq!(env["HTTP_ACCEPT_LANGUAGE"], "fr, en;q=0.5");
    // A field spelled with `_` would pose as X-Real-IP: dropped.
    assert_eq!(env["HTTP_X_REAL_IP"], "10.0.0.1");
}

#[test]
fn rfc3875_4_1_5_path_info_and_script_name_split_a_nested_path_at_the_script_and_it_runs_in_its_directory(
) {
    let site = Site::default_site();
    let r = site.get("/cgi-bin/sub/script.sh/a/b");
    assert_eq!(r.status, 200, "{r:?}");
    let t = r.text();
    let www = site.www.display();
    let sub = site.cgi_bin.join("sub");
    assert!(t.contains("SCRIPT_NAME=/cgi-bin/sub/script.sh\n"), "{t}");
    assert!(t.contains("PATH_INFO=/a/b\n"), "{t}");
    assert!(t.contains(&format!("PATH_TRANSLATED={www}/a/b\n")), "{t}");
    assert!(
        t.contains(&format!(
            "SCRIPT_FILENAME={}\n",
            sub.join("script.sh").display()
        )),
        "{t}"
    );
    // §7.2: the current directory is the script's.
    assert!(t.contains(&format!("PWD={}\n", sub.display())), "{t}");

    // Without path info, and with a trailing slash as path info.
    let t = site.get("/cgi-bin/sub/script.sh").text();
    assert!(t.contains("SCRIPT_NAME=/cgi-bin/sub/script.sh\n"), "{t}");
    assert!(
        t.contains("PATH_INFO=unset\n") || t.contains("PATH_INFO=\n"),
        "{t}"
    );
    assert!(
        t.contains("PATH_TRANSLATED=unset\n") || t.contains("PATH_TRANSLATED=\n"),
        "{t}"
    );
    let t = site.get("/cgi-bin/sub/script.sh/").text();
    assert!(t.contains("SCRIPT_NAME=/cgi-bin/sub/script.sh\n"), "{t}");
    assert!(t.contains("PATH_INFO=/\n"), "{t}");
}

#[test]
fn cve_2016_5385_httpoxy_a_proxy_header_never_becomes_http_proxy() {
    require_perl();
    let site = Site::default_site();
    let (_, env, _) = env_request(
        &site,
        b"GET /cgi-bin/env.pl HTTP/1.1\r\nHost: t\r\nProxy: http://evil.example:666\r\n\r\n",
    );
    assert!(!env.contains_key("HTTP_PROXY"), "{env:#?}");
    assert!(
        !env.values().any(|v| v.contains("evil.example")),
        "{env:#?}"
    );
}

#[test]
fn rfc3875_4_1_18_authorization_is_not_passed_by_default() {
    require_perl();
    let site = Site::default_site();
    let (_, env, _) = env_request(
        &site,
        b"GET /cgi-bin/env.pl HTTP/1.1\r\nHost: t\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n",
    );
    assert!(!env.contains_key("HTTP_AUTHORIZATION"), "{env:#?}");
    assert!(
        !env.values().any(|v| v.contains("dXNlcjpwYXNz")),
        "{env:#?}"
    );
    assert!(!env.contains_key("AUTH_TYPE") && !env.contains_key("REMOTE_USER"));
}

#[test]
fn authorization_is_passed_as_http_authorization_with_pass_authorization() {
    require_perl();
    let site = Site::start(Opts {
        pass_authorization: true,
        ..Opts::default()
    });
    let (_, env, _) = env_request(
        &site,
        b"GET /cgi-bin/env.pl HTTP/1.1\r\nHost: t\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n",
    );
    assert_eq!(
        env.get("HTTP_AUTHORIZATION").map(String::as_str),
        Some("Basic dXNlcjpwYXNz"),
        "{env:#?}"
    );
    // Passing the header is not authenticating the user.
    assert!(!env.contains_key("AUTH_TYPE") && !env.contains_key("REMOTE_USER"));
}

// ---------------------------------------------------------------------------
// Forms and bodies

#[test]
fn perl_reads_a_get_form_from_the_query_string() {
    require_perl();
    let site = Site::default_site();
    let r =
        site.get("/cgi-bin/form.pl?name=J%C3%BCrgen+M%C3%BCller&tags=a&tags=b&empty=&amp=%26%3D");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.text(),
        "method=GET\nfield name=Jürgen Müller\nfield tags=a\nfield tags=b\nfield empty=\nfield amp=&=\n"
    );
}

#[test]
fn perl_reads_a_urlencoded_post_form() {
    require_perl();
    let site = Site::default_site();
    let body = "comment=Hello%2C+world%21%0D%0ALine+2&n=42";
    let r = site.request(
        format!(
            "POST /cgi-bin/form.pl?from=query HTTP/1.1\r\nHost: t\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.text(),
        "method=POST\nfield from=query\nfield comment=Hello, world!\r\nLine 2\nfield n=42\n"
    );
}

#[test]
fn perl_reads_a_multipart_form_with_a_file_upload_and_echoes_the_file() {
    require_perl();
    let site = Site::default_site();
    // Binary content with CRLFs, NULs and dashes, as uploads have.
    let mut file = pattern(70_000, 3);
    file.extend_from_slice(b"\r\n--not-the-boundary\r\n\0\0end");
    let boundary = "----stoa-test-boundary-7MA4YWxkTrZu0gW";
    let body = multipart(
        boundary,
        &[("title", "A title"), ("note", "two\r\nlines")],
        &[("upload", "data.bin", &file)],
    );
    let mut req = format!(
        "POST /cgi-bin/form.pl HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let r = site.request(&req);
    assert_eq!(r.status, 200, "{r:?}");
    let head = format!(
        "method=POST\nfield title=A title\nfield note=two\r\nlines\nfile upload filename=data.bin length={}\n",
        file.len()
    );
    let mut want = head.into_bytes();
    want.extend_from_slice(&file);
    want.extend_from_slice(b"\n--end of file--\n");
    assert_eq!(r.body.len(), want.len(), "{r:?}");
    assert!(r.body == want, "the uploaded file came back changed");
}

#[test]
fn rfc3875_4_1_2_a_chunked_body_reaches_the_script_with_an_exact_content_length() {
    let site = Site::default_site();
    let body = b"hello, chunked world: 0123456789".repeat(10);
    let mut req =
        b"POST /cgi-bin/echo.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend_from_slice(&chunked(&body, 7));
    let r = site.request(&req);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("x-content-length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(r.body, body);
}

#[test]
fn rfc3875_4_1_2_a_chunked_body_over_1_mib_spills_to_a_file_and_keeps_an_exact_content_length() {
    let site = Site::default_site();
    let body = pattern(3 * 1024 * 1024 / 2 + 7, 11);
    let mut req =
        b"POST /cgi-bin/echo.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend_from_slice(&chunked(&body, 65_536 - 3));
    let r = site.request(&req);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("x-content-length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(r.body.len(), body.len());
    assert!(r.body == body, "the echoed body differs");
}

#[test]
fn a_content_length_body_larger_than_the_pipes_streams_through_an_echoing_script() {
    let site = Site::default_site();
    let body = pattern(3 * 1024 * 1024, 5);
    let mut c = site.connect();
    let mut w = c.stream.try_clone().expect("clone");
    let head = format!(
        "POST /cgi-bin/echo.sh HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let sent = body.clone();
    // Writing and reading at once: the script echoes as it reads, so a
    // client that only wrote would deadlock against any server.
    let writer = std::thread::spawn(move || {
        w.write_all(head.as_bytes())?;
        w.write_all(&sent)
    });
    let r = c.read();
    writer.join().expect("writer").expect("send body");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("x-content-length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(r.body.len(), body.len());
    assert!(r.body == body, "the echoed body differs");
}

#[test]
fn rfc9110_10_1_1_a_post_with_expect_100_continue_gets_100_then_the_script_reads_the_body() {
    let site = Site::default_site();
    for framing in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
        let mut c = site.connect();
        c.send(
            format!(
                "POST /cgi-bin/echo.sh HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n{framing}\r\n\r\n"
            )
            .as_bytes(),
        );
        let interim = c.try_read(true).expect("an interim response");
        assert_eq!(interim.status, 100, "{framing}: {interim:?}");
        c.send(if framing.starts_with("Content") {
            b"hello"
        } else {
            b"5\r\nhello\r\n0\r\n\r\n"
        });
        let r = c.read_final();
        assert_eq!(r.status, 200, "{framing}: {r:?}");
        assert_eq!(r.header("x-content-length"), Some("5"), "{framing}");
        assert_eq!(r.text(), "hello", "{framing}");
    }
}

#[test]
fn a_script_that_ignores_a_large_request_body_still_gets_its_answer_to_the_client() {
    let site = Site::default_site();
    let body = vec![b'z'; 4 * 1024 * 1024];
    let mut c = site.connect();
    let mut w = c.stream.try_clone().expect("clone");
    let head = format!(
        "POST /cgi-bin/hello.sh HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    // The server may stop reading once the script has answered: the
    // writer's errors are expected, the response must still arrive.
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(head.as_bytes());
        let _ = w.write_all(&body);
    });
    let r = c.read();
    let _ = writer.join();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "hello from sh\n");
}

#[test]
fn a_body_over_max_body_bytes_gets_413_chunked_or_not_and_the_script_never_runs() {
    let site = Site::start(Opts {
        top: "[limits]\nmax_body_bytes = 65536\n".into(),
        ..Opts::default()
    });
    let body = vec![b'x'; 100_000];
    let mut req =
        b"POST /cgi-bin/flood.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    req.extend_from_slice(&chunked(&body, 16_384));
    let mut c = site.connect();
    let _ = c.try_send(&req);
    let r = c.read_final();
    assert_eq!(r.status, 413, "{r:?}");
    let mut req = format!(
        "POST /cgi-bin/flood.sh HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let mut c = site.connect();
    let _ = c.try_send(&req);
    let r = c.read_final();
    assert_eq!(r.status, 413, "{r:?}");
    assert!(
        !site.cgi_bin.join("flood.pid").exists(),
        "the script ran for a refused body"
    );
}

#[test]
fn rfc9112_7_1_an_absurd_chunk_size_is_400_at_once_and_the_script_never_runs() {
    let site = Site::default_site();
    for size in ["ffffffffffffffff", "8000000000000000", "00000000000000001"] {
        let mut c = site.connect();
        let mut req = format!(
            "POST /cgi-bin/flood.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\n"
        )
        .into_bytes();
        // Some of the chunk, and the client keeps the connection open.
        req.extend_from_slice(&[b'x'; 1000]);
        c.send(&req);
        let t = Instant::now();
        let r = c.read_final();
        assert_eq!(r.status, 400, "chunk size {size}: {r:?}");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(r.has_token("connection", "close"), "{r:?}");
    }
    assert!(
        !site.cgi_bin.join("flood.pid").exists(),
        "the script ran for a broken body"
    );
}

#[test]
fn rfc9110_15_5_14_a_chunk_announced_past_max_body_bytes_is_413_before_its_data_comes() {
    let site = Site::start(Opts {
        top: "[limits]\nmax_body_bytes = 65536\n".into(),
        ..Opts::default()
    });
    let mut c = site.connect();
    let mut req =
        b"POST /cgi-bin/flood.sh HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          10\r\n0123456789abcdef\r\n10000000\r\n"
            .to_vec();
    req.extend_from_slice(&[b'x'; 1000]);
    c.send(&req);
    let t = Instant::now();
    let r = c.read_final();
    assert_eq!(r.status, 413, "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(
        !site.cgi_bin.join("flood.pid").exists(),
        "the script ran for a refused body"
    );
}

// ---------------------------------------------------------------------------
// Languages

#[test]
fn a_c_program_compiled_at_test_time_answers_get_and_post() {
    let site = Site::default_site();
    site.compile_c("hello");
    let r = site.get("/cgi-bin/hello?lang=c");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-lang"), Some("C"));
    assert_eq!(r.text(), "hello from C\nmethod=GET\nquery=lang=c\nread=0\n");
    let r = site.request(
        b"POST /cgi-bin/hello HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world",
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "hello from C\nmethod=POST\nquery=\nread=11\n");
}

#[test]
fn php_cgi_runs_a_php_page_under_the_site_root() {
    let site = Site::start(Opts {
        php: true,
        ..Opts::default()
    });
    let r = site.get("/index.php?name=Zo%C3%AB");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-php"), Some("yes"), "{r:?}");
    let t = r.text();
    assert!(t.starts_with("php says 42\n"), "{t}");
    assert!(t.contains("SCRIPT_NAME=/index.php\n"), "{t}");
    assert!(
        t.contains(&format!(
            "SCRIPT_FILENAME={}\n",
            site.www.join("index.php").display()
        )),
        "{t}"
    );
    assert!(t.contains("name=Zoë\n"), "{t}");
    assert!(!t.contains("<?php"), "source shown: {t}");

    let r = site.request(
        b"POST /index.php HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\n\
          Content-Length: 17\r\n\r\np=posted+value%21",
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.text().contains("method=POST\n"), "{r:?}");
    assert!(r.text().contains("posted=posted value!\n"), "{r:?}");

    // CVE-2016-5385 for PHP, whose getenv() reads the environment.
    let r =
        site.request(b"GET /index.php HTTP/1.1\r\nHost: t\r\nProxy: http://evil.example/\r\n\r\n");
    assert!(r.text().contains("HTTP_PROXY=false\n"), "{r:?}");

    // header("Location: /...") from PHP comes with a Status: it is a
    // client redirect, not a local one.
    let r = site.get("/redirect.php");
    assert_eq!(r.status, 302, "{r:?}");
    assert_eq!(r.header("location"), Some("/index.php?name=redirected"));
}

#[test]
fn a_php_page_source_is_never_served_whatever_the_spelling_of_its_path() {
    let site = Site::start(Opts {
        php: true,
        ..Opts::default()
    });
    let mut leaks = Vec::new();
    for path in [
        "/index.php",
        "/index%2ephp",
        "/index.ph%70",
        "/index%2Ephp?x=1",
        "/%69ndex.php",
        "//index.php",
        "/./index.php",
        "/index.php/",
        "/index.php%00.txt",
        "/index%0a.php",
    ] {
        let r = site.get(path);
        let t = r.text();
        if t.contains("<?php") || t.contains("6 * 7") {
            leaks.push(format!(
                "{path} -> {} {:?}",
                r.status,
                r.header("content-type")
            ));
        } else if r.status == 200 {
            assert!(t.starts_with("php says 42\n"), "{path}: {r:?}");
        } else {
            assert!((400..500).contains(&r.status), "{path}: {r:?}");
        }
    }
    // CVE-2019-11043's newline, and a NUL, are refused outright.
    for path in ["/index.php%00.txt", "/index%0a.php", "/index.php/%0a.php"] {
        assert_eq!(site.get(path).status, 400, "{path}");
    }
    assert!(
        leaks.is_empty(),
        "PHP source served as a static file: {leaks:#?}"
    );
}

// ---------------------------------------------------------------------------
// Response heads (RFC 3875 §6)

#[test]
fn rfc3875_6_2_2_a_local_redirect_is_served_inside_the_server_as_a_get() {
    let site = Site::default_site();
    let r = site.get("/cgi-bin/redirect-local.sh?orig=1");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("location").is_none(), "{r:?}");
    let t = r.text();
    assert!(t.starts_with("target reached\n"), "{t}");
    assert!(t.contains("QUERY_STRING=via=local\n"), "{t}");
    assert!(t.contains("SCRIPT_NAME=/cgi-bin/target.sh\n"), "{t}");

    // To a static file.
    let r = site.get("/cgi-bin/redirect-static.sh");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "static file content\n");

    // A POST's local redirect is a GET without the body.
    let r = site.request(
        b"POST /cgi-bin/redirect-local.sh HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let t = r.text();
    assert!(t.contains("REQUEST_METHOD=GET\n"), "{t}");
    assert!(t.contains("CONTENT_LENGTH=unset\n"), "{t}");
}

#[test]
fn rfc3875_6_2_2_a_local_redirect_loop_ends_in_500() {
    let site = Site::default_site();
    let t0 = Instant::now();
    let mut c = site.connect();
    let r = c.request(&get("/cgi-bin/loop.sh"));
    assert_eq!(r.status, 500, "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
}

#[test]
fn rfc3875_6_2_3_an_absolute_location_is_a_302_client_redirect() {
    let site = Site::default_site();
    let r = site.get("/cgi-bin/redirect-client.sh");
    assert_eq!(r.status, 302, "{r:?}");
    assert_eq!(
        r.header("location"),
        Some("http://example.com/elsewhere?x=1")
    );
}

#[test]
fn rfc3875_6_2_4_status_with_location_is_a_client_redirect_with_that_status() {
    let site = Site::default_site();
    let r = site.get("/cgi-bin/redirect-301.sh");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("location"), Some("https://example.com/moved"));
    assert_eq!(r.text(), "moved for good\n");
    // A local path with a Status goes to the client too.
    let r = site.get("/cgi-bin/redirect-303-local.sh");
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header("location"), Some("/static.txt"));
}

#[test]
fn rfc3875_5_an_nph_script_output_is_passed_untouched() {
    let site = Site::default_site();
    let mut c = site.connect();
    c.send(&get("/cgi-bin/nph-raw.sh"));
    let (_, raw) = c
        .wait_closed(Duration::from_secs(5))
        .expect("the connection closes after an NPH response");
    assert_eq!(
        String::from_utf8_lossy(&raw),
        "HTTP/1.1 299 Passed Untouched\r\nX-Nph: raw\r\nContent-Type: text/plain\r\n\r\nnph body, not chunked\n"
    );
}

/// `curl --http2-prior-knowledge -i`: (exit ok, head and body as text).
fn curl_h2c(addr: std::net::SocketAddr, path: &str, extra: &[&str]) -> (bool, String) {
    require("curl", "curl");
    let out = std::process::Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "--http2-prior-knowledge"])
        .args(extra)
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("run curl");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn rfc3875_5_an_nph_script_over_http2_has_its_status_line_and_fields_re_emitted_rfc9113_8_3_2() {
    let site = Site::default_site();
    let script = |name: &str, text: &str| {
        let p = site.cgi_bin.join(name);
        std::fs::write(&p, text).expect("write script");
        chmod(&p, 0o755);
    };
    // Chunked, with fields HTTP/2 forbids (RFC 9113 §8.2.2) and its own
    // Date and Server, which give way to Stoa's.
    script(
        "nph-chunked.sh",
        "#!/bin/sh\nprintf 'HTTP/1.1 201 Made\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\
         Date: Thu, 01 Jan 1970 00:00:00 GMT\r\nServer: nph\r\nX-Nph: chunked\r\n\r\n'\n\
         printf '5\r\nhello\r\n'\nsleep 0.1\nprintf '7\r\n, world\r\n0\r\n\r\n'\n",
    );
    script(
        "nph-length.sh",
        "#!/bin/sh\nprintf 'HTTP/1.0 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\nfourIGNORED'\n",
    );
    script("nph-garbage.sh", "#!/bin/sh\necho 'this is not HTTP'\n");

    // Close-delimited (no length): the body is what follows the head.
    let (ok, text) = curl_h2c(site.addr, "/cgi-bin/nph-raw.sh", &[]);
    assert!(ok, "{text}");
    assert!(text.starts_with("HTTP/2 299"), "{text}");
    assert!(text.contains("\r\nx-nph: raw\r\n"), "{text}");
    assert!(text.contains("\r\ncontent-type: text/plain\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nnph body, not chunked\n"), "{text}");

    // curl refuses a response with connection-specific fields: ok means
    // they were dropped; the chunks arrive as one body.
    let (ok, text) = curl_h2c(site.addr, "/cgi-bin/nph-chunked.sh", &[]);
    assert!(ok, "{text}");
    assert!(text.starts_with("HTTP/2 201"), "{text}");
    assert!(text.contains("\r\nx-nph: chunked\r\n"), "{text}");
    assert!(text.contains("\r\nserver: stoa\r\n"), "{text}");
    assert_eq!(text.matches("server:").count(), 1, "{text}");
    assert!(!text.contains("1970"), "{text}");
    assert!(text.ends_with("\r\n\r\nhello, world"), "{text}");

    // A Content-Length: exactly that many bytes.
    let (ok, text) = curl_h2c(site.addr, "/cgi-bin/nph-length.sh", &[]);
    assert!(ok, "{text}");
    assert!(text.starts_with("HTTP/2 200"), "{text}");
    assert!(text.contains("content-length: 4\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nfour"), "{text}");
    // HEAD: the head, the length, no body.
    let (ok, text) = curl_h2c(site.addr, "/cgi-bin/nph-length.sh", &["-I"]);
    assert!(ok, "{text}");
    assert!(text.contains("content-length: 4\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "{text}");

    // Output that is not an HTTP response: 502.
    let (ok, text) = curl_h2c(site.addr, "/cgi-bin/nph-garbage.sh", &[]);
    assert!(ok, "{text}");
    assert!(text.starts_with("HTTP/2 502"), "{text}");

    // HTTP/1.1 on the same server still gets the bytes untouched.
    let mut c = site.connect();
    c.send(&get("/cgi-bin/nph-chunked.sh"));
    let (_, raw) = c.wait_closed(Duration::from_secs(5)).expect("closed");
    assert!(
        raw.starts_with(b"HTTP/1.1 201 Made\r\nConnection: keep-alive\r\n"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
}

#[test]
fn rfc3875_6_3_3_a_status_404_from_a_script_reaches_the_client_with_its_body() {
    let site = Site::default_site();
    let r = site.get("/cgi-bin/notfound.sh");
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(r.header("x-script"), Some("notfound.sh"));
    assert_eq!(r.text(), "no such thing here\n");
}

#[test]
fn a_script_that_exits_without_output_gets_502() {
    let site = Site::default_site();
    let t0 = Instant::now();
    let r = site.get("/cgi-bin/silent.sh");
    assert_eq!(r.status, 502, "{r:?}");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "not at once: {:?}",
        t0.elapsed()
    );
}

#[test]
fn rfc3875_6_2_a_malformed_head_gets_502() {
    let site = Site::default_site();
    let r = site.get("/cgi-bin/malformed.sh");
    assert_eq!(r.status, 502, "{r:?}");
    assert!(!r.text().contains("body"), "{r:?}");
}

#[test]
fn a_script_that_hangs_gets_504_at_the_timeout_and_its_whole_process_group_is_killed() {
    let site = Site::default_site(); // timeout = "2s"
    let mut c = site.connect();
    let t0 = Instant::now();
    c.send(&get("/cgi-bin/hang.sh"));
    let pgid = site.wait_pid_file("hang.pid", Duration::from_secs(3));
    // The shell and its two sleeps, all in the script's own group.
    assert!(
        eventually(Duration::from_secs(1), || group_alive(pgid).len() >= 3),
        "expected the script and its children in group {pgid}: {:?}",
        group_alive(pgid)
    );
    let r = c.read();
    let took = t0.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(4000),
        "504 after {took:?}, timeout is 2s"
    );
    if let Err(alive) = wait_group_gone(pgid, Duration::from_secs(2)) {
        panic!("processes of the script's group {pgid} survive the timeout: {alive:?}");
    }
}

#[test]
fn a_client_that_disconnects_mid_output_gets_the_script_group_killed() {
    let site = Site::start(Opts {
        timeout: "30s",
        ..Opts::default()
    });
    let mut c = site.connect();
    c.send(&get("/cgi-bin/endless.sh"));
    let r = c.try_read(true).expect("head");
    assert_eq!(r.status, 200, "{r:?}");
    let some = c.read_raw(100_000).expect("some output");
    assert!(contains(&some, b"stoa-endless-output"));
    let pgid = site.wait_pid_file("endless.pid", Duration::from_secs(2));
    assert!(group_alive(pgid).len() >= 2, "{:?}", group_alive(pgid));
    drop(c);
    if let Err(alive) = wait_group_gone(pgid, Duration::from_secs(4)) {
        panic!("the script's group {pgid} outlives its client: {alive:?}");
    }
}

#[test]
fn a_client_that_disconnects_before_the_head_gets_the_script_group_killed() {
    let site = Site::start(Opts {
        timeout: "30s",
        ..Opts::default()
    });
    let mut c = site.connect();
    c.send(&get("/cgi-bin/hang.sh"));
    let pgid = site.wait_pid_file("hang.pid", Duration::from_secs(3));
    assert!(eventually(Duration::from_secs(1), || group_alive(pgid)
        .len()
        >= 3));
    drop(c);
    if let Err(alive) = wait_group_gone(pgid, Duration::from_secs(4)) {
        panic!("the script's group {pgid} outlives its client: {alive:?}");
    }
}

#[test]
fn a_flooding_script_and_a_stalled_client_keep_server_memory_bounded() {
    const TOTAL: u64 = 200 * 1024 * 1024;
    const LIMIT_KIB: u64 = 64 * 1024;
    let site = Site::start(Opts {
        timeout: "30s",
        ..Opts::default()
    });
    let before = rss_kib(site.pid());
    let mut c = site.connect();
    c.set_recv_buffer(64 * 1024);
    c.send(&get(&format!("/cgi-bin/flood.sh?{TOTAL}")));
    let r = c.try_read(true).expect("head");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.has_token("transfer-encoding", "chunked"), "{r:?}");
    // Read nothing for a while: the script must be held back, not buffered.
    let mut peak = 0;
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(250));
        peak = peak.max(rss_kib(site.pid()));
    }
    assert!(
        peak < LIMIT_KIB,
        "server RSS reached {peak} KiB (from {before} KiB) while the client stalled"
    );
    let pending = c.take_pending();
    let t0 = Instant::now();
    let _ = c.stream.set_read_timeout(Some(Duration::from_secs(10)));
    let n = count_chunked(&mut c.stream, pending).expect("read the whole flood");
    assert_eq!(n, TOTAL, "bytes received");
    peak = peak.max(rss_kib(site.pid()));
    assert!(peak < LIMIT_KIB, "server RSS reached {peak} KiB");
    eprintln!(
        "flood: {TOTAL} bytes in {:?}, RSS {before} -> peak {peak} KiB",
        t0.elapsed()
    );
    // The connection stays usable.
    let r = c.request(&get("/cgi-bin/hello.sh"));
    assert_eq!(r.text(), "hello from sh\n");
}

// ---------------------------------------------------------------------------
// Resolution and traversal

fn assert_refused(site: &Site, path: &str, statuses: &[u16]) {
    let r = site.get(path);
    let t = r.text();
    assert!(
        statuses.contains(&r.status),
        "{path}: want one of {statuses:?}, got {r:?}"
    );
    assert!(
        !t.contains("EXECUTED-OUTSIDE-CGI-BIN"),
        "{path} ran a script outside cgi-bin"
    );
    assert!(
        !t.contains("#!/bin/sh"),
        "{path} showed a script's source: {t}"
    );
    assert!(
        !t.contains("SECRET-SOURCE-MARKER"),
        "{path} showed a script's source: {t}"
    );
}

#[test]
fn dot_segments_and_encoded_dots_never_leave_cgi_bin() {
    let site = Site::default_site();
    for path in [
        "/cgi-bin/../www/x",
        "/cgi-bin/../outside/evil.sh",
        "/cgi-bin/%2e%2e/outside/evil.sh",
        "/cgi-bin/%2E%2E/www/x",
        "/cgi-bin/sub/../../outside/evil.sh",
        "/cgi-bin/.%2e/outside/evil.sh",
        "/cgi-bin/..%2foutside/evil.sh",
        "/cgi-bin/%2e%2e%2foutside%2fevil.sh",
        "/cgi-bin/..%5coutside%5cevil.sh",
        "/cgi-bin/../../../../../../bin/sh",
    ] {
        assert_refused(&site, path, &[400, 403, 404]);
    }
}

#[test]
fn a_symlink_in_cgi_bin_pointing_outside_it_is_refused_with_403() {
    let site = Site::default_site();
    assert_refused(&site, "/cgi-bin/link.sh", &[403]);
    assert_refused(&site, "/cgi-bin/link.sh/path/info", &[403]);
    assert_refused(&site, "/cgi-bin/linkdir/evil.sh", &[403]);
}

#[test]
fn a_non_executable_file_in_cgi_bin_is_403_and_its_source_is_never_shown() {
    let site = Site::default_site();
    assert_refused(&site, "/cgi-bin/noexec.sh", &[403]);
    assert_refused(&site, "/cgi-bin/noexec.sh/more", &[403]);
    let mut c = site.connect();
    c.send(&request("HEAD", "/cgi-bin/noexec.sh", &[]));
    assert_eq!(c.read_head().status, 403);
}

#[test]
fn a_directory_in_cgi_bin_is_403() {
    let site = Site::default_site();
    assert_refused(&site, "/cgi-bin/sub", &[403]);
    assert_refused(&site, "/cgi-bin/sub/", &[403]);
    assert_refused(&site, "/cgi-bin/", &[403]);
    assert_refused(&site, "/cgi-bin/nonexistent.sh", &[404]);
}

#[test]
fn cve_2019_11043_a_newline_or_nul_in_the_path_is_400() {
    let site = Site::default_site();
    for path in [
        "/cgi-bin/hello.sh%0a",
        "/cgi-bin/hello.sh/%0a",
        "/cgi-bin/hello.sh/a%0ab",
        "/cgi-bin/hello.sh/a%0db",
        "/cgi-bin/hello.sh%00.txt",
        "/cgi-bin/hello.sh/a%00b",
        "/cgi-bin/sub%0a/script.sh",
    ] {
        let r = site.get(path);
        assert_eq!(r.status, 400, "{path}: {r:?}");
        assert!(!r.text().contains("hello from sh"), "{path} ran: {r:?}");
    }
}

#[test]
fn scripts_under_the_site_root_are_never_served_as_source_through_another_spelling() {
    // Some sites keep cgi-bin inside the document root. Whatever path
    // spelling misses the raw `/cgi-bin/` prefix must not reach the static
    // handler with a normalized path that shows the script.
    let site = Site::start(Opts {
        cgi_in_root: true,
        ..Opts::default()
    });
    let r = site.get("/cgi-bin/hello.sh");
    assert_eq!(r.text(), "hello from sh\n", "{r:?}");
    let mut leaks = Vec::new();
    for path in [
        "//cgi-bin/hello.sh",
        "/./cgi-bin/hello.sh",
        "/www/../cgi-bin/hello.sh",
        "/cgi%2dbin/hello.sh",
        "/%63gi-bin/hello.sh",
        "/cgi-bin%2fhello.sh",
    ] {
        let r = site.get(path);
        let t = r.text();
        if t.contains("#!/bin/sh") {
            leaks.push(format!(
                "{path} -> {} {:?}",
                r.status,
                r.header("content-type")
            ));
        } else if r.status == 200 {
            assert_eq!(t, "hello from sh\n", "{path}");
        } else {
            assert!((400..500).contains(&r.status), "{path}: {r:?}");
        }
    }
    assert!(
        leaks.is_empty(),
        "script source served as a static file: {leaks:#?}"
    );
}

// ---------------------------------------------------------------------------
// Limits, connections, logs and process hygiene

#[test]
fn max_processes_1_with_a_queue_of_1_gives_one_200_and_503s_for_the_others() {
    let site = Site::start(Opts {
        timeout: "10s",
        top: "[cgi]\nmax_processes = 1\nqueue = 1\nqueue_timeout = \"1s\"\n".into(),
        ..Opts::default()
    });
    let addr = site.addr;
    let timed = move || {
        let t0 = Instant::now();
        let r = Conn::connect(addr).request(&get("/cgi-bin/slow.sh"));
        (r, t0.elapsed())
    };
    let a = std::thread::spawn(timed);
    assert!(
        eventually(Duration::from_secs(3), || site
            .cgi_bin
            .join("started")
            .exists()),
        "the first request's script never started"
    );
    // The second waits in the queue...
    let b = std::thread::spawn(timed);
    std::thread::sleep(Duration::from_millis(250));
    // ...so the third finds the queue full.
    let (rc, tc) = timed();
    assert_eq!(rc.status, 503, "third: {rc:?}");
    assert_eq!(rc.header("retry-after"), Some("1"));
    assert!(
        tc < Duration::from_millis(700),
        "a full queue answers at once: {tc:?}"
    );
    let (rb, tb) = b.join().expect("second");
    assert_eq!(rb.status, 503, "second, after queue_timeout: {rb:?}");
    assert!(
        tb >= Duration::from_millis(900) && tb < Duration::from_millis(1800),
        "the queued request waits queue_timeout (1s): {tb:?}"
    );
    let (ra, _) = a.join().expect("first");
    assert_eq!(ra.status, 200, "first: {ra:?}");
    assert_eq!(ra.text(), "slept\n");
}

#[test]
fn an_http_1_0_request_gets_close_delimited_output_without_chunking() {
    let site = Site::default_site();
    let mut c = site.connect();
    c.send(b"GET /cgi-bin/hello.sh HTTP/1.0\r\nHost: t\r\n\r\n");
    let (_, raw) = c
        .wait_closed(Duration::from_secs(5))
        .expect("closed after the body");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1."), "{head}");
    assert!(head.contains(" 200 "), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(!lower.contains("transfer-encoding"), "{head}");
    assert!(!lower.contains("content-length"), "{head}");
    assert_eq!(body, "hello from sh\n");
}

#[test]
fn a_keep_alive_connection_serves_several_cgi_requests_in_a_row() {
    require_perl();
    let site = Site::default_site();
    let mut c = site.connect();
    let r1 = c.request(&get("/cgi-bin/env.pl?n=1"));
    assert_eq!(r1.status, 200);
    assert!(r1.has_token("transfer-encoding", "chunked"), "{r1:?}");
    let r2 =
        c.request(b"POST /cgi-bin/echo.sh HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(r2.text(), "abc");
    let r3 = c.request(&get("/cgi-bin/env.pl?n=3"));
    let (e1, _) = env_of(&r1.body);
    let (e3, _) = env_of(&r3.body);
    assert_eq!(e1["QUERY_STRING"], "n=1");
    assert_eq!(e3["QUERY_STRING"], "n=3");
    assert_eq!(e1["REMOTE_PORT"], e3["REMOTE_PORT"], "same connection");
    assert!(c.pending().is_empty());
}

#[test]
fn an_http_1_0_keep_alive_request_still_gets_close_delimited_output_when_the_length_is_unknown() {
    let site = Site::default_site();
    let mut c = site.connect();
    c.send(b"GET /cgi-bin/hello.sh HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n");
    let (_, raw) = c
        .wait_closed(Duration::from_secs(5))
        .expect("closed after the body");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    assert!(
        !head.to_ascii_lowercase().contains("transfer-encoding"),
        "{head}"
    );
    assert!(!head.to_ascii_lowercase().contains("keep-alive"), "{head}");
    assert_eq!(body, "hello from sh\n");
}

#[test]
fn a_script_content_length_is_kept_and_the_connection_stays_open() {
    let site = Site::default_site();
    let mut c = site.connect();
    for _ in 0..2 {
        let r = c.request(&get("/cgi-bin/length.sh"));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.content_length(), Some(6), "{r:?}");
        assert!(r.header("transfer-encoding").is_none(), "{r:?}");
        assert_eq!(r.text(), "sized\n");
    }
    // HTTP/1.0 with keep-alive: the length allows it.
    let r = c.request(b"GET /cgi-bin/length.sh HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.text(), "sized\n");
}

#[test]
fn rfc3875_6_3_framing_and_connection_fields_from_a_script_never_reach_the_client() {
    let site = Site::default_site();
    let mut c = site.connect();
    let r = c.request(&get("/cgi-bin/hopbyhop.sh"));
    assert_eq!(r.status, 418, "{r:?}");
    assert_eq!(r.header("x-custom"), Some("kept"));
    assert_eq!(r.header_count("transfer-encoding"), 1, "{r:?}");
    assert!(r.header("keep-alive").is_none(), "{r:?}");
    assert!(!r.has_token("connection", "close"), "{r:?}");
    assert_eq!(r.header("server"), Some("stoa"), "{r:?}");
    assert_ne!(r.header("date"), Some("Mon, 01 Jan 1990 00:00:00 GMT"));
    assert_eq!(r.text(), "not a chunk\n");
    // The connection is still in step.
    assert_eq!(c.request(&get("/cgi-bin/length.sh")).text(), "sized\n");
}

#[test]
fn pipelined_requests_to_scripts_are_answered_in_order() {
    let site = Site::default_site();
    let mut c = site.connect();
    let mut reqs = get("/cgi-bin/target.sh?n=1");
    reqs.extend_from_slice(
        b"POST /cgi-bin/echo.sh HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody",
    );
    reqs.extend_from_slice(&get("/cgi-bin/length.sh"));
    reqs.extend_from_slice(&get("/cgi-bin/target.sh?n=4"));
    c.send(&reqs);
    assert!(c.read().text().contains("QUERY_STRING=n=1\n"));
    assert_eq!(c.read().text(), "body");
    assert_eq!(c.read().text(), "sized\n");
    assert!(c.read().text().contains("QUERY_STRING=n=4\n"));
    assert!(c.stays_silent(Duration::from_millis(100)));
}

#[test]
fn head_to_a_cgi_script_returns_the_headers_without_a_body() {
    let site = Site::default_site();
    let mut c = site.connect();
    c.send(&request("HEAD", "/cgi-bin/hello.sh", &[]));
    let r = c.read_head();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("x-script"), Some("hello.sh"));
    // Had a body followed, it would be taken for the next response.
    let r = c.request(&get("/cgi-bin/hello.sh"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "hello from sh\n");
    assert!(c.pending().is_empty());
}

#[test]
fn stderr_lines_appear_in_the_server_log_tagged_with_the_script() {
    let site = Site::default_site();
    let from = site.stderr().len();
    let r = site.get("/cgi-bin/stderr.sh?tag-4711");
    assert_eq!(r.text(), "ok\n");
    assert!(
        site.wait_stderr(
            from,
            "cgi /cgi-bin/stderr.sh: stoa-stderr-marker tag-4711",
            Duration::from_secs(3)
        ),
        "stderr: {}",
        site.stderr()
    );
}

#[test]
fn no_zombies_and_no_leaked_descriptors_after_every_kind_of_script() {
    require_perl();
    let site = Site::start(Opts {
        timeout: "1s",
        ..Opts::default()
    });
    let pid = site.pid();
    // Warm up: the first spawn sets up the SIGCHLD machinery for good.
    assert_eq!(site.get("/cgi-bin/hello.sh").status, 200);
    std::thread::sleep(Duration::from_millis(100));
    let base = fd_count(pid);
    let mut statuses = Vec::new();
    for path in [
        "/cgi-bin/hello.sh",
        "/cgi-bin/env.pl",
        "/cgi-bin/silent.sh",
        "/cgi-bin/malformed.sh",
        "/cgi-bin/redirect-local.sh",
        "/cgi-bin/loop.sh",
        "/cgi-bin/notfound.sh",
        "/cgi-bin/stderr.sh",
        "/cgi-bin/nph-raw.sh",
        "/cgi-bin/hang.sh",
    ] {
        let mut c = site.connect();
        c.send(&get(path));
        let st = match c.try_read(false) {
            Ok(r) => r.status,
            Err(_) => 0,
        };
        statuses.push((path, st));
    }
    // And a client that leaves mid-output.
    {
        let mut c = site.connect();
        c.send(&get("/cgi-bin/endless.sh"));
        let _ = c.read_raw(10_000);
    }
    assert!(
        eventually(Duration::from_secs(3), || zombie_children(pid).is_empty()
            && children(pid).is_empty()),
        "zombies {:?}, children {:?} of the server after {statuses:?}",
        zombie_children(pid),
        children(pid)
    );
    assert!(
        eventually(Duration::from_secs(3), || fd_count(pid) <= base),
        "the server holds {} descriptors, {base} before the scripts ran",
        fd_count(pid)
    );
}
