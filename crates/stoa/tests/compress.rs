//! `compress` end to end: real clients decode what Stoa sends back to the
//! original bytes — curl `--compressed`, and Python's `brotli` and
//! `zstandard` (the reference bindings) with `gzip` — for static files,
//! CGI, FastCGI (php-cgi) and the reverse proxy, over HTTP/1.1 and
//! HTTP/2; a server-sent event stream arrives event by event through the
//! encoder; ranges, `no-transform` and 304 are left alone.
//!
//! Needs the Debian packages curl, php-cgi, python3-brotli and
//! python3-zstandard; a missing one fails the test with its name.

mod common;

use common::{require, Conn, Server, TempDir, CONFIG_PRELUDE, PHP_CGI};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's Python, where python3-brotli and python3-zstandard install
/// (not a pyenv's first on PATH).
const PYTHON: &str = "/usr/bin/python3";

/// Text that compresses as HTML does, `len` bytes.
fn page(len: usize) -> Vec<u8> {
    let words = [
        "<p>",
        "stoa",
        "</p>",
        "compress",
        "the",
        "server",
        "<a href=\"/x\">",
        "</a>",
        "\n",
    ];
    let mut out = b"<!DOCTYPE html>\n".to_vec();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % words.len() as u64) as usize].as_bytes());
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// A site with every handler, `compress = true`, and an upstream Stoa
/// for the proxy (serving the same files, uncompressed).
struct Site {
    _upstream: Server,
    server: Server,
    dir: TempDir,
    page: Vec<u8>,
}

fn site(tag: &str) -> Site {
    require("curl", "curl");
    require(PHP_CGI, "php-cgi");
    require(PYTHON, "python3");
    let dir = TempDir::new(tag);
    let body = page(60_000);
    dir.write("www/page.html", &body);
    dir.write("www/page.json", &body);
    dir.write("www/page.bin", &body);
    dir.write(
        "www/page.php",
        "<?php header('Content-Type: text/html; charset=utf-8'); readfile(__DIR__ . '/page.html');",
    );
    let cgi = dir.write(
        "cgi/page",
        format!(
            "#!/bin/sh\nprintf 'Content-Type: text/html\\r\\n\\r\\n'\nexec cat '{}'\n",
            dir.join("www/page.html").display()
        ),
    );
    // An event, then the next only once the test has seen the first:
    // it cannot have come in the same write.
    let sse = dir.write(
        "cgi/events",
        format!(
            "#!/bin/sh\nprintf 'Content-Type: text/event-stream\\r\\n\\r\\n'\nprintf 'data: one\\n\\n'\n\
             i=0\nwhile [ ! -e '{go}'\"$QUERY_STRING\" ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done\n\
             printf 'data: two\\n\\n'\n",
            go = dir.join("go").display()
        ),
    );
    // A no-transform answer from an application.
    let nt = dir.write(
        "cgi/no-transform",
        format!(
            "#!/bin/sh\nprintf 'Content-Type: text/html\\r\\nCache-Control: no-transform\\r\\n\\r\\n'\nexec cat '{}'\n",
            dir.join("www/page.html").display()
        ),
    );
    for p in [&cgi, &sse, &nt] {
        chmod_x(p);
    }
    let upstream = Server::serve_dir(&dir.join("www"));
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "{CONFIG_PRELUDE}[[pool]]\nname = \"php\"\ncommand = [\"{PHP_CGI}\"]\nprocesses = 1\n\
             env = {{ PHP_FCGI_CHILDREN = \"0\", PHP_FCGI_MAX_REQUESTS = \"1000\" }}\n\
             [[pool]]\nname = \"up\"\nprotocol = \"http\"\naddress = [\"{up}\"]\n\
             [[site]]\nroot = \"www\"\ncompress = true\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi\" }}\n\
             [[site.route]]\nsuffix = \".php\"\nfastcgi = {{ pool = \"php\" }}\n\
             [[site.route]]\nprefix = \"/up/\"\nproxy = {{ pool = \"up\", strip_prefix = true }}\n\
             [[site.route]]\nprefix = \"/off/\"\ncompress = false\nalias = \"www\"\n",
            up = upstream.addr
        ),
    );
    let server = Server::with_config(&cfg);
    Site {
        _upstream: upstream,
        server,
        dir,
        page: body,
    }
}

fn chmod_x(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let r = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
    assert!(r.is_ok(), "{r:?}");
}

/// What curl got: the response head (lowercase names) and the body file.
struct Got {
    head: String,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn status(&self) -> &str {
        self.head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("")
    }
}

/// curl with these arguments (`-s -D head -o body`); the last head's
/// fields (after 100s and redirects).
fn curl(dir: &TempDir, tag: &str, args: &[&str]) -> Got {
    let head = dir.join(&format!("{tag}.head"));
    let body = dir.join(&format!("{tag}.body"));
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "30", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(args)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("curl: {e}"),
    };
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let head = std::fs::read_to_string(&head).unwrap_or_default();
    let last = head
        .rsplit("\r\n\r\n")
        .find(|h| !h.trim().is_empty())
        .unwrap_or("");
    Got {
        head: last.replace('\r', ""),
        body: std::fs::read(&body).unwrap_or_default(),
    }
}

/// Decodes `file` with Python's reference decoders.
fn python_decode(coding: &str, file: &Path) -> Vec<u8> {
    let script = "import sys, gzip, brotli, zstandard\n\
                  c, data = sys.argv[1], open(sys.argv[2], 'rb').read()\n\
                  if c == 'gzip': out = gzip.decompress(data)\n\
                  elif c == 'br': out = brotli.decompress(data)\n\
                  else: out = zstandard.ZstdDecompressor().decompressobj().decompress(data)\n\
                  sys.stdout.buffer.write(out)\n";
    let out = Command::new(PYTHON)
        .args(["-c", script, coding])
        .arg(file)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("python3: {e}"),
    };
    assert!(
        out.status.success(),
        "python3 could not decode {coding}: {} (needs python3-brotli python3-zstandard)",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every handler, both protocols, every coding: decoded by Python to the
/// page, and by curl `--compressed`.
fn every_handler_decodes_to_the_original(proto: &str) {
    let s = site(&format!("compress-all{proto}"));
    let base = format!("http://{}", s.server.addr);
    for path in ["/page.html", "/cgi-bin/page", "/page.php", "/up/page.html"] {
        for coding in ["gzip", "br", "zstd"] {
            let tag = format!("{}-{coding}", path.replace('/', "_"));
            let url = format!("{base}{path}");
            let ae = format!("Accept-Encoding: {coding}");
            let got = curl(&s.dir, &tag, &[proto, "-H", &ae, &url]);
            assert_eq!(got.status(), "200", "{path} {coding}: {}", got.head);
            assert_eq!(
                got.header("content-encoding"),
                Some(coding),
                "{path}: {}",
                got.head
            );
            assert!(
                got.header("vary")
                    .is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
                "{path}: {}",
                got.head
            );
            assert_eq!(got.header("content-length"), None, "{path}: {}", got.head);
            assert!(
                got.body.len() < s.page.len() / 2,
                "{path} {coding}: {} bytes",
                got.body.len()
            );
            let decoded = python_decode(coding, &s.dir.join(&format!("{tag}.body")));
            assert!(
                decoded == s.page,
                "{path} {coding}: decodes to {} bytes",
                decoded.len()
            );
        }
        let got = curl(
            &s.dir,
            "curl",
            &[proto, "--compressed", &format!("{base}{path}")],
        );
        assert!(
            got.header("content-encoding").is_some(),
            "{path}: {}",
            got.head
        );
        assert!(
            got.body == s.page,
            "{path}: curl --compressed decodes to {} bytes",
            got.body.len()
        );
    }
}

#[test]
fn every_handlers_output_decodes_to_the_original_bytes_over_http1() {
    every_handler_decodes_to_the_original("--http1.1");
}

#[test]
fn every_handlers_output_decodes_to_the_original_bytes_over_http2() {
    every_handler_decodes_to_the_original("--http2-prior-knowledge");
}

#[test]
fn a_static_file_is_compressed_once_and_its_strong_etag_made_weak() {
    // RFC 9110 §8.8.1: a strong tag promises identical bytes.
    let s = site("compress-etag");
    let url = format!("http://{}/page.html", s.server.addr);
    let plain = curl(&s.dir, "plain", &[&url]);
    let tag = plain.header("etag").unwrap_or_default().to_owned();
    assert!(tag.starts_with('"'), "{}", plain.head);
    assert!(
        plain.header("vary").is_some(),
        "compressible: Vary even uncompressed"
    );
    assert_eq!(plain.body, s.page);
    let a = curl(&s.dir, "a", &["-H", "Accept-Encoding: gzip", &url]);
    let b = curl(&s.dir, "b", &["-H", "Accept-Encoding: gzip", &url]);
    assert_eq!(
        a.header("etag"),
        Some(format!("W/{tag}").as_str()),
        "{}",
        a.head
    );
    assert_eq!(a.header("accept-ranges"), None, "{}", a.head);
    assert!(a.body == b.body, "the kept form is sent again");
    // The weak tag revalidates (If-None-Match compares weakly, §13.1.2),
    // and the 304 is left alone.
    let inm = format!("If-None-Match: W/{tag}");
    let nm = curl(
        &s.dir,
        "nm",
        &["-H", "Accept-Encoding: gzip", "-H", &inm, &url],
    );
    assert_eq!(nm.status(), "304", "{}", nm.head);
    assert_eq!(nm.header("content-encoding"), None, "{}", nm.head);
    assert!(nm.body.is_empty());
}

#[test]
fn a_range_request_no_transform_and_incompressible_types_are_sent_as_they_are() {
    let s = site("compress-not");
    let base = format!("http://{}", s.server.addr);
    // RFC 9110 §14: a range is of the identity's bytes.
    let r = curl(
        &s.dir,
        "range",
        &[
            "-H",
            "Accept-Encoding: gzip",
            "-r",
            "100-199",
            &format!("{base}/page.html"),
        ],
    );
    assert_eq!(r.status(), "206", "{}", r.head);
    assert_eq!(r.header("content-encoding"), None, "{}", r.head);
    assert_eq!(r.body, &s.page[100..200]);
    // RFC 9111 §5.2.2.6.
    let nt = curl(
        &s.dir,
        "nt",
        &[
            "-H",
            "Accept-Encoding: gzip",
            &format!("{base}/cgi-bin/no-transform"),
        ],
    );
    assert_eq!(nt.header("content-encoding"), None, "{}", nt.head);
    assert_eq!(nt.body, s.page);
    let bin = curl(
        &s.dir,
        "bin",
        &["-H", "Accept-Encoding: gzip", &format!("{base}/page.bin")],
    );
    assert_eq!(bin.header("content-encoding"), None, "{}", bin.head);
    assert_eq!(bin.header("vary"), None, "not compressible: no Vary");
    assert_eq!(bin.body, s.page);
    // A route's `compress = false` lifts the site's.
    let off = curl(
        &s.dir,
        "off",
        &[
            "-H",
            "Accept-Encoding: gzip",
            &format!("{base}/off/page.json"),
        ],
    );
    assert_eq!(off.header("content-encoding"), None, "{}", off.head);
    assert_eq!(off.body, s.page);
    // q=0 refuses a coding (RFC 9110 §12.5.3).
    let q0 = curl(
        &s.dir,
        "q0",
        &[
            "-H",
            "Accept-Encoding: gzip;q=0, br;q=0.5",
            &format!("{base}/page.json"),
        ],
    );
    assert_eq!(q0.header("content-encoding"), Some("br"), "{}", q0.head);
}

#[test]
fn an_http10_client_gets_the_identity_with_its_length() {
    // nginx's gzip_http_version 1.1: no chunking to delimit a compressed
    // body without closing.
    let s = site("compress-10");
    let url = format!("http://{}/page.html", s.server.addr);
    let got = curl(
        &s.dir,
        "h10",
        &["--http1.0", "-H", "Accept-Encoding: gzip", &url],
    );
    assert_eq!(got.header("content-encoding"), None, "{}", got.head);
    assert_eq!(
        got.header("content-length"),
        Some(s.page.len().to_string().as_str())
    );
    assert_eq!(got.body, s.page);
}

#[test]
fn a_server_sent_event_stream_arrives_event_by_event_through_compression() {
    let s = site("compress-sse");
    let mut c = Conn::connect(s.server.addr);
    c.send(b"GET /cgi-bin/events HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n");
    let stream = &mut c.stream;
    let mut raw = Vec::new();
    // The first event, decoded from what came so far: the second has
    // not been written yet (the script waits for `go`).
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < until,
            "the first event never came: {raw:?}"
        );
        let mut buf = [0u8; 4096];
        let n = match stream.read(&mut buf) {
            Ok(0) => panic!("closed before the first event: {raw:?}"),
            Ok(n) => n,
            Err(e) => panic!("read: {e}"),
        };
        raw.extend_from_slice(&buf[..n]);
        if let Some(text) = gunzip_chunked_so_far(&raw) {
            if text.contains("data: one\n\n") {
                assert!(!text.contains("two"), "{text}");
                let head =
                    String::from_utf8_lossy(&raw[..common::find(&raw, b"\r\n\r\n").unwrap_or(0)])
                        .to_string();
                assert!(head.contains("Content-Encoding: gzip"), "{head}");
                break;
            }
        }
    }
    std::fs::write(s.dir.join("go"), b"").ok();
    // (the script waits for `go` followed by its query: none here)
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    raw.extend_from_slice(&rest);
    let text = gunzip_chunked_so_far(&raw).unwrap_or_default();
    assert_eq!(text, "data: one\n\ndata: two\n\n");
}

/// The chunked body after the head, de-chunked and gunzipped as far as
/// it goes (None before the head is complete).
fn gunzip_chunked_so_far(raw: &[u8]) -> Option<String> {
    let at = common::find(raw, b"\r\n\r\n")? + 4;
    let mut body = Vec::new();
    let mut rest = &raw[at..];
    while let Some(eol) = common::find(rest, b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..eol]).ok()?.trim(), 16).ok()?;
        let data = rest.get(eol + 2..eol + 2 + size)?;
        body.extend_from_slice(data);
        rest = rest.get(eol + 2 + size + 2..).unwrap_or(&[]);
        if size == 0 {
            break;
        }
    }
    // A streaming decoder: gives what the flushed deflate blocks hold.
    let mut child = Command::new(PYTHON)
        .args([
            "-c",
            "import sys, zlib\nd = zlib.decompressobj(31)\nsys.stdout.buffer.write(d.decompress(sys.stdin.buffer.read()))\n",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(&body).ok()?;
    let out = child.wait_with_output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_precompressed_zst_file_is_served_like_gz_and_br_and_not_compressed_again() {
    // As nginx's gzip_static (and brotli_static): the sibling is sent
    // as it is, with its coding, when the client takes it.
    let s = site("compress-zst");
    s.dir
        .write("www/pre.css", b"body { color: red }\n".repeat(100));
    s.dir
        .write("www/pre.css.zst", b"zstd bytes made beforehand");
    s.dir.write("www/pre.css.br", b"br bytes made beforehand");
    let url = format!("http://{}/pre.css", s.server.addr);
    let z = curl(
        &s.dir,
        "zst",
        &["-H", "Accept-Encoding: gzip, br, zstd", &url],
    );
    assert_eq!(z.header("content-encoding"), Some("zstd"), "{}", z.head);
    assert_eq!(z.body, b"zstd bytes made beforehand");
    let b = curl(&s.dir, "br", &["-H", "Accept-Encoding: gzip, br", &url]);
    assert_eq!(b.header("content-encoding"), Some("br"), "{}", b.head);
    assert_eq!(b.body, b"br bytes made beforehand");
    // No sibling for gzip: compressed on the fly instead.
    let g = curl(
        &s.dir,
        "gz",
        &["--compressed", "-H", "Accept-Encoding: gzip", &url],
    );
    assert_eq!(g.header("content-encoding"), Some("gzip"), "{}", g.head);
    assert_eq!(g.body, b"body { color: red }\n".repeat(100));
}

#[test]
fn server_sent_events_arrive_one_by_one_over_http2_in_every_coding() {
    // curl decodes as it receives (-N: no buffering of its own): the
    // first event must be readable before the script writes the second.
    let s = site("compress-sse-h2");
    for coding in ["gzip", "br", "zstd"] {
        let url = format!("http://{}/cgi-bin/events?{coding}", s.server.addr);
        let ae = format!("Accept-Encoding: {coding}");
        let child = Command::new("curl")
            .args([
                "-s",
                "-N",
                "--http2-prior-knowledge",
                "--compressed",
                "--max-time",
                "30",
                "-H",
                &ae,
                "-D",
                "/dev/stderr",
                &url,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => panic!("curl: {e}"),
        };
        let mut out = child.stdout.take().expect("piped");
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while !common::contains(&got, b"data: one\n\n") {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => {
                    panic!("{coding}: the stream ended before the first event: {got:?}")
                }
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        assert!(!common::contains(&got, b"two"), "{coding}");
        std::fs::write(s.dir.join(&format!("go{coding}")), b"").ok();
        let _ = out.read_to_end(&mut got);
        let done = child.wait_with_output();
        let head = done
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .unwrap_or_default();
        assert!(
            head.contains(&format!("content-encoding: {coding}")),
            "{head}"
        );
        assert_eq!(got, b"data: one\n\ndata: two\n\n", "{coding}");
    }
}
