//! The rules of `compress`, on heads built in process.

use super::*;
use crate::filter::{BodyFilter, Fields};
use stoa_h1::RequestHead;

fn req(raw: &str) -> RequestHead {
    let mut h = RequestHead::default();
    let limits = stoa_h1::RequestLimits {
        max_head_bytes: 8192,
        max_uri_bytes: 8192,
    };
    let raw = format!("{raw}\r\n\r\n");
    assert!(matches!(h.parse(raw.as_bytes(), &limits), Ok(Some(_))));
    h
}

fn on() -> Compress {
    match CompressSetting::On(true).build() {
        Ok(Some(c)) => c,
        other => panic!("{other:?}"),
    }
}

/// Runs the filter on a head: the fields after it, the length, and
/// whether it took the body.
fn run(
    c: &Compress,
    req: &RequestHead,
    status: u16,
    fields: &str,
    length: Length,
) -> (String, Length, Option<Compressing>) {
    let mut buf = fields.as_bytes().to_vec();
    let mut h = Head {
        req,
        status,
        fields: Fields::new(&mut buf, 0),
        length,
        head_only: req.method == stoa_h1::Method::Head,
        http10: req.version == stoa_h1::Version::Http10,
        sub: false,
    };
    let body = c.head(&mut h);
    let length = h.length;
    (String::from_utf8_lossy(&buf).into_owned(), length, body)
}

const GET_ALL: &str = "GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip, br, zstd";
const HTML: &str =
    "Content-Type: text/html; charset=utf-8\r\nETag: \"1-2\"\r\nAccept-Ranges: bytes\r\n";

#[test]
fn a_compressible_body_is_encoded_with_its_etag_weakened_and_its_length_dropped() {
    let r = req(GET_ALL);
    let (f, len, body) = run(&on(), &r, 200, HTML, Length::Known(5000));
    assert!(body.is_some());
    assert_eq!(len, Length::Unknown);
    assert!(f.contains("Content-Encoding: zstd\r\n"), "{f}");
    // RFC 9110 §8.8.1: the encoded bytes are not the identity's.
    assert!(f.contains("ETag: W/\"1-2\"\r\n"), "{f}");
    assert!(f.contains("Vary: Accept-Encoding\r\n"), "{f}");
    // nginx clears Accept-Ranges: ranges would be of the identity.
    assert!(!f.contains("Accept-Ranges"), "{f}");
}

#[test]
fn vary_is_sent_on_compressible_responses_even_when_not_compressed() {
    let c = on();
    let none = req("GET / HTTP/1.1\r\nHost: a");
    let (f, len, body) = run(&c, &none, 200, HTML, Length::Known(5000));
    assert!(body.is_none());
    assert_eq!(len, Length::Known(5000));
    assert!(f.contains("Vary: Accept-Encoding\r\n"), "{f}");
    assert!(!f.contains("Content-Encoding"), "{f}");
    let short = req(GET_ALL);
    let (f, _, body) = run(&c, &short, 200, HTML, Length::Known(100));
    assert!(body.is_none(), "shorter than min_length");
    assert!(f.contains("Vary: Accept-Encoding\r\n"), "{f}");
    // An existing Vary naming it is not repeated.
    let (f, _, _) = run(
        &c,
        &short,
        200,
        "Content-Type: text/css\r\nVary: accept-encoding, Origin\r\n",
        Length::Known(5000),
    );
    assert_eq!(f.matches("ary").count(), 1, "{f}");
}

#[test]
fn ranges_no_transform_encoded_bodies_and_bodiless_statuses_are_left_alone() {
    let c = on();
    let r = req(GET_ALL);
    for (status, fields, length) in [
        (
            206,
            format!("{HTML}Content-Range: bytes 0-9/5000\r\n"),
            Length::Known(10),
        ),
        (
            200,
            format!("{HTML}Cache-Control: public, no-transform\r\n"),
            Length::Known(5000),
        ),
        (
            200,
            format!("{HTML}Content-Encoding: gzip\r\n"),
            Length::Known(5000),
        ),
        (204, HTML.to_owned(), Length::Empty),
        (304, HTML.to_owned(), Length::Empty),
        (
            200,
            "Content-Type: image/png\r\n".to_owned(),
            Length::Known(5000),
        ),
        (200, String::new(), Length::Known(5000)),
    ] {
        let (f, len, body) = run(&c, &r, status, &fields, length);
        assert!(body.is_none(), "{status} {fields}");
        assert_eq!(f, fields, "untouched: {status}");
        assert_eq!(len, length);
    }
}

#[test]
fn a_streamed_body_of_unknown_length_is_compressed_whatever_min_length() {
    let r = req(GET_ALL);
    let (f, _, body) = run(
        &on(),
        &r,
        200,
        "Content-Type: text/event-stream\r\n",
        Length::Unknown,
    );
    assert!(body.is_some());
    assert!(f.contains("Content-Encoding: zstd"), "{f}");
}

#[test]
fn an_http10_client_gets_the_identity_as_with_nginx_gzip_http_version() {
    let r = req("GET / HTTP/1.0\r\nAccept-Encoding: gzip");
    let (f, len, body) = run(&on(), &r, 200, HTML, Length::Known(5000));
    assert!(body.is_none());
    assert_eq!(len, Length::Known(5000));
    assert!(f.contains("Vary: Accept-Encoding"), "{f}");
}

#[test]
fn head_gets_the_head_get_would_get_and_no_encoder() {
    let r = req("HEAD / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip");
    let (f, len, body) = run(&on(), &r, 200, HTML, Length::Known(5000));
    assert!(body.is_none());
    assert_eq!(
        len,
        Length::Unknown,
        "no Content-Length: GET's would be unknown"
    );
    assert!(f.contains("Content-Encoding: gzip"), "{f}");
}

#[test]
fn media_types_match_exactly_by_top_level_wildcard_or_suffix() {
    let c = on();
    for t in [
        "text/html",
        "TEXT/Plain; charset=x",
        "text/event-stream",
        "application/json",
        "application/ld+json",
        "application/atom+xml",
        "image/svg+xml",
        "application/wasm",
    ] {
        assert!(c.takes_type(t.as_bytes()), "{t}");
    }
    for t in [
        "image/png",
        "application/octet-stream",
        "font/woff2",
        "textual",
        "",
        "application/zip",
    ] {
        assert!(!c.takes_type(t.as_bytes()), "{t}");
    }
}

#[test]
fn the_table_validates_levels_encodings_and_types() {
    let parse = |s: &str| -> Result<Option<Compress>, String> {
        #[derive(serde::Deserialize)]
        struct T {
            compress: CompressSetting,
        }
        let t: T = toml::from_str(s).map_err(|e| e.to_string())?;
        t.compress.build()
    };
    assert!(matches!(parse("compress = false"), Ok(None)));
    assert!(matches!(parse("compress = true"), Ok(Some(_))));
    let c = parse(
        r#"compress = { encodings = ["gzip"], types = ["text/html"], min_length = 1, gzip_level = 9 }"#,
    );
    let c = c.ok().flatten().expect("valid");
    assert_eq!(c.codings, vec![Coding::Gzip]);
    assert_eq!(c.gzip_level, 9);
    assert_eq!(c.brotli_level, 5);
    for bad in [
        "compress = { gzip_level = 10 }",
        "compress = { brotli_level = 12 }",
        "compress = { zstd_level = 0 }",
        "compress = { encodings = [\"deflate\"] }",
        "compress = { encodings = [] }",
        "compress = { types = [\"html\"] }",
        "compress = { level = 3 }",
        "compress = 3",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

/// Decodes what an encoder made, with the reference decoders.
fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        Coding::Gzip => {
            let r = flate2::read::GzDecoder::new(data).read_to_end(&mut out);
            assert!(r.is_ok(), "{r:?}");
        }
        Coding::Br => {
            let r = brotli::Decompressor::new(data, 4096).read_to_end(&mut out);
            assert!(r.is_ok(), "{r:?}");
        }
        Coding::Zstd => out = zstd::stream::decode_all(data).expect("zstd"),
    }
    out
}

#[test]
fn each_flush_makes_everything_written_so_far_decodable() {
    // A server-sent event must reach the client when the application
    // flushes, not when the encoder's buffer fills.
    for coding in [Coding::Gzip, Coding::Br, Coding::Zstd] {
        let mut c = Compressing::new(coding, 5, None);
        let mut out = Vec::new();
        c.data(b"data: one\n\n", &mut out);
        c.flush(&mut out);
        let so_far = out.clone();
        // A streaming decoder gets the first event from the bytes so far.
        let got = match coding {
            Coding::Gzip => {
                let mut d = flate2::write::GzDecoder::new(Vec::new());
                std::io::Write::write_all(&mut d, &so_far).expect("gzip");
                std::io::Write::flush(&mut d).expect("gzip");
                d.get_ref().clone()
            }
            Coding::Br => {
                let mut d = brotli::DecompressorWriter::new(Vec::new(), 4096);
                std::io::Write::write_all(&mut d, &so_far).expect("br");
                std::io::Write::flush(&mut d).expect("br");
                d.get_ref().clone()
            }
            Coding::Zstd => {
                let mut d = zstd::stream::write::Decoder::new(Vec::new()).expect("zstd");
                std::io::Write::write_all(&mut d, &so_far).expect("zstd");
                std::io::Write::flush(&mut d).expect("zstd");
                d.get_ref().clone()
            }
        };
        assert_eq!(got, b"data: one\n\n", "{coding:?}");
        c.data(b"data: two\n\n", &mut out);
        c.finish(&mut out);
        assert_eq!(
            decode(coding, &out),
            b"data: one\n\ndata: two\n\n",
            "{coding:?}"
        );
    }
}

#[test]
fn an_empty_body_still_gets_a_whole_encoded_stream() {
    for coding in [Coding::Gzip, Coding::Br, Coding::Zstd] {
        let mut c = Compressing::new(coding, 3, None);
        let mut out = Vec::new();
        c.finish(&mut out);
        assert!(!out.is_empty(), "{coding:?}");
        assert_eq!(decode(coding, &out), b"", "{coding:?}");
    }
}

#[test]
fn a_static_files_form_is_made_once_per_version_and_decodes_to_the_file() {
    use crate::filter::{FileVersion, Whole};
    let body = bytes::Bytes::from("<p>hello</p>\n".repeat(400));
    let v = FileVersion {
        dev: 7,
        ino: 0xc0ffee,
        size: body.len() as u64,
        mtime: (1_700_000_000, 5),
    };
    for coding in [Coding::Gzip, Coding::Br, Coding::Zstd] {
        let first = Compressing::new(coding, 4, None).whole(&v, Whole::Mem(&body));
        let first = first.expect("made");
        assert_eq!(decode(coding, &first), &body[..]);
        let again = Compressing::new(coding, 4, None).whole(&v, Whole::Mem(&body));
        // The same allocation: kept, not compressed again.
        assert_eq!(
            again.map(|b| b.as_ptr()),
            Some(first.as_ptr()),
            "{coding:?}"
        );
    }
}
