//! The run plan: everything a run needs, resolved and pre-serialized before
//! the first request (the CLI and the scenario file both produce one).

use crate::util::Rng;
use std::net::SocketAddr;
use std::time::Duration;

/// Where the requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// Addresses the host resolved to; connections use the first.
    pub addrs: Vec<SocketAddr>,
    /// Host name as given (for the report).
    pub host: String,
    pub port: u16,
    /// Value of the `Host` header.
    pub authority: String,
    /// `https://`: the TLS client settings.
    pub tls: Option<crate::transport::TlsSetup>,
    /// `--http3`: the QUIC settings (over `tls`'s, with ALPN `h3`).
    pub quic: Option<crate::quic::QuicSetup>,
}

/// A parsed `http[s]://host[:port]/path` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `https://`.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, String> {
        let (rest, tls) = if let Some(r) = s.strip_prefix("http://") {
            (r, false)
        } else if let Some(r) = s.strip_prefix("https://") {
            (r, true)
        } else if s.contains("://") {
            return Err(format!("{s}: only http:// and https:// URLs are supported"));
        } else {
            (s, false)
        };
        let default_port = if tls { 443 } else { 80 };
        let (auth, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if auth.contains('@') {
            return Err(format!(
                "{s}: user info in the URL is not supported (use -A USER:PASS)"
            ));
        }
        let (host, port) = if let Some(r) = auth.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| format!("{s}: unclosed '[' in the host"))?;
            let port = match &r[end + 1..] {
                "" => default_port,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| format!("{s}: bad port"))?,
            };
            (r[..end].to_string(), port)
        } else {
            match auth.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    p.parse().map_err(|_| format!("{s}: bad port {p:?}"))?,
                ),
                None => (auth.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(format!("{s}: no host in the URL"));
        }
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!("{s}: spaces or control characters in the path"));
        }
        Ok(Url {
            tls,
            host,
            port,
            path,
        })
    }

    /// The `Host` header value (RFC 9110 §7.2): port omitted when it is
    /// the scheme's default.
    pub fn authority(&self) -> String {
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.tls { 443 } else { 80 } {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

/// One request of the mix, serialized once.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub bytes: Vec<u8>,
    pub body_len: usize,
    pub is_head: bool,
    pub path: String,
    pub weight: u64,
    /// Its group in the per-URL breakdown (an index of `Plan::groups`).
    pub group: usize,
    /// The request has `{client}` or `{seq}` placeholders: it is rendered
    /// per request from this template instead of sent as `bytes`.
    pub template: Option<Box<Template>>,
    /// Over HTTP/2: the request's header block and body.
    pub h2: Option<Box<crate::h2::H2Request>>,
    /// Over HTTP/3: the request stream's frames.
    pub h3: Option<Box<crate::h3::H3Request>>,
}

impl RequestSpec {
    /// A request without placeholders, or with them when `templated`
    /// (the body's only when `body_templated`: a body file is sent as it
    /// is).
    pub fn new(
        bytes: Vec<u8>,
        body_len: usize,
        method: &str,
        path: &str,
        weight: u64,
        body_templated: bool,
    ) -> RequestSpec {
        let template = Template::compile(&bytes, body_len, body_templated).map(Box::new);
        RequestSpec {
            bytes,
            body_len,
            is_head: method.eq_ignore_ascii_case("HEAD"),
            path: path.to_string(),
            weight,
            template,
            group: 0,
            h2: None,
            h3: None,
        }
    }
}

/// A piece of a request template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seg {
    /// Bytes `start..end` of the template's literal bytes.
    Lit(usize, usize),
    Client,
    Seq,
    /// `{seq/N}`: the request number divided by N, rounded down.
    SeqDiv(u64),
    /// `{seq%N}`: the remainder of the request number divided by N.
    SeqMod(u64),
}

/// The placeholder that `b` starts with, and its length: `{client}`,
/// `{seq}`, `{seq/N}` or `{seq%N}` (N a decimal number from 1).
pub(crate) fn placeholder_at(b: &[u8]) -> Option<(Seg, usize)> {
    if !b.starts_with(b"{") {
        return None;
    }
    if b.starts_with(b"{client}") {
        return Some((Seg::Client, 8));
    }
    if b.starts_with(b"{seq}") {
        return Some((Seg::Seq, 5));
    }
    let op = *b.get(4)?;
    if !b.starts_with(b"{seq") || (op != b'/' && op != b'%') {
        return None;
    }
    let digits = b[5..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 18 || b.get(5 + digits) != Some(&b'}') {
        return None;
    }
    let n: u64 = std::str::from_utf8(&b[5..5 + digits]).ok()?.parse().ok()?;
    if n == 0 {
        return None;
    }
    let seg = if op == b'/' {
        Seg::SeqDiv(n)
    } else {
        Seg::SeqMod(n)
    };
    Some((seg, 6 + digits))
}

/// A request with `{client}` / `{seq}` placeholders, split once into
/// constant parts and slots, so that a request is rendered with a few
/// copies and two number formats, not a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    lits: Vec<u8>,
    /// The head; when the body is templated, up to and including
    /// "Content-Length: " (its value is the rendered body's length).
    head: Vec<Seg>,
    /// A templated body; `None` when the body (if any) is in `head`.
    body: Option<Vec<Seg>>,
}

fn split_segs(b: &[u8], lits: &mut Vec<u8>, out: &mut Vec<Seg>) {
    let mut i = 0;
    let mut lit_start = 0;
    let push_lit = |lits: &mut Vec<u8>, out: &mut Vec<Seg>, piece: &[u8]| {
        if !piece.is_empty() {
            let s = lits.len();
            lits.extend_from_slice(piece);
            out.push(Seg::Lit(s, lits.len()));
        }
    };
    while i < b.len() {
        let hit = placeholder_at(&b[i..]);
        match hit {
            Some((seg, n)) => {
                push_lit(lits, out, &b[lit_start..i]);
                out.push(seg);
                i += n;
                lit_start = i;
            }
            None => i += 1,
        }
    }
    push_lit(lits, out, &b[lit_start..]);
}

fn has_placeholder(b: &[u8]) -> bool {
    (0..b.len()).any(|i| placeholder_at(&b[i..]).is_some())
}

/// Appends the decimal digits of `n` (no allocation, no formatter: the
/// request log formats several numbers per request).
#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

impl Template {
    /// Splits a serialized request (head, then `body_len` bytes of body)
    /// at its placeholders; `None` when it has none (it is then sent as it
    /// is, with no per-request work).
    pub fn compile(bytes: &[u8], body_len: usize, body_templated: bool) -> Option<Template> {
        let split = bytes.len().saturating_sub(body_len);
        let (head, body) = bytes.split_at(split);
        let body_has = body_templated && has_placeholder(body);
        if !body_has && !has_placeholder(head) {
            return None;
        }
        let mut t = Template {
            lits: Vec::new(),
            head: Vec::new(),
            body: None,
        };
        if body_has {
            // build_request ends the head with "Content-Length: N\r\n\r\n":
            // keep it up to the value, which each rendering fills in.
            const CL: &[u8] = b"Content-Length: ";
            let cut = head
                .windows(CL.len())
                .rposition(|w| w == CL)
                .map_or(head.len(), |i| i + CL.len());
            split_segs(&head[..cut], &mut t.lits, &mut t.head);
            let mut b = Vec::new();
            split_segs(body, &mut t.lits, &mut b);
            t.body = Some(b);
        } else {
            split_segs(head, &mut t.lits, &mut t.head);
            // The body, if any, as it is (a file's bytes are not scanned).
            if !body.is_empty() {
                let s = t.lits.len();
                t.lits.extend_from_slice(body);
                t.head.push(Seg::Lit(s, t.lits.len()));
            }
        }
        Some(t)
    }

    fn render_segs(&self, segs: &[Seg], client: u64, seq: u64, out: &mut Vec<u8>) {
        for s in segs {
            match *s {
                Seg::Lit(a, b) => out.extend_from_slice(&self.lits[a..b]),
                Seg::Client => push_u64(out, client),
                Seg::Seq => push_u64(out, seq),
                Seg::SeqDiv(n) => push_u64(out, seq / n),
                Seg::SeqMod(n) => push_u64(out, seq % n),
            }
        }
    }

    /// Renders the request for client number `client`'s request number
    /// `seq` into `out` (cleared first, its capacity reused); returns the
    /// body's length.
    pub fn render(&self, client: u64, seq: u64, out: &mut Vec<u8>, body_len: usize) -> usize {
        out.clear();
        self.render_segs(&self.head, client, seq, out);
        let Some(body) = &self.body else {
            return body_len;
        };
        // The body goes after its length: render it at the end of `out`,
        // then move it behind the Content-Length line.
        let mark = out.len();
        self.render_segs(body, client, seq, out);
        let n = out.len() - mark;
        let mut line = [0u8; 24];
        let mut k = 0;
        for &d in n.to_string().as_bytes().iter().chain(b"\r\n\r\n") {
            line[k] = d;
            k += 1;
        }
        out.splice(mark..mark, line[..k].iter().copied());
        n
    }
}

/// Per-client think time between a response and the next request.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Think {
    #[default]
    None,
    Constant(Duration),
    Uniform(Duration, Duration),
    /// Exponential with this mean, cut at `max` when given.
    Exponential(Duration, Option<Duration>),
}

impl Think {
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        match *self {
            Think::None => Duration::ZERO,
            Think::Constant(d) => d,
            Think::Uniform(a, b) => a + (b - a).mul_f64(rng.next_f64()),
            Think::Exponential(mean, cap) => {
                // 1 - u is in (0, 1]: the logarithm is finite.
                let d = mean.mul_f64(-(1.0 - rng.next_f64()).ln());
                cap.map_or(d, |c| d.min(c))
            }
        }
    }
}

/// How many clients run over time (closed loop).
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// A fixed number from the start (`-c`).
    Fixed(u64),
    /// Start with `start`, add `add` every `every`, stop adding at `max`
    /// clients started (0 = no limit).
    Ramp {
        start: u64,
        add: u64,
        every: Duration,
        max: u64,
    },
    /// From `start`, ramp linearly to each stage's `clients` over its
    /// duration; the run ends with the last stage.
    Stages {
        start: u64,
        stages: Vec<(Duration, u64)>,
    },
}

impl Load {
    /// Number of clients that should have been started by time `t`.
    pub fn want(&self, t: Duration) -> u64 {
        match self {
            Load::Fixed(n) => *n,
            Load::Ramp {
                start,
                add,
                every,
                max,
            } => {
                let steps = if every.is_zero() {
                    0
                } else {
                    (t.as_secs_f64() / every.as_secs_f64()).floor() as u64
                };
                let n = start.saturating_add(add.saturating_mul(steps));
                if *max > 0 {
                    n.min(*max)
                } else {
                    n
                }
            }
            Load::Stages { start, stages } => {
                let mut from = *start as f64;
                let mut t0 = 0.0;
                let t = t.as_secs_f64();
                for (d, to) in stages {
                    let d = d.as_secs_f64();
                    let to = *to as f64;
                    if t < t0 + d {
                        let f = if d > 0.0 { (t - t0) / d } else { 1.0 };
                        return (from + (to - from) * f).floor() as u64;
                    }
                    from = to;
                    t0 += d;
                }
                from as u64
            }
        }
    }

    /// The number of clients this load ever starts, if bounded.
    pub fn final_total(&self) -> Option<u64> {
        match self {
            Load::Fixed(n) => Some(*n),
            Load::Ramp { max, .. } => (*max > 0).then_some(*max),
            Load::Stages { start, stages } => {
                Some(stages.iter().map(|s| s.1).max().unwrap_or(0).max(*start))
            }
        }
    }

    /// Upper bound of clients at once (for sizing the report).
    pub fn peak(&self) -> u64 {
        self.final_total().unwrap_or(u64::MAX)
    }

    /// When the stages end (the run's implicit duration).
    pub fn stages_end(&self) -> Option<Duration> {
        match self {
            Load::Stages { stages, .. } => Some(stages.iter().map(|s| s.0).sum()),
            _ => None,
        }
    }
}

/// Rules that stop a run early.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AbortRules {
    /// Stop when a response takes longer than this (or a request has been
    /// waiting that long).
    pub latency_over: Option<Duration>,
    /// Stop when more than this many requests failed.
    pub errors_over: Option<u64>,
    /// Stop when, over a second with at least 20 finished requests, the
    /// failed share exceeds this ratio (0..1).
    pub error_ratio_over: Option<f64>,
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub target: Target,
    pub requests: Vec<RequestSpec>,
    /// Cumulative weights of `requests` (for the weighted mix).
    pub cumulative: Vec<u64>,
    /// Names of the groups of the per-URL breakdown: one per `[[mix]]`
    /// entry, one per size class of a `[tree]`.
    pub groups: Vec<String>,
    /// Clients (closed loop) or connections (open loop).
    pub concurrency: u64,
    pub threads: usize,
    pub keep_alive: bool,
    pub http10: bool,
    /// `--http2`: HTTP/2 by ALPN over TLS, by prior knowledge over TCP.
    pub http2: bool,
    /// HTTP/2: requests in flight per connection (h2load's `-m`); the
    /// clients (`concurrency`) are connections x streams.
    pub streams: u32,
    /// `--http3`: HTTP/3 over QUIC (https:// URLs).
    pub http3: bool,
    /// Total requests to finish (`-n`).
    pub limit: Option<u64>,
    /// Time limit (`-t`, `-d`, or the end of the stages).
    pub duration: Option<Duration>,
    /// Open loop: requests per second, all threads together.
    pub rate: Option<f64>,
    /// Per-request timeout.
    pub timeout: Duration,
    pub think: Think,
    pub load: Load,
    /// Requests each client makes before it leaves.
    pub per_client: Option<u64>,
    /// Closed loop: delay between a client's start and its first request,
    /// uniform in [min, max] (min = max: a fixed delay).
    pub first_delay: Option<(Duration, Duration)>,
    /// Record the running mean and deviation every this many responses
    /// (BENCH4's per-response curve).
    pub running_every: Option<u64>,
    pub abort: AbortRules,
    pub seed: u64,
    /// ab's `-l`: responses of different lengths are not failures.
    pub variable_length: bool,
    /// A description of the shape for the report.
    pub scenario_name: Option<String>,
    /// Closed loop: also record latencies corrected for coordinated
    /// omission (`--corrected`).
    pub corrected: bool,
    /// Pass/fail checks of the finished run: the scenario's `thresholds`,
    /// then the command line's `--threshold`s.
    pub thresholds: Vec<crate::threshold::Threshold>,
}

impl Plan {
    /// Picks a request of the mix.
    #[inline]
    pub fn pick(&self, rng: &mut Rng) -> usize {
        if self.requests.len() == 1 {
            return 0;
        }
        let total = *self.cumulative.last().unwrap_or(&1);
        let x = rng.below(total);
        self.cumulative.partition_point(|&c| c <= x)
    }

    pub fn open_loop(&self) -> bool {
        self.rate.is_some()
    }

    /// Closed loop, and the clients running vary over the run (a ramp,
    /// stages, quotas, think time or a first-request delay): the
    /// configured count is only a maximum, and the per-level table is
    /// kept.
    pub fn varying_clients(&self) -> bool {
        !self.open_loop()
            && (!matches!(self.load, Load::Fixed(_))
                || self.think != Think::None
                || self.per_client.is_some()
                || self.first_delay.is_some())
    }
}

/// Options of one request to serialize.
pub struct RequestOpts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub authority: &'a str,
    pub http10: bool,
    pub keep_alive: bool,
    /// Extra header lines "Name: value" (they replace the defaults of the
    /// same name: Host, User-Agent, Connection).
    pub headers: &'a [String],
    pub body: Option<(&'a [u8], &'a str)>,
}

/// Serializes a request head (and body) once, before the run.
pub fn build_request(o: &RequestOpts) -> Vec<u8> {
    let has = |name: &str| {
        o.headers.iter().any(|h| {
            h.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    };
    let mut b = Vec::with_capacity(128);
    b.extend_from_slice(o.method.as_bytes());
    b.push(b' ');
    b.extend_from_slice(o.path.as_bytes());
    b.extend_from_slice(if o.http10 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    if !has("host") {
        b.extend_from_slice(b"Host: ");
        b.extend_from_slice(o.authority.as_bytes());
        b.extend_from_slice(b"\r\n");
    }
    if !has("user-agent") {
        b.extend_from_slice(
            concat!("User-Agent: stoa-bench/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
        );
    }
    if !has("connection") {
        match (o.http10, o.keep_alive) {
            (true, true) => b.extend_from_slice(b"Connection: Keep-Alive\r\n"),
            (false, false) => b.extend_from_slice(b"Connection: close\r\n"),
            _ => {}
        }
    }
    for h in o.headers {
        b.extend_from_slice(h.trim().as_bytes());
        b.extend_from_slice(b"\r\n");
    }
    if let Some((body, ctype)) = o.body {
        if !has("content-type") {
            b.extend_from_slice(b"Content-Type: ");
            b.extend_from_slice(ctype.as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(b"Content-Length: ");
        b.extend_from_slice(body.len().to_string().as_bytes());
        b.extend_from_slice(b"\r\n\r\n");
        b.extend_from_slice(body);
    } else {
        b.extend_from_slice(b"\r\n");
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_ports_ipv6_and_queries() {
        let u = Url::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "/a/b?x=1")
        );
        let u = Url::parse("http://[::1]:81").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("::1", 81, "/"));
        assert_eq!(u.authority(), "[::1]:81");
        let u = Url::parse("localhost?q").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/?q"));
        let u = Url::parse("https://x/a").unwrap();
        assert!(u.tls);
        assert_eq!((u.port, u.authority().as_str()), (443, "x"));
        assert_eq!(Url::parse("https://x:8443/").unwrap().authority(), "x:8443");
        assert!(Url::parse("ftp://x/").is_err());
        assert!(Url::parse("http://:80/").is_err());
        assert!(Url::parse("http://x:99999/").is_err());
        assert!(Url::parse("http://x/a b").is_err());
    }

    #[test]
    fn requests_carry_the_ab_headers_and_connection_semantics() {
        let h = ["X-A: 1".to_string()];
        let r = build_request(&RequestOpts {
            method: "GET",
            path: "/",
            authority: "h:1",
            http10: true,
            keep_alive: true,
            headers: &h,
            body: None,
        });
        let s = String::from_utf8(r).unwrap();
        assert!(s.starts_with("GET / HTTP/1.0\r\nHost: h:1\r\n"));
        assert!(s.contains("Connection: Keep-Alive\r\n"));
        assert!(s.ends_with("X-A: 1\r\n\r\n"));
        let h = ["host: other".to_string()];
        let r = build_request(&RequestOpts {
            method: "POST",
            path: "/f",
            authority: "h:1",
            http10: false,
            keep_alive: false,
            headers: &h,
            body: Some((b"a=1", "application/x-www-form-urlencoded")),
        });
        let s = String::from_utf8(r).unwrap();
        assert!(!s.contains("Host: h:1"));
        assert!(s.contains("Connection: close\r\n"));
        assert!(s.ends_with("Content-Length: 3\r\n\r\na=1"));
    }

    /// A user who makes 10 requests and leaves, visited in turn with 99
    /// others (the FastCGI paper's clients, §5.3): `{seq%100}` is the
    /// user's place in the turn, `{seq/1000}` the generation of users.
    #[test]
    fn seq_divided_and_its_remainder_render_as_numbers() {
        let b = build_request(&RequestOpts {
            method: "GET",
            path: "/p?user=c{client}s{seq%100}g{seq/1000}&x={seq/}{seq%0}{seq/1",
            authority: "h",
            http10: false,
            keep_alive: true,
            headers: &[],
            body: None,
        });
        let t = Template::compile(&b, 0, false).unwrap();
        let mut out = Vec::new();
        t.render(3, 2345, &mut out, 0);
        let r = String::from_utf8(out.clone()).unwrap();
        assert!(
            r.starts_with("GET /p?user=c3s45g2&x={seq/}{seq%0}{seq/1 HTTP/1.1\r\n"),
            "{r}"
        );
        assert_eq!(placeholder_at(b"{seq%7}x"), Some((Seg::SeqMod(7), 7)));
        assert_eq!(placeholder_at(b"{seq/1000}"), Some((Seg::SeqDiv(1000), 10)));
        assert_eq!(placeholder_at(b"{seq%}"), None);
        assert_eq!(
            crate::util::form_encode_keeping_placeholders("a b{seq%10}/{seq/3}"),
            "a+b{seq%10}%2F{seq/3}"
        );
    }

    #[test]
    fn a_template_renders_its_placeholders_and_the_length_of_its_body() {
        let h = ["X-U: {client}".to_string()];
        let b = build_request(&RequestOpts {
            method: "POST",
            path: "/u/{client}?s={seq}",
            authority: "h",
            http10: false,
            keep_alive: true,
            headers: &h,
            body: Some((b"id={client}&n={seq}{x}", "text/plain")),
        });
        let t = Template::compile(&b, 22, true).unwrap();
        let mut out = Vec::new();
        let n = t.render(7, 12345, &mut out, 22);
        let r = String::from_utf8(out.clone()).unwrap();
        assert!(r.starts_with("POST /u/7?s=12345 HTTP/1.1\r\n"), "{r}");
        assert!(r.contains("X-U: 7\r\n"), "{r}");
        assert!(
            r.ends_with("Content-Length: 15\r\n\r\nid=7&n=12345{x}"),
            "{r}"
        );
        assert_eq!(n, 15);
        // A body file's bytes are sent as they are, with the length given.
        let t = Template::compile(&b, 22, false).unwrap();
        assert_eq!(t.render(1, 2, &mut out, 22), 22);
        assert!(out.ends_with(b"Content-Length: 22\r\n\r\nid={client}&n={seq}{x}"));
        // No placeholder: no template, the bytes go out as built.
        let plain = build_request(&RequestOpts {
            method: "GET",
            path: "/{clients}",
            authority: "h",
            http10: false,
            keep_alive: true,
            headers: &[],
            body: None,
        });
        assert_eq!(Template::compile(&plain, 0, true), None);
    }

    #[test]
    fn ramps_and_stages_give_the_clients_wanted_over_time() {
        let r = Load::Ramp {
            start: 1,
            add: 1,
            every: Duration::from_secs(2),
            max: 3,
        };
        let w: Vec<u64> = [0.0, 1.9, 2.0, 4.0, 100.0]
            .iter()
            .map(|&t| r.want(Duration::from_secs_f64(t)))
            .collect();
        assert_eq!(w, vec![1, 1, 2, 3, 3]);
        let s = Load::Stages {
            start: 0,
            stages: vec![
                (Duration::from_secs(10), 100),
                (Duration::from_secs(5), 100),
            ],
        };
        assert_eq!(s.want(Duration::from_secs(0)), 0);
        assert_eq!(s.want(Duration::from_secs(5)), 50);
        assert_eq!(s.want(Duration::from_secs(12)), 100);
        assert_eq!(s.stages_end(), Some(Duration::from_secs(15)));
    }

    #[test]
    fn think_times_follow_their_distribution() {
        let mut rng = Rng::new(1, 1);
        let u = Think::Uniform(Duration::from_secs(1), Duration::from_secs(8));
        let e = Think::Exponential(Duration::from_millis(100), None);
        let (mut su, mut se) = (0.0, 0.0);
        for _ in 0..20000 {
            let x = u.sample(&mut rng);
            assert!(x >= Duration::from_secs(1) && x <= Duration::from_secs(8));
            su += x.as_secs_f64();
            se += e.sample(&mut rng).as_secs_f64();
        }
        assert!((su / 20000.0 - 4.5).abs() < 0.1, "{}", su / 20000.0);
        assert!((se / 20000.0 - 0.1).abs() < 0.005, "{}", se / 20000.0);
    }
}
