//! A request head as decoded from one header block, and the checks of
//! RFC 9113 §8.2 and §8.3 that make a request well-formed.

use bytes::Bytes;

/// A validated request head: every field's bytes in one buffer, with
/// ranges into it (one allocation for the bytes, one for the ranges).
#[derive(Clone, Default)]
pub struct Request {
    buf: Vec<u8>,
    /// name start, name end = value start, value end; in `buf`.
    fields: Vec<[u32; 3]>,
    method: Option<[u32; 2]>,
    scheme: Option<[u32; 2]>,
    authority: Option<[u32; 2]>,
    path: Option<[u32; 2]>,
    protocol: Option<[u32; 2]>,
    content_length: Option<u64>,
}

impl Request {
    /// Bytes its buffer holds (for [`crate::Conn::recycle`]).
    pub(crate) fn held(&self) -> usize {
        self.buf.capacity()
    }

    fn get(&self, r: Option<[u32; 2]>) -> Option<&[u8]> {
        r.map(|[a, b]| &self.buf[a as usize..b as usize])
    }

    /// `:method` (always there).
    pub fn method(&self) -> &[u8] {
        self.get(self.method).unwrap_or(b"")
    }

    /// `:scheme` (absent only for CONNECT, RFC 9113 §8.5).
    pub fn scheme(&self) -> Option<&[u8]> {
        self.get(self.scheme)
    }

    pub fn authority(&self) -> Option<&[u8]> {
        self.get(self.authority)
    }

    /// `:path` (absent only for CONNECT; never empty).
    pub fn path(&self) -> Option<&[u8]> {
        self.get(self.path)
    }

    /// `:protocol` of an extended CONNECT (RFC 8441 §4).
    pub fn protocol(&self) -> Option<&[u8]> {
        self.get(self.protocol)
    }

    /// The regular fields, in the order sent (names lowercase).
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields.iter().map(|&[a, b, c]| {
            (
                &self.buf[a as usize..b as usize],
                &self.buf[b as usize..c as usize],
            )
        })
    }

    /// The number of regular fields.
    pub fn field_count(&self) -> usize {
        self.fields.len()
    }

    /// `content-length`, which the codec checks against the DATA received
    /// (RFC 9113 §8.1.1).
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
        f.debug_struct("Request")
            .field("method", &String::from_utf8_lossy(self.method()))
            .field("scheme", &s(self.scheme()))
            .field("authority", &s(self.authority()))
            .field("path", &s(self.path()))
            .field("protocol", &s(self.protocol()))
            .field(
                "fields",
                &self
                    .fields()
                    .map(|(n, v)| {
                        (
                            String::from_utf8_lossy(n).into_owned(),
                            String::from_utf8_lossy(v).into_owned(),
                        )
                    })
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Byte classes: `NAME` for tchar (RFC 9110 §5.6.2) without uppercase
/// (RFC 9113 §8.2.1), `BAD_VALUE` for NUL, CR and LF (RFC 9113 §8.2.1).
/// One table lookup per byte, no branch: this runs on every field of
/// every request.
const NAME: u8 = 1;
const BAD_VALUE: u8 = 2;
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        if matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\''
            | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
        {
            t[c] = NAME;
        }
        if matches!(b, 0 | b'\r' | b'\n') {
            t[c] = BAD_VALUE;
        }
        c += 1;
    }
    t
};

fn name_ok(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().fold(NAME, |a, &c| a & CLASS[usize::from(c)]) != 0
}

/// RFC 9113 §8.2.1: no NUL, CR or LF; no leading or trailing SP or HTAB.
fn value_ok(v: &[u8]) -> bool {
    let ws = |c: &u8| *c == b' ' || *c == b'\t';
    v.iter().fold(0, |a, &c| a | CLASS[usize::from(c)]) & BAD_VALUE == 0
        && !v.first().is_some_and(ws)
        && !v.last().is_some_and(ws)
}

/// Fields specific to a connection, which HTTP/2 forbids (RFC 9113 §8.2.2).
fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"proxy-connection" | b"keep-alive" | b"transfer-encoding" | b"upgrade"
    )
}

fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// Collects the fields of a request's header block as the decoder hands
/// them out, checking each; the first fault is kept (the decoder must
/// still see the whole block, RFC 9113 §4.3).
pub(crate) struct Builder {
    req: Box<Request>,
    /// The most bytes kept (the decoder stops at the list size limit,
    /// whose sizes count more per field: this is only a backstop).
    limit: usize,
    connect_protocol: bool,
    regular: bool,
    fault: Option<&'static str>,
}

impl Builder {
    /// [`Builder::reusing`] without a spare.
    #[cfg(test)]
    pub(crate) fn new(connect_protocol: bool, limit: usize, block_len: usize) -> Builder {
        Builder::reusing(None, connect_protocol, limit, block_len)
    }

    /// `block_len`: the encoded size, for a guess at the decoded one (one
    /// allocation for the bytes most of the time; fields indexed from the
    /// dynamic table take one byte for a whole field). The request is
    /// built in `spare` (a request already handled, its box and buffers
    /// reused: three allocations and frees per request saved) when there
    /// is one.
    pub(crate) fn reusing(
        spare: Option<Box<Request>>,
        connect_protocol: bool,
        limit: usize,
        block_len: usize,
    ) -> Builder {
        let want = (block_len * 2).max(256).min(limit);
        let req = match spare {
            Some(mut r) => {
                let (mut buf, mut fields) =
                    (std::mem::take(&mut r.buf), std::mem::take(&mut r.fields));
                buf.clear();
                buf.reserve(want);
                fields.clear();
                *r = Request {
                    buf,
                    fields,
                    ..Request::default()
                };
                r
            }
            None => Box::new(Request {
                buf: Vec::with_capacity(want),
                fields: Vec::with_capacity(12),
                ..Request::default()
            }),
        };
        Builder {
            req,
            limit,
            connect_protocol,
            regular: false,
            fault: None,
        }
    }

    fn push(&mut self, b: &[u8]) -> [u32; 2] {
        let a = self.req.buf.len() as u32;
        self.req.buf.extend_from_slice(b);
        [a, self.req.buf.len() as u32]
    }

    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.fault.is_some() {
            return;
        }
        if self.req.buf.len() + name.len() + value.len() > self.limit {
            self.fault = Some("a header list past the limit");
            return;
        }
        if let Err(why) = self.check(name, value) {
            self.fault = Some(why);
        }
    }

    fn check(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if !value_ok(value) {
            return Err("a field value with a forbidden character (RFC 9113 §8.2.1)");
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular {
                return Err("a pseudo-header field after a regular one (RFC 9113 §8.3)");
            }
            // The value goes in first: `buf` and the slot are both parts
            // of `req`.
            let r = Some(self.push(value));
            let req = &mut self.req;
            let slot = match pseudo {
                b"method" => &mut req.method,
                b"scheme" => &mut req.scheme,
                b"authority" => &mut req.authority,
                b"path" => &mut req.path,
                b"protocol" if self.connect_protocol => &mut req.protocol,
                _ => return Err("an unknown or response pseudo-header field (RFC 9113 §8.3)"),
            };
            if slot.is_some() {
                return Err("a pseudo-header field twice (RFC 9113 §8.3.1)");
            }
            *slot = r;
            return Ok(());
        }
        self.regular = true;
        if !name_ok(name) {
            return Err("a field name that is not a lowercase token (RFC 9113 §8.2.1)");
        }
        match name {
            b"te" if !value.eq_ignore_ascii_case(b"trailers") => {
                return Err("TE other than \"trailers\" (RFC 9113 §8.2.2)");
            }
            b"content-length" => {
                let n = parse_length(value).ok_or("a content-length that is not a number")?;
                if self.req.content_length.is_some_and(|m| m != n) {
                    return Err("two different content-length values");
                }
                self.req.content_length = Some(n);
            }
            _ if connection_specific(name) => {
                return Err("a connection-specific field (RFC 9113 §8.2.2)");
            }
            _ => {}
        }
        let [a, _] = self.push(name);
        let [_, c] = self.push(value);
        self.req.fields.push([a, a + name.len() as u32, c]);
        Ok(())
    }

    /// The request, if the block made a well-formed one (RFC 9113 §8.3.1).
    pub(crate) fn finish(self) -> Result<Box<Request>, &'static str> {
        if let Some(why) = self.fault {
            return Err(why);
        }
        let r = self.req;
        let connect = r.method() == b"CONNECT";
        if r.method.is_none() {
            return Err("no :method (RFC 9113 §8.3.1)");
        }
        if r.protocol.is_some() && !connect {
            return Err(":protocol on a method other than CONNECT (RFC 8441 §4)");
        }
        if connect && r.protocol.is_none() {
            // RFC 9113 §8.5: only :method and :authority.
            if r.scheme.is_some() || r.path.is_some() || r.authority.is_none() {
                return Err(
                    "a CONNECT with :scheme or :path, or without :authority (RFC 9113 §8.5)",
                );
            }
            return Ok(r);
        }
        if r.scheme.is_none() || r.path.is_none() {
            return Err("no :scheme or no :path (RFC 9113 §8.3.1)");
        }
        match r.path() {
            Some(b"*") if r.method() == b"OPTIONS" => {}
            Some([b'/', ..]) => {}
            _ => return Err("a :path neither absolute nor \"*\" for OPTIONS (RFC 9113 §8.3.1)"),
        }
        Ok(r)
    }
}

/// Collects trailer fields (RFC 9113 §8.1): no pseudo-header fields.
#[derive(Default)]
pub(crate) struct Trailers {
    pub(crate) fields: Vec<(Bytes, Bytes)>,
    pub(crate) fault: Option<&'static str>,
}

impl Trailers {
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.fault.is_some() {
            return;
        }
        if name.starts_with(b":") {
            self.fault = Some("a pseudo-header field in trailers (RFC 9113 §8.1)");
        } else if !name_ok(name) || !value_ok(value) {
            self.fault = Some("a malformed trailer field (RFC 9113 §8.2.1)");
        } else if connection_specific(name) {
            self.fault = Some("a connection-specific trailer field (RFC 9113 §8.2.2)");
        } else {
            self.fields
                .push((Bytes::copy_from_slice(name), Bytes::copy_from_slice(value)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(fields: &[(&str, &str)]) -> Result<Box<Request>, &'static str> {
        let mut b = Builder::new(false, 1 << 16, 64);
        for (n, v) in fields {
            b.field(n.as_bytes(), v.as_bytes());
        }
        b.finish()
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.org"),
        (":path", "/a?b"),
    ];

    #[test]
    fn a_well_formed_get_gives_its_pseudo_headers_and_fields_in_order() {
        let mut f = GET.to_vec();
        f.push(("accept", "*/*"));
        f.push(("cookie", "a=1"));
        let r = build(&f).unwrap();
        assert_eq!(r.method(), b"GET");
        assert_eq!(r.scheme(), Some(&b"https"[..]));
        assert_eq!(r.authority(), Some(&b"example.org"[..]));
        assert_eq!(r.path(), Some(&b"/a?b"[..]));
        let got: Vec<_> = r.fields().collect();
        assert_eq!(got, [(&b"accept"[..], &b"*/*"[..]), (b"cookie", b"a=1")]);
    }

    #[test]
    fn rfc9113_8_3_1_a_request_needs_method_scheme_and_a_non_empty_path() {
        assert!(build(&GET[1..]).is_err());
        assert!(build(&[GET[0], GET[2], GET[3]]).is_err());
        assert!(build(&[GET[0], GET[1], GET[2]]).is_err());
        assert!(build(&[GET[0], GET[1], (":path", "")]).is_err());
        assert!(build(&[GET[0], GET[1], (":path", "index.html")]).is_err());
        assert!(build(&[GET[0], GET[1], (":path", "*")]).is_err());
        assert!(build(&[(":method", "OPTIONS"), GET[1], (":path", "*")]).is_ok());
    }

    #[test]
    fn rfc9113_8_3_pseudo_headers_come_first_once_and_only_known_ones() {
        let mut f = vec![("accept", "*/*")];
        f.extend(GET);
        assert!(build(&f).is_err(), "after a regular field");
        let mut f = GET.to_vec();
        f.push((":path", "/again"));
        assert!(build(&f).is_err(), "twice");
        let mut f = GET.to_vec();
        f.push((":status", "200"));
        assert!(build(&f).is_err(), "a response pseudo-header");
        let mut f = GET.to_vec();
        f.push((":protocol", "websocket"));
        assert!(build(&f).is_err(), ":protocol without RFC 8441");
    }

    #[test]
    fn rfc9113_8_2_names_are_lowercase_tokens_and_values_have_no_cr_lf_nul_or_edge_spaces() {
        for bad in [
            ("Accept", "x"),
            ("acc ept", "x"),
            ("", "x"),
            ("x", "a\r\nb"),
            ("x", "a\0"),
            ("x", " a"),
            ("x", "a\t"),
        ] {
            let mut f = GET.to_vec();
            f.push(bad);
            assert!(build(&f).is_err(), "{bad:?}");
        }
        let mut f = GET.to_vec();
        f.push(("x", "a b"));
        assert!(build(&f).is_ok());
    }

    #[test]
    fn rfc9113_8_2_2_connection_specific_fields_and_te_other_than_trailers_are_malformed() {
        for bad in [
            ("connection", "keep-alive"),
            ("keep-alive", "5"),
            ("proxy-connection", "x"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("te", "gzip"),
        ] {
            let mut f = GET.to_vec();
            f.push(bad);
            assert!(build(&f).is_err(), "{bad:?}");
        }
        let mut f = GET.to_vec();
        f.push(("te", "trailers"));
        assert!(build(&f).is_ok());
    }

    #[test]
    fn content_length_must_be_a_number_and_agree_with_itself() {
        let mut f = GET.to_vec();
        f.push(("content-length", "12"));
        assert_eq!(build(&f).unwrap().content_length(), Some(12));
        f.push(("content-length", "12"));
        assert!(build(&f).is_ok());
        f.push(("content-length", "13"));
        assert!(build(&f).is_err());
        let mut f = GET.to_vec();
        f.push(("content-length", "-1"));
        assert!(build(&f).is_err());
    }

    #[test]
    fn rfc9113_8_5_connect_has_only_method_and_authority() {
        assert!(build(&[(":method", "CONNECT"), (":authority", "h:443")]).is_ok());
        assert!(build(&[
            (":method", "CONNECT"),
            (":authority", "h:443"),
            (":path", "/")
        ])
        .is_err());
        assert!(build(&[(":method", "CONNECT")]).is_err());
    }

    #[test]
    fn rfc8441_4_an_extended_connect_has_protocol_scheme_and_path() {
        let mut b = Builder::new(true, 1 << 16, 64);
        for (n, v) in [
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "https"),
            (":path", "/chat"),
            (":authority", "h"),
        ] {
            b.field(n.as_bytes(), v.as_bytes());
        }
        let r = b.finish().unwrap();
        assert_eq!(r.protocol(), Some(&b"websocket"[..]));
    }

    #[test]
    fn trailers_refuse_pseudo_headers() {
        let mut t = Trailers::default();
        t.field(b"grpc-status", b"0");
        assert!(t.fault.is_none());
        t.field(b":path", b"/");
        assert!(t.fault.is_some());
    }
}
