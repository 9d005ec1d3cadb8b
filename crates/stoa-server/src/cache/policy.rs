//! RFC 9111 (HTTP caching), RFC 5861 (stale-while-revalidate,
//! stale-if-error) and the surrogate conventions (Surrogate-Control,
//! X-Accel-Expires, Surrogate-Key) as pure functions for a SHARED cache.
//! Inputs are header blocks (`Name: value\r\n` lines, as
//! `exchange::Sub` collects them) and `stoa_h1::RequestHead`s; times are
//! arguments (never the clock). Hostile input never panics: numbers
//! saturate at 2^31 s (§1.2.2), garbage is invalid as the RFC says.
//!
//! API:
//! - header blocks: [`fields`], [`field`], [`directives`] (a
//!   Cache-Control-style list parser: quoted strings, commas in quotes);
//! - [`request_directives`] → [`RequestDirectives`] (§5.2.1, Pragma
//!   §5.4);
//! - [`may_store`] → `Result<`[`Storable`]`, `[`NotStorable`]`>` (§3,
//!   §3.5, Set-Cookie, Surrogate-Control, X-Accel-Expires, default TTL),
//!   with [`Received`] (status, head, times) and [`Rules`] (the route's
//!   default_ttl and RFC 5861 defaults); [`storable`] is the request
//!   path's older one-call form;
//! - fetches: [`fetched`] → [`Fetched`] (stored or not, the secondary
//!   key, or [`OWN_REQUEST_ONLY`] for a response to Authorization that
//!   no waiter may take, and whether to remember the key as uncacheable),
//!   [`shareable`] (a fetched response the waiters may be given),
//!   [`refresh`] → [`Refresh`] (what a 304 does to the stored object),
//!   [`collapsible`] (a request that may refresh in the background: not
//!   with Authorization, §3.5);
//! - [`freshness_lifetime`] → [`Lifetime`] (§4.2.1, heuristic §4.2.2),
//!   [`current_age`] (§4.2.3), [`freshness`] → [`Freshness`] (what a
//!   store keeps beside an object to decide hits without parsing);
//! - [`decide`] → [`Use`] (fresh / stale but servable / validate /
//!   only-if-cached 504, §4, §4.2.4, §5.2, RFC 5861), [`stale_if_error`]
//!   (RFC 5861 §4, when validation failed);
//! - [`vary_key`], [`vary_matches`] (§4.1 secondary keys);
//! - [`merge_304`] (§4.3.4, §3.2), [`validation_fields`] (§4.3.1);
//! - [`invalidates`], [`invalidation_urls`] (§4.4);
//! - [`client_head`] (the stored head as clients get it), [`age_secs`],
//!   [`tags`] (Surrogate-Key).
//!
//! Choices where the RFCs leave room (each cited where it is made):
//! - two different values of max-age, s-maxage or Expires, or an invalid
//!   one, make the response stale (§4.2.1 allows "first wins" or stale;
//!   stale is the safe one); in a request the first wins;
//! - `no-cache="field"` and `private="field"` act unqualified (the notes
//!   of §5.2.2.4 and §5.2.2.7): fields are never stripped to serve
//!   without validation;
//! - the heuristic (§4.2.2) is 10 % of Date - Last-Modified, at most one
//!   day; the route's default_ttl replaces it, for the same responses
//!   (heuristically cacheable status or `public`);
//! - X-Accel-Expires (first) and Surrogate-Control max-age set the
//!   lifetime for this cache only but never lift `no-store`, `private` or
//!   §3.5 Authorization; a zero one is "not stored" (nginx reads
//!   `X-Accel-Expires: 0` so); `Set-Cookie` responses are never stored;
//! - a response to Authorization that may not be stored goes to its
//!   own request only (never to collapsed waiters: the key does not hold
//!   the credentials), and such requests start no background refresh;
//!   refusals by the request leave no hit-for-miss mark ([`fetched`]);
//! - must-revalidate, proxy-revalidate, s-maxage and no-cache forbid
//!   stale use (max-stale, stale-while-revalidate, the route's
//!   stale-if-error), but a response's own `stale-if-error` applies
//!   "regardless of other freshness information" (RFC 5861 §4);
//! - a request with max-age or min-fresh gets no stale-while-revalidate
//!   answer (it asked for fresher), and one with no-cache no
//!   stale-if-error answer (it asked for a validated one);
//! - a response never fresh, without validators or stale windows, is not
//!   stored ([`NotStorable::Useless`]).

// Parts of this API land before the request path calls them (it moves
// onto them as the branches merge).

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use stoa_h1::{Method, RequestHead};

// ---------------------------------------------------------------------
// Header blocks and directive lists

/// Every line of a header block as (name, value), the value trimmed of
/// OWS. Lines without a colon are skipped.
pub(crate) fn lines(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.split(|&b| b == b'\n').filter_map(|l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        let c = l.iter().position(|&b| b == b':')?;
        Some((&l[..c], stoa_h1::trim(&l[c + 1..])))
    })
}

/// The values of every line named `name` (case-insensitive), in order.
pub(crate) fn fields<'h>(head: &'h [u8], name: &'h str) -> impl Iterator<Item = &'h [u8]> + 'h {
    lines(head)
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v)
}

/// The value of the first line named `name`.
pub(crate) fn field<'h>(head: &'h [u8], name: &'h str) -> Option<&'h [u8]> {
    fields(head, name).next()
}

/// The directives of one Cache-Control-style field value (RFC 9111
/// §5.2: `token [ "=" ( token / quoted-string ) ]`, comma-separated), as
/// (name, value): a quoted value without its quotes (escapes left as
/// sent; commas inside quotes do not split). Empty list members are
/// skipped (RFC 9110 §5.6.1); bytes after a value up to the next comma
/// are ignored.
pub(crate) fn directives(v: &[u8]) -> Directives<'_> {
    Directives { v, i: 0 }
}

/// Iterator of [`directives`].
#[derive(Debug, Clone)]
pub(crate) struct Directives<'a> {
    v: &'a [u8],
    i: usize,
}

impl<'a> Iterator for Directives<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        let v = self.v;
        let len = v.len();
        let ows = |b: u8| b == b' ' || b == b'\t';
        loop {
            let mut i = self.i;
            while i < len && (ows(v[i]) || v[i] == b',') {
                i += 1;
            }
            if i >= len {
                self.i = len;
                return None;
            }
            let start = i;
            while i < len && !matches!(v[i], b'=' | b',' | b' ' | b'\t') {
                i += 1;
            }
            let name = &v[start..i];
            while i < len && ows(v[i]) {
                i += 1;
            }
            let mut value = None;
            if i < len && v[i] == b'=' {
                i += 1;
                while i < len && ows(v[i]) {
                    i += 1;
                }
                if i < len && v[i] == b'"' {
                    i += 1;
                    let s = i;
                    while i < len && v[i] != b'"' {
                        i += if v[i] == b'\\' { 2 } else { 1 };
                    }
                    let e = i.min(len);
                    value = Some(&v[s..e]);
                    i = (i + 1).min(len);
                } else {
                    let s = i;
                    while i < len && !matches!(v[i], b',' | b' ' | b'\t') {
                        i += 1;
                    }
                    value = Some(&v[s..i]);
                }
            }
            while i < len && v[i] != b',' {
                i += 1;
            }
            self.i = i;
            if !name.is_empty() {
                return Some((name, value));
            }
        }
    }
}

/// The largest delta-seconds a cache must represent; greater values and
/// overflows become it (RFC 9111 §1.2.2).
pub(crate) const DELTA_MAX: u64 = 1 << 31;

/// RFC 9111 §1.2.2 delta-seconds: digits only (no sign, no space);
/// saturates at [`DELTA_MAX`]. None: invalid.
pub(crate) fn delta_seconds(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10)
            .saturating_add(u64::from(d - b'0'))
            .min(DELTA_MAX)
    }))
}

/// An HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850
/// and asctime forms). None: invalid.
pub(crate) fn http_date(v: &[u8]) -> Option<SystemTime> {
    httpdate::parse_http_date(std::str::from_utf8(v).ok()?).ok()
}

/// `a - b`, or zero when `b` is later.
fn since(a: SystemTime, b: SystemTime) -> Duration {
    a.duration_since(b).unwrap_or(Duration::ZERO)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

// ---------------------------------------------------------------------
// Requests

/// `max-stale` (RFC 9111 §5.2.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxStale {
    /// Without a value: any staleness.
    Any,
    /// At most this many seconds stale.
    Secs(u64),
}

/// What a request's Cache-Control (or Pragma) asks of the cache (RFC
/// 9111 §5.2.1). Duplicate directives: the first wins. Unknown
/// directives are ignored (§5.2.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RequestDirectives {
    /// §5.2.1.4 `no-cache`, or §5.4 `Pragma: no-cache` without a
    /// Cache-Control field: nothing stored is used without validation.
    pub(crate) no_cache: bool,
    /// §5.2.1.5 `no-store`: the response to this request is not stored.
    pub(crate) no_store: bool,
    /// §5.2.1.1 `max-age`: nothing older is acceptable. An invalid value
    /// reads as 0 (the client wants something fresh; validating is the
    /// safe reading).
    pub(crate) max_age: Option<u64>,
    /// §5.2.1.3 `min-fresh`: still fresh for this long. Invalid: ignored.
    pub(crate) min_fresh: Option<u64>,
    /// §5.2.1.2 `max-stale`. An invalid value: ignored (no stale answer
    /// the client did not clearly accept).
    pub(crate) max_stale: Option<MaxStale>,
    /// §5.2.1.7 `only-if-cached`: never forwarded; 504 when nothing
    /// stored can be used.
    pub(crate) only_if_cached: bool,
    /// RFC 5861 §4 `stale-if-error` as a request directive: the client
    /// accepts a response this stale when the application fails.
    pub(crate) stale_if_error: Option<u64>,
}

/// The request's directives (RFC 9111 §5.2.1; Pragma §5.4).
pub(crate) fn request_directives(req: &RequestHead) -> RequestDirectives {
    let mut d = RequestDirectives::default();
    let mut any_cc = false;
    let mut pragma_no_cache = false;
    for (name, value) in req.headers() {
        if name.eq_ignore_ascii_case(b"cache-control") {
            any_cc = true;
            for (n, v) in directives(value) {
                request_directive(&mut d, n, v);
            }
        } else if name.eq_ignore_ascii_case(b"pragma") {
            pragma_no_cache |= directives(value).any(|(n, _)| n.eq_ignore_ascii_case(b"no-cache"));
        }
    }
    // RFC 9111 §5.4 deprecates Pragma but keeps RFC 7234 §5.4's rule:
    // `Pragma: no-cache` means `Cache-Control: no-cache` for HTTP/1.0
    // clients, only when the request has no Cache-Control.
    if !any_cc && pragma_no_cache {
        d.no_cache = true;
    }
    d
}

fn request_directive(d: &mut RequestDirectives, n: &[u8], v: Option<&[u8]>) {
    let is = |s: &str| n.eq_ignore_ascii_case(s.as_bytes());
    if is("no-cache") {
        d.no_cache = true;
    } else if is("no-store") {
        d.no_store = true;
    } else if is("only-if-cached") {
        d.only_if_cached = true;
    } else if is("max-age") {
        if d.max_age.is_none() {
            d.max_age = Some(v.and_then(delta_seconds).unwrap_or(0));
        }
    } else if is("min-fresh") {
        if d.min_fresh.is_none() {
            d.min_fresh = v.and_then(delta_seconds);
        }
    } else if is("max-stale") {
        if d.max_stale.is_none() {
            d.max_stale = match v {
                None => Some(MaxStale::Any),
                Some(v) => delta_seconds(v).map(MaxStale::Secs),
            };
        }
    } else if is("stale-if-error") && d.stale_if_error.is_none() {
        d.stale_if_error = v.and_then(delta_seconds);
    }
}

// ---------------------------------------------------------------------
// Responses

/// A delta-seconds response directive: absent, a value, or more than one
/// different value / an invalid one, which RFC 9111 §4.2.1 lets a cache
/// treat as stale (we do: the response is stored only to be validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Delta {
    #[default]
    Absent,
    Secs(u64),
    Stale,
}

impl Delta {
    fn add(&mut self, v: Option<&[u8]>) {
        let new = v.and_then(delta_seconds);
        *self = match (*self, new) {
            (Delta::Absent, Some(n)) => Delta::Secs(n),
            (Delta::Secs(a), Some(b)) if a == b => Delta::Secs(a),
            _ => Delta::Stale,
        };
    }

    fn get(self) -> Option<u64> {
        match self {
            Delta::Absent => None,
            Delta::Secs(n) => Some(n),
            Delta::Stale => Some(0),
        }
    }
}

/// A response's Cache-Control directives that matter to a shared cache
/// (RFC 9111 §5.2.2, RFC 5861).
#[derive(Debug, Clone, Copy, Default)]
struct ResponseDirectives {
    max_age: Delta,
    s_maxage: Delta,
    no_store: bool,
    /// `no-cache`, qualified or not: §5.2.2.4's note says the qualified
    /// form is often handled as unqualified, and we do (we never strip
    /// fields to serve without validation).
    no_cache: bool,
    /// `private`, qualified or not: a shared cache does not store it
    /// (§5.2.2.7; the qualified form is treated as unqualified, as that
    /// section's note allows).
    private: bool,
    public: bool,
    must_revalidate: bool,
    proxy_revalidate: bool,
    must_understand: bool,
    stale_while_revalidate: Option<u64>,
    stale_if_error: Option<u64>,
}

fn response_directives(head: &[u8]) -> ResponseDirectives {
    let mut d = ResponseDirectives::default();
    for value in fields(head, "cache-control") {
        for (n, v) in directives(value) {
            let is = |s: &str| n.eq_ignore_ascii_case(s.as_bytes());
            if is("max-age") {
                d.max_age.add(v);
            } else if is("s-maxage") {
                d.s_maxage.add(v);
            } else if is("no-store") {
                d.no_store = true;
            } else if is("no-cache") {
                d.no_cache = true;
            } else if is("private") {
                d.private = true;
            } else if is("public") {
                d.public = true;
            } else if is("must-revalidate") {
                d.must_revalidate = true;
            } else if is("proxy-revalidate") {
                d.proxy_revalidate = true;
            } else if is("must-understand") {
                d.must_understand = true;
            } else if is("stale-while-revalidate") {
                // RFC 5861 §3; the first valid one.
                d.stale_while_revalidate = d.stale_while_revalidate.or(v.and_then(delta_seconds));
            } else if is("stale-if-error") {
                d.stale_if_error = d.stale_if_error.or(v.and_then(delta_seconds));
            }
        }
    }
    d
}

/// A response status this cache understands (RFC 9110 §15 defines it and
/// we know its caching requirements). RFC 9110 §15: a response with an
/// unrecognised status code MUST NOT be cached. 206 and 304 are
/// understood but never stored whole (see [`NotStorable`]).
fn understood(status: u16) -> bool {
    matches!(
        status,
        200..=206 | 300..=304 | 307 | 308 | 400..=417 | 421 | 422 | 426 | 429 | 451 | 500..=505
    )
}

/// RFC 9110 §15.1 / RFC 9111 §4.2.2: status codes "heuristically
/// cacheable" (stored and given a lifetime without explicit freshness).
pub(crate) fn heuristically_cacheable(status: u16) -> bool {
    matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// The route's rules for responses that say less than the RFC needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    /// The lifetime of responses without explicit freshness whose status
    /// is heuristically cacheable or that are `public` (nginx
    /// `proxy_cache_valid`, Varnish `default_ttl`); zero: RFC 9111
    /// §4.2.2's heuristic.
    pub(crate) default_ttl: Duration,
    /// RFC 5861 windows for responses that give none (an out-of-band
    /// contract, RFC 9111 §4.2.4). They never override `must-revalidate`,
    /// `proxy-revalidate`, `s-maxage` or `no-cache`.
    pub(crate) stale_while_revalidate: Duration,
    pub(crate) stale_if_error: Duration,
}

/// A response as it arrived: status, header block and the times around
/// its request (RFC 9111 §4.2.3 `request_time`, `response_time`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received<'a> {
    pub(crate) status: u16,
    pub(crate) head: &'a [u8],
    pub(crate) request_time: SystemTime,
    pub(crate) response_time: SystemTime,
}

/// Why a response is not stored (for logs and `Cache-Status` detail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStorable {
    /// RFC 9111 §3: the request method is not one the cache stores
    /// (only GET: HEAD is filled with a GET).
    Method,
    /// §3: an interim (1xx) or unrecognised status (RFC 9110 §15).
    Status,
    /// 206: only part of the representation. The cache asks for whole
    /// representations and does not combine parts (§3.3 would allow
    /// storing it incomplete; we do not).
    Partial,
    /// 304 to a request that was not conditional on what we hold.
    NotModified,
    /// §3, §5.2.2.5 `no-store` in the response, or
    /// `Surrogate-Control: no-store`.
    NoStore,
    /// §5.2.1.5 `no-store` in the request: this response is not stored,
    /// which says nothing of the next request's.
    RequestNoStore,
    /// §3, §5.2.2.7 `private`: a shared cache does not store it.
    Private,
    /// §3.5: the request had Authorization and the response does not say
    /// `public`, `s-maxage` or `must-revalidate`.
    Authorization,
    /// `Set-Cookie`: never stored (nginx and Varnish do the same), so
    /// one client's cookie never reaches another.
    SetCookie,
    /// `X-Accel-Expires: 0` (nginx: the response is not cached).
    XAccelExpiresZero,
    /// `Surrogate-Control: max-age=0` (without an X-Accel-Expires that
    /// wins over it): the application's word that this cache keeps
    /// nothing, as `X-Accel-Expires: 0` is (Fastly and Varnish read a
    /// zero surrogate lifetime as "do not cache").
    SurrogateControlZero,
    /// §3: no explicit freshness, not `public`, and a status that is not
    /// heuristically cacheable: nothing allows storing it.
    NoFreshness,
    /// A zero lifetime, no validator and no stale window: every use
    /// would need a full fetch, so storing it only evicts others.
    Useless,
    /// §4.1 `Vary: *`: no later request would match it.
    VaryAny,
}

impl NotStorable {
    /// The refusal comes from the request (its method, Authorization,
    /// `no-store`), not from the response: it tells nothing of what the
    /// application answers other requests for the key.
    pub(crate) fn by_request(self) -> bool {
        matches!(
            self,
            NotStorable::Method | NotStorable::Authorization | NotStorable::RequestNoStore
        )
    }
}

/// Where a freshness lifetime came from, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// `X-Accel-Expires: N` or `@unix` (nginx; for this cache only).
    XAccelExpires,
    /// `Surrogate-Control: max-age=N` (W3C Edge Architecture; for this
    /// cache only).
    SurrogateControl,
    /// RFC 9111 §5.2.2.10 `s-maxage`.
    SMaxAge,
    /// §5.2.2.1 `max-age`.
    MaxAge,
    /// §5.3 `Expires` - `Date`.
    Expires,
    /// The route's default_ttl.
    Default,
    /// §4.2.2: a fraction of the time since Last-Modified.
    Heuristic,
}

/// A freshness lifetime and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lifetime {
    pub(crate) lifetime: Duration,
    pub(crate) source: Source,
}

/// The heuristic: 10 % of the time since Last-Modified (RFC 9111
/// §4.2.2's suggestion), at most one day (Squid's and Firefox's cap: a
/// response untouched for years is not fresh for months).
const HEURISTIC_MAX: Duration = Duration::from_secs(86_400);

/// The `Date` of a response, or when it arrived without one (RFC 9110
/// §6.6.1: a recipient records the time of receipt).
fn date_value(head: &[u8], response_time: SystemTime) -> SystemTime {
    field(head, "date")
        .and_then(http_date)
        .unwrap_or(response_time)
}

/// `X-Accel-Expires` (nginx): `N` seconds, or `@T` an absolute Unix
/// time. Invalid values are ignored, as nginx does.
fn x_accel_expires(head: &[u8], date: SystemTime) -> Option<Duration> {
    let v = field(head, "x-accel-expires")?;
    match v.strip_prefix(b"@") {
        Some(t) => {
            let at = UNIX_EPOCH.checked_add(secs(delta_seconds_u64(t)?))?;
            Some(since(at, date))
        }
        None => delta_seconds(v).map(secs),
    }
}

/// Digits as u64, saturating at u64::MAX (an absolute time, not a
/// delta: it may exceed 2^31).
fn delta_seconds_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// `Surrogate-Control` (W3C Edge Architecture 1.0): `no-store`, and
/// `max-age=N[+M]` (N used; a device-targeting suffix `;name` is
/// accepted as we are the only surrogate).
fn surrogate_control(head: &[u8]) -> (bool, Option<Duration>) {
    let (mut no_store, mut max_age) = (false, None);
    for value in fields(head, "surrogate-control") {
        for (n, v) in directives(value) {
            let v = v.map(|v| {
                let end = v.iter().position(|&b| b == b';').unwrap_or(v.len());
                &v[..end]
            });
            let n = match n.iter().position(|&b| b == b';') {
                Some(i) => &n[..i],
                None => n,
            };
            if n.eq_ignore_ascii_case(b"no-store") {
                no_store = true;
            } else if n.eq_ignore_ascii_case(b"max-age") && max_age.is_none() {
                max_age = v
                    .map(|v| {
                        let end = v.iter().position(|&b| b == b'+').unwrap_or(v.len());
                        &v[..end]
                    })
                    .and_then(delta_seconds)
                    .map(secs);
            }
        }
    }
    (no_store, max_age)
}

/// The response's freshness lifetime for this cache (RFC 9111 §4.2.1,
/// first that applies): X-Accel-Expires, Surrogate-Control max-age (both
/// for this cache only, nginx's and the Edge Architecture's overrides),
/// s-maxage, max-age, Expires - Date (an invalid Expires, such as `0`,
/// is in the past: §5.3; two different Expires lines: stale, §4.2.1),
/// then, without explicit freshness and only for a heuristically
/// cacheable status or a `public` response (§4.2.2), the route's default
/// TTL, else 10 % of Date - Last-Modified, at most a day. None: no
/// lifetime may be given.
#[cfg(test)]
pub(crate) fn freshness_lifetime(
    status: u16,
    head: &[u8],
    response_time: SystemTime,
    default_ttl: Duration,
) -> Option<Lifetime> {
    let cc = response_directives(head);
    lifetime_with(status, head, &cc, response_time, default_ttl)
}

fn lifetime_with(
    status: u16,
    head: &[u8],
    cc: &ResponseDirectives,
    response_time: SystemTime,
    default_ttl: Duration,
) -> Option<Lifetime> {
    let date = date_value(head, response_time);
    let l = |lifetime, source| Some(Lifetime { lifetime, source });
    if let Some(d) = x_accel_expires(head, date) {
        return l(d, Source::XAccelExpires);
    }
    if let (_, Some(d)) = surrogate_control(head) {
        return l(d, Source::SurrogateControl);
    }
    if let Some(n) = cc.s_maxage.get() {
        return l(secs(n), Source::SMaxAge);
    }
    if let Some(n) = cc.max_age.get() {
        return l(secs(n), Source::MaxAge);
    }
    let mut expires = fields(head, "expires");
    if let Some(first) = expires.next() {
        // §4.2.1: with several values, the first is used or the response
        // is stale; different values: stale.
        if expires.any(|e| e != first) {
            return l(Duration::ZERO, Source::Expires);
        }
        let lifetime = http_date(first).map_or(Duration::ZERO, |e| since(e, date));
        return l(lifetime, Source::Expires);
    }
    if !(heuristically_cacheable(status) || cc.public) {
        return None;
    }
    if !default_ttl.is_zero() {
        return l(default_ttl, Source::Default);
    }
    let heuristic = field(head, "last-modified")
        .and_then(http_date)
        .map_or(Duration::ZERO, |lm| {
            (since(date, lm) / 10).min(HEURISTIC_MAX)
        });
    l(heuristic, Source::Heuristic)
}

/// RFC 9111 §4.2.3: the response's age now. `Age` (the first member;
/// invalid: ignored, §5.1), corrected by the response delay; the
/// apparent age from `Date` (or `response_time`); plus the time resident
/// here.
#[cfg(test)]
pub(crate) fn current_age(
    head: &[u8],
    request_time: SystemTime,
    response_time: SystemTime,
    now: SystemTime,
) -> Duration {
    initial_age(head, request_time, response_time).saturating_add(since(now, response_time))
}

/// §4.2.3 `corrected_initial_age`: the age when the response arrived.
fn initial_age(head: &[u8], request_time: SystemTime, response_time: SystemTime) -> Duration {
    let age_value = field(head, "age")
        .and_then(|v| {
            let first = v.split(|&b| b == b',').next().unwrap_or(v);
            delta_seconds(stoa_h1::trim(first))
        })
        .map_or(Duration::ZERO, secs);
    let apparent_age = since(response_time, date_value(head, response_time));
    let response_delay = since(response_time, request_time);
    let corrected_age_value = age_value.saturating_add(response_delay);
    apparent_age.max(corrected_age_value)
}

/// When a stored response may be reused stale at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revalidate {
    /// Stale reuse as the request, RFC 5861 or the route allow.
    Normally,
    /// Never stale (§5.2.2.2 must-revalidate, §5.2.2.8 proxy-revalidate,
    /// §5.2.2.10 s-maxage, which implies proxy-revalidate).
    OnceStale,
    /// Never without validation, fresh or not (§5.2.2.4 no-cache).
    Always,
}

/// What a store keeps beside an object to decide its uses without
/// parsing its head again: computed once when stored (and after a 304).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Freshness {
    pub(crate) lifetime: Duration,
    pub(crate) source: Source,
    /// §4.2.3 corrected_initial_age.
    pub(crate) initial_age: Duration,
    pub(crate) response_time: SystemTime,
    pub(crate) revalidate: Revalidate,
    /// RFC 5861 §3 window (the response's, else the route's; zero when
    /// `revalidate` forbids stale use).
    pub(crate) stale_while_revalidate: Duration,
    /// RFC 5861 §4 window (the response's, else the route's unless
    /// `revalidate` forbids it: RFC 5861 §4 says the response's own
    /// directive applies "regardless of other freshness information").
    pub(crate) stale_if_error: Duration,
}

impl Freshness {
    /// §4.2.3 current_age at `now`.
    pub(crate) fn age(&self, now: SystemTime) -> Duration {
        self.initial_age
            .saturating_add(since(now, self.response_time))
    }

    /// Remaining freshness in whole seconds at `now` (negative: stale so
    /// long), for `Cache-Status: ttl` (RFC 9211 §2.4).
    pub(crate) fn ttl(&self, now: SystemTime) -> i64 {
        let (l, a) = (self.lifetime.as_secs(), self.age(now).as_secs());
        let d = i64::try_from(l.abs_diff(a)).unwrap_or(i64::MAX);
        if l >= a {
            d
        } else {
            -d
        }
    }
}

/// The [`Freshness`] of a response that [`may_store`] accepted.
pub(crate) fn freshness(res: &Received<'_>, rules: &Rules) -> Freshness {
    let cc = response_directives(res.head);
    freshness_with(res, &cc, rules).unwrap_or(Freshness {
        lifetime: Duration::ZERO,
        source: Source::Heuristic,
        initial_age: initial_age(res.head, res.request_time, res.response_time),
        response_time: res.response_time,
        revalidate: Revalidate::Always,
        stale_while_revalidate: Duration::ZERO,
        stale_if_error: Duration::ZERO,
    })
}

fn freshness_with(res: &Received<'_>, cc: &ResponseDirectives, rules: &Rules) -> Option<Freshness> {
    let Lifetime { lifetime, source } = lifetime_with(
        res.status,
        res.head,
        cc,
        res.response_time,
        rules.default_ttl,
    )?;
    // X-Accel-Expires and Surrogate-Control are the application's word
    // to this cache alone: they replace what Cache-Control tells caches
    // (nginx ignores Cache-Control under X-Accel-Expires; Varnish and
    // Fastly take Surrogate-Control over it), so its `no-cache` and
    // `must-revalidate` are for the browsers behind us.
    let override_cc = matches!(source, Source::XAccelExpires | Source::SurrogateControl);
    let revalidate = if override_cc {
        Revalidate::Normally
    } else if cc.no_cache {
        Revalidate::Always
    } else if cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage != Delta::Absent {
        Revalidate::OnceStale
    } else {
        Revalidate::Normally
    };
    let free = revalidate == Revalidate::Normally;
    let swr = match cc.stale_while_revalidate {
        _ if !free => Duration::ZERO,
        Some(n) => secs(n),
        None => rules.stale_while_revalidate,
    };
    let sie = match cc.stale_if_error {
        Some(n) => secs(n),
        None if free => rules.stale_if_error,
        None => Duration::ZERO,
    };
    Some(Freshness {
        lifetime,
        source,
        initial_age: initial_age(res.head, res.request_time, res.response_time),
        response_time: res.response_time,
        revalidate,
        stale_while_revalidate: swr,
        stale_if_error: sie,
    })
}

/// A response the cache may store, and its freshness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Storable {
    pub(crate) freshness: Freshness,
}

/// RFC 9111 §3 for a shared cache: whether the response to `req` may be
/// stored, and its [`Freshness`] if so. In order: the method (GET), the
/// status (final, understood, not 206/304), `Set-Cookie` (never),
/// `X-Accel-Expires: 0`, `no-store` (request, response or
/// Surrogate-Control; a response's `must-understand` with a status we
/// understand overrides its `no-store`, §5.2.2.3), `private`,
/// Authorization (§3.5), then something that allows storing: explicit
/// freshness, a heuristically cacheable status or `public` (§3, §4.2.2).
/// A zero `Surrogate-Control: max-age` is not stored either (as
/// `X-Accel-Expires: 0`). A lifetime override (X-Accel-Expires,
/// Surrogate-Control) sets the lifetime but does not lift `no-store`, `private` or §3.5: they guard
/// privacy and stay the application's word.
pub(crate) fn may_store(
    req: &RequestHead,
    res: &Received<'_>,
    rules: &Rules,
) -> Result<Storable, NotStorable> {
    if req.method != Method::Get {
        return Err(NotStorable::Method);
    }
    match res.status {
        206 => return Err(NotStorable::Partial),
        304 => return Err(NotStorable::NotModified),
        s if !understood(s) => return Err(NotStorable::Status),
        _ => {}
    }
    let head = res.head;
    if field(head, "set-cookie").is_some() {
        return Err(NotStorable::SetCookie);
    }
    if field(head, "x-accel-expires").is_some_and(|v| delta_seconds(v) == Some(0)) {
        return Err(NotStorable::XAccelExpiresZero);
    }
    let cc = response_directives(head);
    let (surrogate_no_store, _) = surrogate_control(head);
    if surrogate_no_store || (cc.no_store && !cc.must_understand) {
        return Err(NotStorable::NoStore);
    }
    if request_directives(req).no_store {
        return Err(NotStorable::RequestNoStore);
    }
    if cc.private {
        return Err(NotStorable::Private);
    }
    if req.header("authorization").is_some()
        && !(cc.public || cc.must_revalidate || cc.s_maxage != Delta::Absent)
    {
        return Err(NotStorable::Authorization);
    }
    let f = freshness_with(res, &cc, rules).ok_or(NotStorable::NoFreshness)?;
    if f.source == Source::SurrogateControl && f.lifetime.is_zero() {
        return Err(NotStorable::SurrogateControlZero);
    }
    let validator = field(head, "etag").is_some() || field(head, "last-modified").is_some();
    if f.lifetime.is_zero()
        && !validator
        && f.stale_if_error.is_zero()
        && f.stale_while_revalidate.is_zero()
    {
        return Err(NotStorable::Useless);
    }
    Ok(Storable { freshness: f })
}

/// Whether a request may start a background refresh of a stored
/// response (RFC 5861 §3). Not with Authorization: a response to it may
/// not be stored (§3.5) unless it says so, and its 304 would refresh
/// others' object with what it may not keep; it is served the stale
/// copy and leaves the refresh to a request without credentials.
pub(crate) fn collapsible(req: &RequestHead) -> bool {
    req.header("authorization").is_none()
}

/// Whether a response fetched for a key may be given to the requests
/// that waited for that fetch: one [`may_store`] accepts for a GET
/// without Authorization under `rules`, so nothing private (`private`,
/// `no-store`, `Set-Cookie`) reaches a client it was not meant for. (A
/// response for its own request alone never gets this far: its
/// [`Fetched::variant`] matches no waiter.)
pub(crate) fn shareable(
    status: u16,
    head: &[u8],
    request_time: SystemTime,
    response_time: SystemTime,
    rules: &Rules,
) -> bool {
    let req = RequestHead::from_parts(Method::Get, b"/", stoa_h1::Version::Http11, []);
    let res = Received {
        status,
        head,
        request_time,
        response_time,
    };
    may_store(&req, &res, rules).is_ok()
}

/// The secondary key of a response that answers only the request it was
/// fetched for (one with Authorization, whose response may not be stored,
/// RFC 9111 §3.5): [`vary_matches`] matches no request with it, so
/// requests waiting for the same fetch never take it. [`vary_key`] never
/// makes it (its keys are empty or start with a field name, never NUL).
pub(crate) const OWN_REQUEST_ONLY: &[u8] = b"\0own-request";

/// What a fetch does with the response it received for `req`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fetched {
    /// [`may_store`]'s verdict, and `Vary: *` refused (§4.1).
    pub(crate) store: Result<Storable, NotStorable>,
    /// The secondary key (§4.1, [`vary_key`]), or [`OWN_REQUEST_ONLY`].
    pub(crate) variant: Vec<u8>,
    /// Remember the key as uncacheable for a while (Varnish's
    /// hit-for-miss): only when the response itself refused storing. A
    /// refusal by the request (Authorization, request `no-store`) says
    /// nothing of the next request's response; an error status passes
    /// (and stale-if-error needs the fill).
    pub(crate) hit_for_miss: bool,
}

/// [`Fetched`] for a response `res` to the fetch `req` under `rules`.
pub(crate) fn fetched(req: &RequestHead, res: &Received<'_>, rules: &Rules) -> Fetched {
    let mut store = may_store(req, res, rules);
    let variant = match &store {
        Err(NotStorable::Authorization) => OWN_REQUEST_ONLY.to_vec(),
        _ => match vary_key(res.head, req) {
            Some(v) => v,
            None => {
                store = Err(NotStorable::VaryAny);
                Vec::new()
            }
        },
    };
    let hit_for_miss = match store {
        Ok(_) => false,
        Err(why) => !why.by_request() && !is_error_status(res.status),
    };
    Fetched {
        store,
        variant,
        hit_for_miss,
    }
}

/// What a 304 to a revalidation does to the stored response (RFC 9111
/// §4.3.4), given the stored response with the 304's fields merged
/// ([`merge_304`]) as `merged`, for the fetch `req`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refresh {
    /// Stored with the merged fields: fresh again.
    Update,
    /// Left as it was (this request's `no-store`, §5.2.1.5: no part of
    /// a response to it is stored; the object is another request's and
    /// stays): answered from it, not updated.
    Keep,
    /// The merged response may no longer be stored (the 304 brought
    /// `no-store`, `private`, `Set-Cookie`...): removed.
    Remove,
}

/// [`Refresh`] for a 304. A request with Authorization updates the
/// object when the merged response may be stored for a request without
/// it: the 304 says its representation is the stored one (the validator
/// matched), so the refusal of §3.5, which is about what its own
/// response would carry, does not turn the other readers' object away.
pub(crate) fn refresh(req: &RequestHead, merged: &Received<'_>, rules: &Rules) -> Refresh {
    match may_store(req, merged, rules) {
        Ok(_) => Refresh::Update,
        Err(NotStorable::RequestNoStore) => Refresh::Keep,
        Err(NotStorable::Authorization) => {
            if shareable(
                merged.status,
                merged.head,
                merged.request_time,
                merged.response_time,
                rules,
            ) {
                Refresh::Update
            } else {
                Refresh::Remove
            }
        }
        Err(_) => Refresh::Remove,
    }
}

// ---------------------------------------------------------------------
// Using a stored response

/// Why a stale response may be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StaleWhy {
    /// The request's max-stale allows it (RFC 9111 §5.2.1.2).
    MaxStale,
    /// RFC 5861 §3: serve it and refresh it in the background.
    WhileRevalidate,
}

/// Why a stored response must be validated before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValidateWhy {
    /// The request said no-cache (§5.2.1.4) or Pragma: no-cache (§5.4).
    RequestNoCache,
    /// Fresh, but older than the request's max-age (§5.2.1.1) or not
    /// fresh enough for its min-fresh (§5.2.1.3).
    RequestFreshness,
    /// The response said no-cache (§5.2.2.4).
    ResponseNoCache,
    /// Stale, and must-revalidate / proxy-revalidate / s-maxage forbid
    /// stale use (§5.2.2.2, §5.2.2.8, §5.2.2.10).
    MustRevalidate,
    /// Stale, nothing allows serving it so (§4.2.4).
    Stale,
}

impl ValidateWhy {
    /// The request itself caused the forward (`Cache-Status:
    /// fwd=request`, RFC 9211 §2.2) rather than staleness (`fwd=stale`).
    pub(crate) fn by_request(self) -> bool {
        matches!(
            self,
            ValidateWhy::RequestNoCache | ValidateWhy::RequestFreshness
        )
    }
}

/// What to do with a stored response for a request (RFC 9111 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// Fresh: served as is (§4.2).
    Fresh { age: Duration, ttl: Duration },
    /// Stale but servable (§4.2.4 with max-stale or RFC 5861).
    Stale { age: Duration, why: StaleWhy },
    /// Forwarded with its validators (§4.3.1).
    Validate { age: Duration, why: ValidateWhy },
    /// only-if-cached and nothing servable: 504 (§5.2.1.7).
    GatewayTimeout,
}

/// RFC 9111 §4 for a stored response (its [`Freshness`]) and a request's
/// directives at `now`: no-cache (request §5.2.1.4, Pragma §5.4,
/// response §5.2.2.4) always validates; a fresh response is served
/// unless the request's max-age or min-fresh refuse it; a stale one is
/// served when the request's max-stale (§5.2.1.2) or the response's or
/// route's stale-while-revalidate (RFC 5861 §3, not when the request
/// asks for validation by max-age) allow it and must-revalidate,
/// proxy-revalidate or s-maxage do not forbid it (§4.2.4, §5.2.2.2);
/// otherwise validation, or 504 for only-if-cached (§5.2.1.7).
pub(crate) fn decide(f: &Freshness, req: &RequestDirectives, now: SystemTime) -> Use {
    let age = f.age(now);
    let validate = |why| {
        if req.only_if_cached {
            Use::GatewayTimeout
        } else {
            Use::Validate { age, why }
        }
    };
    if req.no_cache {
        return validate(ValidateWhy::RequestNoCache);
    }
    if f.revalidate == Revalidate::Always {
        return validate(ValidateWhy::ResponseNoCache);
    }
    let within_max_age = req.max_age.is_none_or(|m| age <= secs(m));
    if age < f.lifetime {
        let ttl = f.lifetime - age;
        let fresh_enough = req.min_fresh.is_none_or(|m| ttl >= secs(m));
        if within_max_age && fresh_enough {
            return Use::Fresh { age, ttl };
        }
        return validate(ValidateWhy::RequestFreshness);
    }
    let staleness = age - f.lifetime;
    if f.revalidate == Revalidate::OnceStale {
        return validate(ValidateWhy::MustRevalidate);
    }
    if !within_max_age {
        // §5.2.1.1: max-age bounds the age even of a stale response the
        // client would otherwise accept.
        return validate(ValidateWhy::RequestFreshness);
    }
    let max_stale = match req.max_stale {
        Some(MaxStale::Any) => true,
        Some(MaxStale::Secs(n)) => staleness <= secs(n),
        None => false,
    };
    if max_stale {
        return Use::Stale {
            age,
            why: StaleWhy::MaxStale,
        };
    }
    if staleness < f.stale_while_revalidate && req.max_age.is_none() && req.min_fresh.is_none() {
        return Use::Stale {
            age,
            why: StaleWhy::WhileRevalidate,
        };
    }
    validate(ValidateWhy::Stale)
}

/// RFC 5861 §4: whether the stored response may answer a request whose
/// validation failed (an error status 500, 502, 503 or 504, or no
/// response): within the response's (or route's) stale-if-error window,
/// or the request's own `stale-if-error` unless the response forbids
/// stale use. Never when the request said no-cache (it asked for a
/// validated response, §5.2.1.4).
pub(crate) fn stale_if_error(f: &Freshness, req: &RequestDirectives, now: SystemTime) -> bool {
    if req.no_cache {
        return false;
    }
    let staleness = f.age(now).saturating_sub(f.lifetime);
    let from_request = match (f.revalidate, req.stale_if_error) {
        (Revalidate::Normally, Some(n)) => secs(n),
        _ => Duration::ZERO,
    };
    let window = f.stale_if_error.max(from_request);
    !window.is_zero() && staleness <= window
}

/// RFC 5861 §4: the statuses of a failed validation that stale-if-error
/// covers.
pub(crate) fn is_error_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}

// ---------------------------------------------------------------------
// Vary (§4.1)

/// Request fields whose values are lists (RFC 9110 §5.6.1) of
/// case-insensitive tokens: normalised by trimming, collapsing OWS around
/// `,` `;` `=` and lowercasing.
const TOKEN_LISTS: [&str; 4] = ["accept-encoding", "accept-charset", "accept-language", "te"];
/// List fields whose members are compared with OWS normalised but case
/// kept (media-type parameters may be case-sensitive).
const LISTS: [&str; 1] = ["accept"];

/// The secondary key of a response stored for `req` (RFC 9111 §4.1):
/// for each field the response's `Vary` names (all lines, in order), the
/// request's value (all its lines combined, RFC 9110 §5.3), normalised
/// for list fields known to allow it (whitespace around commas; case for
/// token lists such as Accept-Encoding). An absent field differs from an
/// empty one. None: `Vary: *`, which no request matches. Without Vary:
/// empty (no allocation).
pub(crate) fn vary_key(response_head: &[u8], req: &RequestHead) -> Option<Vec<u8>> {
    let mut key = Vec::new();
    for value in fields(response_head, "vary") {
        for name in value.split(|&b| b == b',') {
            let name = stoa_h1::trim(name);
            if name.is_empty() {
                continue;
            }
            if name == b"*" {
                return None;
            }
            key.extend(name.iter().map(u8::to_ascii_lowercase));
            key.push(0);
            request_value(req, name, &mut key);
        }
    }
    Some(key)
}

/// Whether a response stored with secondary key `stored` (from
/// [`vary_key`]) may answer `req` (§4.1).
pub(crate) fn vary_matches(response_head: &[u8], stored: &[u8], req: &RequestHead) -> bool {
    stored != OWN_REQUEST_ONLY && vary_key(response_head, req).is_some_and(|k| k == stored)
}

/// Appends `0` when `req` lacks field `name`, else `1`, the normalised
/// value's length (4 bytes) and the value.
fn request_value(req: &RequestHead, name: &[u8], out: &mut Vec<u8>) {
    let is = |set: &[&str]| set.iter().any(|f| name.eq_ignore_ascii_case(f.as_bytes()));
    let token_list = is(&TOKEN_LISTS);
    let list = token_list || is(&LISTS);
    let mut v = Vec::new();
    let mut any = false;
    for (_, value) in req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
        if any {
            v.push(b',');
        }
        v.extend_from_slice(value);
        any = true;
    }
    if !any {
        out.push(0);
        return;
    }
    let v = if list {
        normalise_list(&v, token_list)
    } else {
        stoa_h1::trim(&v).to_vec()
    };
    out.push(1);
    let n = u32::try_from(v.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&v[..n as usize]);
}

/// A list value with OWS removed around `,` `;` `=` outside quoted
/// strings, empty members dropped (RFC 9110 §5.6.1), members joined by
/// `,`; lowercased outside quotes when `lower`.
fn normalise_list(v: &[u8], lower: bool) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(v.len());
    let mut quoted = false;
    let mut escape = false;
    let mut pending_space = false;
    for &b in v {
        if quoted {
            out.push(b);
            if escape {
                escape = false;
            } else if b == b'\\' {
                escape = true;
            } else if b == b'"' {
                quoted = false;
            }
            continue;
        }
        match b {
            b' ' | b'\t' => pending_space = true,
            b',' | b';' | b'=' => {
                pending_space = false;
                if b == b',' {
                    // Drop empty members: no `,` at the start or twice.
                    if !out.is_empty() && out.last() != Some(&b',') {
                        out.push(b',');
                    }
                } else {
                    out.push(b);
                }
            }
            _ => {
                if pending_space
                    && !out.is_empty()
                    && !matches!(out.last(), Some(b',' | b';' | b'='))
                {
                    out.push(b' ');
                }
                pending_space = false;
                if b == b'"' {
                    quoted = true;
                }
                out.push(if lower { b.to_ascii_lowercase() } else { b });
            }
        }
    }
    if out.last() == Some(&b',') {
        out.pop();
    }
    out
}

// ---------------------------------------------------------------------
// Validation (§4.3)

/// The conditional fields of a validation request (RFC 9111 §4.3.1):
/// `If-None-Match` with the entity tags of the stored responses (all the
/// variants one may select among), `If-Modified-Since` with the first's
/// Last-Modified (an origin that has If-None-Match ignores it, RFC 9110
/// §13.1.3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ValidationFields {
    pub(crate) if_none_match: Option<Vec<u8>>,
    pub(crate) if_modified_since: Option<Vec<u8>>,
}

/// [`ValidationFields`] from the stored heads.
pub(crate) fn validation_fields(stored: &[&[u8]]) -> ValidationFields {
    let mut inm: Vec<u8> = Vec::new();
    for head in stored {
        for etag in fields(head, "etag") {
            if etag.is_empty() || inm.windows(etag.len()).any(|w| w == etag) {
                continue;
            }
            if !inm.is_empty() {
                inm.extend_from_slice(b", ");
            }
            inm.extend_from_slice(etag);
        }
    }
    let ims = stored
        .first()
        .and_then(|h| field(h, "last-modified"))
        .filter(|v| http_date(v).is_some())
        .map(<[u8]>::to_vec);
    ValidationFields {
        if_none_match: (!inm.is_empty()).then_some(inm),
        if_modified_since: ims,
    }
}

/// Fields a 304 never changes in the stored response (RFC 9111 §3.2:
/// Content-Length, and the fields processed or framing-specific, §3.1:
/// the connection's and those describing the stored body's encoding).
const NOT_UPDATED: [&str; 11] = [
    "content-length",
    "content-encoding",
    "content-range",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "proxy-authenticate",
];

/// RFC 9111 §4.3.4: the stored header block with every field the 304
/// carries replacing all the stored lines of that name, but for the
/// fields of [`NOT_UPDATED`] and those the 304's Connection names; the
/// other stored fields kept, in order, the new ones after.
pub(crate) fn merge_304(stored: &[u8], new: &[u8]) -> Vec<u8> {
    let connection: Vec<&[u8]> = fields(new, "connection")
        .flat_map(|v| v.split(|&b| b == b','))
        .map(stoa_h1::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let updates = |n: &[u8]| {
        !NOT_UPDATED
            .iter()
            .any(|k| n.eq_ignore_ascii_case(k.as_bytes()))
            && !connection.iter().any(|k| n.eq_ignore_ascii_case(k))
    };
    let new_lines: Vec<(&[u8], &[u8])> = lines(new)
        .filter(|(n, _)| !n.is_empty() && updates(n))
        .collect();
    let mut out = Vec::with_capacity(stored.len() + new.len());
    for (n, v) in lines(stored) {
        if n.is_empty() || new_lines.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)) {
            continue;
        }
        push_line(&mut out, n, v);
    }
    for (n, v) in new_lines {
        push_line(&mut out, n, v);
    }
    out
}

fn push_line(out: &mut Vec<u8>, n: &[u8], v: &[u8]) {
    out.extend_from_slice(n);
    out.extend_from_slice(b": ");
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
}

// ---------------------------------------------------------------------
// Invalidation (§4.4)

/// RFC 9111 §4.4: a response with a non-error status (2xx, 3xx) to an
/// unsafe method (RFC 9110 §9.2.1: all but GET, HEAD, OPTIONS, TRACE;
/// methods of unknown safety count as unsafe) invalidates the target
/// URI.
pub(crate) fn invalidates(method: &Method, status: u16) -> bool {
    let safe = matches!(
        method,
        Method::Get | Method::Head | Method::Options | Method::Trace
    );
    !safe && (200..400).contains(&status)
}

/// The URLs (as `key::url` writes them) a response to an unsafe request
/// for `target` (`scheme://host/path?query`) invalidates (§4.4): the
/// target, and the `Location` and `Content-Location` URI references
/// resolved against it (RFC 3986 §5) when their origin is the target's
/// (a cache MUST NOT invalidate across origins).
pub(crate) fn invalidation_urls(target: &str, response_head: &[u8]) -> Vec<String> {
    let mut out = vec![target.to_owned()];
    for name in ["location", "content-location"] {
        let Some(v) = field(response_head, name) else {
            continue;
        };
        let Ok(v) = std::str::from_utf8(v) else {
            continue;
        };
        if let Some(u) = resolve(target, v) {
            if same_origin(target, &u) && !out.contains(&u) {
                out.push(u);
            }
        }
    }
    out
}

/// (scheme, authority, path+query) of an absolute URL.
fn split_url(u: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = u.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some((scheme, &rest[..end], &rest[end..]))
}

fn same_origin(a: &str, b: &str) -> bool {
    match (split_url(a), split_url(b)) {
        (Some((sa, ha, _)), Some((sb, hb, _))) => sa == sb && ha == hb,
        _ => false,
    }
}

/// `r` resolved against the absolute URL `base` (RFC 3986 §5.2), the
/// fragment dropped, the result's host normalised like the key's. None:
/// not a usable reference.
fn resolve(base: &str, r: &str) -> Option<String> {
    let r = r.trim();
    let r = r.split('#').next().unwrap_or("");
    if r.is_empty() || r.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return None;
    }
    let (bscheme, bauth, bpath) = split_url(base)?;
    let is_scheme = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    };
    let (scheme, auth, path_query) =
        if let Some((s, rest)) = r.split_once("://").filter(|(s, _)| is_scheme(s)) {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            (
                s.to_ascii_lowercase(),
                rest[..end].to_owned(),
                rest[end..].to_owned(),
            )
        } else if let Some(rest) = r.strip_prefix("//") {
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            (
                bscheme.to_owned(),
                rest[..end].to_owned(),
                rest[end..].to_owned(),
            )
        } else if r
            .split_once(':')
            .is_some_and(|(s, _)| is_scheme(s) && !s.contains('/'))
        {
            // Another scheme without an authority (mailto:...): not ours.
            return None;
        } else if r.starts_with('/') {
            (bscheme.to_owned(), bauth.to_owned(), r.to_owned())
        } else {
            let bp = bpath.split('?').next().unwrap_or("");
            let pq = if let Some(q) = r.strip_prefix('?') {
                format!("{bp}?{q}")
            } else {
                let dir = &bp[..bp.rfind('/').map_or(0, |i| i + 1)];
                let dir = if dir.is_empty() { "/" } else { dir };
                format!("{dir}{r}")
            };
            (bscheme.to_owned(), bauth.to_owned(), pq)
        };
    let (path, query) = match path_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_query.as_str(), None),
    };
    let mut host = Vec::new();
    crate::cache::key::normal_host(auth.as_bytes(), &scheme, &mut host);
    let host = String::from_utf8(host).ok()?;
    let mut u = format!("{scheme}://{host}{}", remove_dot_segments(path));
    if let Some(q) = query {
        u.push('?');
        u.push_str(q);
    }
    Some(u)
}

/// RFC 3986 §5.2.4, on an absolute or empty path; the result starts
/// with `/`.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let n = segments.len();
    for (i, s) in segments.iter().enumerate() {
        let last = i + 1 == n;
        match *s {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

// ---------------------------------------------------------------------
// Delivery

/// Fields for this cache only, never sent to clients: the surrogate
/// controls and tags, and a stored `Age` (replaced by the computed one).
const CACHE_ONLY: [&str; 5] = [
    "surrogate-control",
    "surrogate-key",
    "x-accel-expires",
    "age",
    // The application's Date is kept for §4.2.3 (apparent age) and
    // Expires; every response Stoa sends has its own Date already.
    "date",
];

/// The stored head as clients get it (borrowed when nothing is to be
/// removed: the usual case costs no allocation): Surrogate-Control,
/// Surrogate-Key, X-Accel-Expires and Age removed; nothing else changed.
/// The caller adds `Age:` with the current age (RFC 9111 §5.1: a cache
/// sends one) in whole seconds.
pub(crate) fn client_head(stored: &[u8]) -> Cow<'_, [u8]> {
    let strip = |n: &[u8]| {
        CACHE_ONLY
            .iter()
            .any(|k| n.eq_ignore_ascii_case(k.as_bytes()))
    };
    if !lines(stored).any(|(n, _)| strip(n)) {
        return Cow::Borrowed(stored);
    }
    let mut out = Vec::with_capacity(stored.len());
    for l in stored.split_inclusive(|&b| b == b'\n') {
        let name_end = l.iter().position(|&b| b == b':');
        if name_end.is_some_and(|c| strip(&l[..c])) {
            continue;
        }
        out.extend_from_slice(l);
    }
    Cow::Owned(out)
}

/// The `Age` value for an age (RFC 9111 §5.1: delta-seconds, at most
/// 2^31).
pub(crate) fn age_secs(age: Duration) -> u64 {
    age.as_secs().min(DELTA_MAX)
}

/// The response's tags from `Surrogate-Key` (space-separated, every
/// line; Fastly/Varnish xkey), for purge by tag.
pub(crate) fn tags(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    fields(head, "surrogate-key")
        .flat_map(|v| v.split(|&b| b == b' ' || b == b'\t'))
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_h1::Version;

    fn req(h: &[(&str, &str)]) -> RequestHead {
        req_m(Method::Get, h)
    }

    fn req_m(m: Method, h: &[(&str, &str)]) -> RequestHead {
        RequestHead::from_parts(
            m,
            b"/p?q=1",
            Version::Http11,
            h.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        )
    }

    /// A header block from lines.
    fn head(lines: &[&str]) -> Vec<u8> {
        let mut h = Vec::new();
        for l in lines {
            h.extend_from_slice(l.as_bytes());
            h.extend_from_slice(b"\r\n");
        }
        h
    }

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + secs(1_700_000_000 + s)
    }

    fn date(s: u64) -> String {
        httpdate::fmt_http_date(t(s))
    }

    fn received(status: u16, h: &[u8]) -> Received<'_> {
        Received {
            status,
            head: h,
            request_time: t(0),
            response_time: t(0),
        }
    }

    fn store(r: &RequestHead, status: u16, h: &[u8]) -> Result<Storable, NotStorable> {
        may_store(r, &received(status, h), &Rules::default())
    }

    fn lifetime(status: u16, h: &[u8]) -> Option<u64> {
        freshness_lifetime(status, h, t(0), Duration::ZERO).map(|l| l.lifetime.as_secs())
    }

    fn fresh_for(h: &[u8]) -> Freshness {
        freshness(&received(200, h), &Rules::default())
    }

    // --- directive lists

    #[test]
    fn directives_split_on_commas_outside_quoted_strings_rfc9111_5_2() {
        let d: Vec<_> = directives(br#"no-cache="Set-Cookie, X-A", max-age=5,, private"#).collect();
        assert_eq!(
            d,
            [
                (&b"no-cache"[..], Some(&b"Set-Cookie, X-A"[..])),
                (b"max-age", Some(b"5")),
                (b"private", None),
            ]
        );
    }

    #[test]
    fn directives_survive_unclosed_quotes_escapes_and_garbage() {
        let d: Vec<_> = directives(br#"a="x\"y, b=1", c = 2 junk, =3, "#).collect();
        assert_eq!(
            d,
            [(&b"a"[..], Some(&br#"x\"y, b=1"#[..])), (b"c", Some(b"2")),]
        );
        let d: Vec<_> = directives(br#"a="unclosed, b"#).collect();
        assert_eq!(d, [(&b"a"[..], Some(&b"unclosed, b"[..]))]);
        let d: Vec<_> = directives(br#"a="\"#).collect();
        assert_eq!(d.len(), 1);
        assert_eq!(directives(b",,, ,").count(), 0);
    }

    #[test]
    fn delta_seconds_saturate_at_2_31_and_reject_signs_rfc9111_1_2_2() {
        assert_eq!(delta_seconds(b"60"), Some(60));
        assert_eq!(
            delta_seconds(b"99999999999999999999999999"),
            Some(DELTA_MAX)
        );
        assert_eq!(delta_seconds(b"2147483649"), Some(DELTA_MAX));
        assert_eq!(delta_seconds(b"-1"), None);
        assert_eq!(delta_seconds(b"+1"), None);
        assert_eq!(delta_seconds(b" 1"), None);
        assert_eq!(delta_seconds(b""), None);
        assert_eq!(delta_seconds(b"1.5"), None);
    }

    // --- request directives

    #[test]
    fn request_directives_are_read_from_every_cache_control_line_rfc9111_5_2_1() {
        let d = request_directives(&req(&[
            ("Cache-Control", "max-age=10, min-fresh=3"),
            ("cache-control", "max-stale=7, only-if-cached, no-store"),
        ]));
        assert_eq!(d.max_age, Some(10));
        assert_eq!(d.min_fresh, Some(3));
        assert_eq!(d.max_stale, Some(MaxStale::Secs(7)));
        assert!(d.only_if_cached && d.no_store && !d.no_cache);
    }

    #[test]
    fn max_stale_without_a_value_accepts_any_staleness_rfc9111_5_2_1_2() {
        let d = request_directives(&req(&[("Cache-Control", "max-stale")]));
        assert_eq!(d.max_stale, Some(MaxStale::Any));
        let d = request_directives(&req(&[("Cache-Control", "max-stale=\"30\"")]));
        assert_eq!(d.max_stale, Some(MaxStale::Secs(30)));
        let d = request_directives(&req(&[("Cache-Control", "max-stale=abc")]));
        assert_eq!(d.max_stale, None, "an invalid value accepts nothing stale");
    }

    #[test]
    fn an_invalid_request_max_age_reads_as_zero_and_the_first_duplicate_wins() {
        let d = request_directives(&req(&[("Cache-Control", "max-age=-5")]));
        assert_eq!(d.max_age, Some(0));
        let d = request_directives(&req(&[("Cache-Control", "max-age=5, max-age=100")]));
        assert_eq!(d.max_age, Some(5));
    }

    #[test]
    fn pragma_no_cache_counts_only_without_cache_control_rfc9111_5_4() {
        assert!(request_directives(&req(&[("Pragma", "no-cache")])).no_cache);
        let d = request_directives(&req(&[
            ("Pragma", "no-cache"),
            ("Cache-Control", "max-age=5"),
        ]));
        assert!(!d.no_cache);
        assert!(!request_directives(&req(&[("Pragma", "x-other")])).no_cache);
    }

    #[test]
    fn request_directive_names_are_case_insensitive_rfc9111_5_2() {
        let d = request_directives(&req(&[("CACHE-CONTROL", "No-Cache, ONLY-IF-CACHED")]));
        assert!(d.no_cache && d.only_if_cached);
    }

    // --- storing (§3)

    #[test]
    fn a_200_with_max_age_is_stored_with_that_lifetime_rfc9111_3() {
        let h = head(&["Cache-Control: max-age=60"]);
        let s = store(&req(&[]), 200, &h).expect("storable");
        assert_eq!(s.freshness.lifetime, secs(60));
        assert_eq!(s.freshness.source, Source::MaxAge);
    }

    #[test]
    fn only_get_responses_are_stored_rfc9111_3() {
        let h = head(&["Cache-Control: max-age=60"]);
        for m in [Method::Head, Method::Post, Method::Other("PURGE".into())] {
            assert_eq!(store(&req_m(m, &[]), 200, &h), Err(NotStorable::Method));
        }
    }

    #[test]
    fn interim_and_unrecognised_statuses_are_never_stored_rfc9110_15() {
        let h = head(&["Cache-Control: max-age=60"]);
        for s in [100, 101, 199, 299, 599, 999, 0] {
            assert_eq!(store(&req(&[]), s, &h), Err(NotStorable::Status), "{s}");
        }
    }

    #[test]
    fn partial_content_is_not_stored_because_fetches_ask_for_whole_representations_rfc9111_3_3() {
        let h = head(&["Cache-Control: max-age=60", "Content-Range: bytes 0-1/10"]);
        assert_eq!(store(&req(&[]), 206, &h), Err(NotStorable::Partial));
        assert_eq!(store(&req(&[]), 304, &h), Err(NotStorable::NotModified));
    }

    #[test]
    fn no_store_in_the_response_or_the_request_prevents_storing_rfc9111_5_2_2_5_and_5_2_1_5() {
        let h = head(&["Cache-Control: max-age=60, no-store"]);
        assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::NoStore));
        let h = head(&["Cache-Control: max-age=60"]);
        let r = req(&[("Cache-Control", "no-store")]);
        assert_eq!(store(&r, 200, &h), Err(NotStorable::RequestNoStore));
    }

    #[test]
    fn must_understand_with_an_understood_status_overrides_no_store_rfc9111_5_2_2_3() {
        let h = head(&["Cache-Control: must-understand, no-store, max-age=60"]);
        assert!(store(&req(&[]), 200, &h).is_ok());
        assert_eq!(store(&req(&[]), 299, &h), Err(NotStorable::Status));
    }

    #[test]
    fn private_qualified_or_not_is_never_stored_by_a_shared_cache_rfc9111_5_2_2_7() {
        for cc in [
            "private",
            "private=\"Set-Cookie\"",
            "PRIVATE, max-age=60",
            "public, private",
        ] {
            let h = head(&[&format!("Cache-Control: {cc}"), "Cache-Control: max-age=60"]);
            assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::Private), "{cc}");
        }
    }

    #[test]
    fn authorization_prevents_storing_unless_public_s_maxage_or_must_revalidate_rfc9111_3_5() {
        let r = req(&[("Authorization", "Basic eDp5")]);
        let h = head(&["Cache-Control: max-age=60"]);
        assert_eq!(store(&r, 200, &h), Err(NotStorable::Authorization));
        for cc in [
            "public, max-age=60",
            "s-maxage=60",
            "must-revalidate, max-age=60",
        ] {
            let h = head(&[&format!("Cache-Control: {cc}")]);
            assert!(store(&r, 200, &h).is_ok(), "{cc}");
        }
        let h = head(&["Surrogate-Control: max-age=60"]);
        assert_eq!(
            store(&r, 200, &h),
            Err(NotStorable::Authorization),
            "a lifetime override is not a permission to share"
        );
    }

    #[test]
    fn set_cookie_is_never_stored_as_nginx_and_varnish_do() {
        let h = head(&["Cache-Control: public, max-age=60", "Set-Cookie: a=b"]);
        assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::SetCookie));
        let h = head(&["X-Accel-Expires: 60", "set-cookie: a=b"]);
        assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::SetCookie));
    }

    #[test]
    fn x_accel_expires_zero_is_not_stored_as_nginx_does() {
        let h = head(&["Cache-Control: max-age=60", "X-Accel-Expires: 0"]);
        assert_eq!(
            store(&req(&[]), 200, &h),
            Err(NotStorable::XAccelExpiresZero)
        );
    }

    #[test]
    fn x_accel_expires_sets_the_lifetime_for_the_cache_only_as_nginx_does() {
        let h = head(&["Cache-Control: max-age=5", "X-Accel-Expires: 300"]);
        let s = store(&req(&[]), 200, &h).expect("storable");
        assert_eq!(
            (s.freshness.lifetime, s.freshness.source),
            (secs(300), Source::XAccelExpires)
        );
        // `@T`: an absolute Unix time, from the response's Date.
        let d = date(0);
        let at = format!("X-Accel-Expires: @{}", 1_700_000_000 + 90);
        let h = head(&[&format!("Date: {d}"), &at]);
        assert_eq!(lifetime(200, &h), Some(90));
        let h = head(&[&format!("Date: {d}"), "X-Accel-Expires: @5"]);
        assert_eq!(lifetime(200, &h), Some(0), "a time in the past: stale");
        // Invalid: ignored (nginx), the next rule applies.
        let h = head(&["X-Accel-Expires: soon", "Cache-Control: max-age=7"]);
        assert_eq!(lifetime(200, &h), Some(7));
        let h = head(&["X-Accel-Expires: @99999999999999999999999"]);
        assert!(
            lifetime(200, &h).is_some(),
            "a huge absolute time saturates"
        );
    }

    #[test]
    fn surrogate_control_max_age_overrides_cache_control_for_the_cache_only() {
        let h = head(&["Cache-Control: max-age=5", "Surrogate-Control: max-age=600"]);
        assert_eq!(lifetime(200, &h), Some(600));
        let h = head(&[
            "Cache-Control: no-cache",
            "Surrogate-Control: max-age=60+30",
        ]);
        assert_eq!(lifetime(200, &h), Some(60));
        let h = head(&["Surrogate-Control: content=\"ESI/1.0\", max-age=20;edge"]);
        assert_eq!(lifetime(200, &h), Some(20));
        let h = head(&["Surrogate-Control: no-store", "Cache-Control: max-age=60"]);
        assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::NoStore));
    }

    #[test]
    fn a_zero_surrogate_control_max_age_is_not_stored_like_x_accel_expires_zero() {
        let h = head(&["Cache-Control: max-age=600", "Surrogate-Control: max-age=0"]);
        assert_eq!(
            store(&req(&[]), 200, &h),
            Err(NotStorable::SurrogateControlZero)
        );
        // Even with validators: the application said "not here".
        let h = head(&["Surrogate-Control: max-age=0", "ETag: \"a\""]);
        assert_eq!(
            store(&req(&[]), 200, &h),
            Err(NotStorable::SurrogateControlZero)
        );
        // X-Accel-Expires comes first (nginx's field wins) and sets a
        // lifetime: stored.
        let h = head(&["Surrogate-Control: max-age=0", "X-Accel-Expires: 30"]);
        let s = store(&req(&[]), 200, &h).expect("stored");
        assert_eq!(s.freshness.lifetime, secs(30));
        assert_eq!(s.freshness.source, Source::XAccelExpires);
    }

    #[test]
    fn requests_with_authorization_start_no_background_refresh_rfc9111_3_5() {
        assert!(collapsible(&req(&[("Cookie", "a=b")])));
        assert!(!collapsible(&req(&[("Authorization", "Basic dTpw")])));
        assert!(!collapsible(&req(&[("authorization", "")])));
    }

    #[test]
    fn a_response_to_authorization_that_may_not_be_stored_is_for_its_request_only_rfc9111_3_5() {
        let auth = req(&[("Authorization", "Basic dTpw"), ("Accept", "a/b")]);
        let h = head(&["Cache-Control: max-age=60", "Vary: Accept"]);
        let f = fetched(&auth, &received(200, &h), &Rules::default());
        assert_eq!(f.store, Err(NotStorable::Authorization));
        assert_eq!(f.variant, OWN_REQUEST_ONLY);
        assert!(!f.hit_for_miss, "the next request may be anonymous");
        // No request matches it, not even its own or one with the same
        // credentials.
        assert!(!vary_matches(&h, &f.variant, &auth));
        assert!(!vary_matches(b"", &f.variant, &req(&[])));
        // `public` lets it be stored and shared (§3.5).
        let h = head(&["Cache-Control: public, max-age=60", "Vary: Accept"]);
        let f = fetched(&auth, &received(200, &h), &Rules::default());
        assert!(f.store.is_ok());
        assert!(vary_matches(&h, &f.variant, &req(&[("Accept", "a/b")])));
    }

    #[test]
    fn a_304_updates_the_stored_response_unless_the_request_or_the_304_forbid_it_rfc9111_4_3_4() {
        let merged = |lines: &[&str]| head(lines);
        let ok = merged(&["Cache-Control: max-age=60", "ETag: \"a\""]);
        let rules = Rules::default();
        assert_eq!(
            refresh(&req(&[]), &received(200, &ok), &rules),
            Refresh::Update
        );
        // §5.2.1.5: nothing of a response to a no-store request is
        // stored, and the object, another request's, stays as it was.
        let r = req(&[("Cache-Control", "no-cache, no-store")]);
        assert_eq!(refresh(&r, &received(200, &ok), &rules), Refresh::Keep);
        // §3.5: the validator matched, so the stored representation is
        // confirmed for everyone; unless the merged fields forbid it.
        let auth = req(&[("Authorization", "Basic dTpw")]);
        assert_eq!(refresh(&auth, &received(200, &ok), &rules), Refresh::Update);
        let useless = merged(&["Cache-Control: max-age=0"]);
        assert_eq!(
            refresh(&auth, &received(200, &useless), &rules),
            Refresh::Remove
        );
        // The 304 brought private or Set-Cookie: no longer storable.
        for lines in [
            &["Cache-Control: private, max-age=60"][..],
            &["Cache-Control: max-age=60", "Set-Cookie: a=b"][..],
        ] {
            let h = merged(lines);
            assert_eq!(
                refresh(&req(&[]), &received(200, &h), &rules),
                Refresh::Remove
            );
        }
    }

    #[test]
    fn only_the_responses_own_refusals_leave_a_hit_for_miss_mark() {
        let ok = head(&["Cache-Control: max-age=60"]);
        let f = fetched(&req(&[]), &received(200, &ok), &Rules::default());
        assert!(f.store.is_ok() && !f.hit_for_miss && f.variant.is_empty());
        // §5.2.1.5: the request's no-store is its own business.
        let r = req(&[("Cache-Control", "no-store")]);
        let f = fetched(&r, &received(200, &ok), &Rules::default());
        assert_eq!(f.store, Err(NotStorable::RequestNoStore));
        assert!(!f.hit_for_miss);
        assert!(NotStorable::RequestNoStore.by_request());
        // The response's: Set-Cookie, private, Vary: * (§4.1).
        for (lines, why) in [
            (
                &["Cache-Control: max-age=60", "Set-Cookie: a=b"][..],
                NotStorable::SetCookie,
            ),
            (&["Cache-Control: private"][..], NotStorable::Private),
            (
                &["Cache-Control: max-age=60", "Vary: *"][..],
                NotStorable::VaryAny,
            ),
        ] {
            let h = head(lines);
            let f = fetched(&req(&[]), &received(200, &h), &Rules::default());
            assert_eq!(f.store, Err(why));
            assert!(f.hit_for_miss, "{why:?}");
        }
        // An error passes (RFC 5861 §4 needs the fill; the next may work).
        let h = head(&["Cache-Control: no-store"]);
        let f = fetched(&req(&[]), &received(503, &h), &Rules::default());
        assert!(f.store.is_err() && !f.hit_for_miss);
    }

    #[test]
    fn waiters_share_only_responses_any_request_may_store_rfc9111_3() {
        let shared = |lines: &[&str]| {
            let h = head(lines);
            shareable(200, &h, t(0), t(0), &Rules::default())
        };
        assert!(shared(&["Cache-Control: max-age=60"]));
        assert!(shared(&["Cache-Control: max-age=0", "ETag: \"v\""]));
        assert!(!shared(&["Cache-Control: max-age=60", "Set-Cookie: s=1"]));
        assert!(!shared(&["Cache-Control: private, max-age=60"]));
        assert!(!shared(&["Cache-Control: no-store"]));
        assert!(!shared(&["Cache-Control: max-age=0"]));
        // The response time is the argument, not the clock: an Expires
        // without Date counts from it.
        let h = head(&[&format!("Expires: {}", date(60))]);
        assert!(shareable(200, &h, t(0), t(0), &Rules::default()));
        assert!(!shareable(200, &h, t(0), t(120), &Rules::default()));
    }

    #[test]
    fn a_lifetime_override_does_not_lift_no_store_or_private() {
        let h = head(&["Cache-Control: no-store", "X-Accel-Expires: 60"]);
        assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::NoStore));
        let h = head(&["Cache-Control: private", "Surrogate-Control: max-age=60"]);
        assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::Private));
    }

    #[test]
    fn heuristically_cacheable_statuses_are_stored_without_explicit_freshness_rfc9111_4_2_2() {
        let d = date(0);
        let lm = date(0).replace("2023", "2022");
        let h = head(&[&format!("Date: {d}"), &format!("Last-Modified: {lm}")]);
        for s in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
            assert!(store(&req(&[]), s, &h).is_ok(), "{s}");
        }
        for s in [201, 302, 303, 307, 400, 403, 500, 502, 503] {
            assert_eq!(
                store(&req(&[]), s, &h),
                Err(NotStorable::NoFreshness),
                "{s}"
            );
        }
    }

    #[test]
    fn public_allows_a_non_heuristic_status_to_be_stored_rfc9111_3() {
        let h = head(&["Cache-Control: public", "ETag: \"a\""]);
        assert!(store(&req(&[]), 302, &h).is_ok());
    }

    #[test]
    fn explicit_freshness_allows_any_understood_status_rfc9111_3() {
        let h = head(&["Cache-Control: max-age=30"]);
        for s in [302, 307, 500, 503] {
            assert!(store(&req(&[]), s, &h).is_ok(), "{s}");
        }
        let h = head(&[
            &format!("Expires: {}", date(30)),
            &format!("Date: {}", date(0)),
        ]);
        assert!(store(&req(&[]), 302, &h).is_ok());
    }

    #[test]
    fn a_response_never_fresh_without_validators_or_stale_windows_is_not_worth_storing() {
        let h = head(&["Cache-Control: max-age=0"]);
        assert_eq!(store(&req(&[]), 200, &h), Err(NotStorable::Useless));
        let h = head(&["Cache-Control: max-age=0", "ETag: \"x\""]);
        assert!(store(&req(&[]), 200, &h).is_ok());
        let h = head(&["Cache-Control: max-age=0, stale-if-error=60"]);
        assert!(store(&req(&[]), 200, &h).is_ok());
        let h = head(&[]);
        assert_eq!(
            store(&req(&[]), 200, &h),
            Err(NotStorable::Useless),
            "no Last-Modified"
        );
    }

    #[test]
    fn the_default_ttl_applies_only_without_explicit_freshness() {
        let rules = Rules {
            default_ttl: secs(120),
            ..Rules::default()
        };
        let h = head(&[]);
        let s = may_store(&req(&[]), &received(200, &h), &rules).expect("storable");
        assert_eq!(
            (s.freshness.lifetime, s.freshness.source),
            (secs(120), Source::Default)
        );
        let h = head(&["Cache-Control: max-age=5"]);
        let s = may_store(&req(&[]), &received(200, &h), &rules).expect("storable");
        assert_eq!(s.freshness.lifetime, secs(5));
        let h = head(&[]);
        assert_eq!(
            may_store(&req(&[]), &received(500, &h), &rules),
            Err(NotStorable::NoFreshness),
            "not for a status that is not heuristically cacheable"
        );
    }

    // --- freshness lifetime (§4.2.1)

    #[test]
    fn s_maxage_wins_over_max_age_for_a_shared_cache_rfc9111_4_2_1() {
        let h = head(&["Cache-Control: max-age=10, s-maxage=20"]);
        assert_eq!(lifetime(200, &h), Some(20));
    }

    #[test]
    fn max_age_wins_over_expires_rfc9111_5_3() {
        let h = head(&[
            &format!("Date: {}", date(0)),
            &format!("Expires: {}", date(500)),
            "Cache-Control: max-age=10",
        ]);
        assert_eq!(lifetime(200, &h), Some(10));
    }

    #[test]
    fn expires_minus_date_is_the_lifetime_rfc9111_4_2_1() {
        let h = head(&[
            &format!("Date: {}", date(0)),
            &format!("Expires: {}", date(500)),
        ]);
        assert_eq!(lifetime(200, &h), Some(500));
        // Without Date, the time of receipt stands for it.
        let h = head(&[&format!("Expires: {}", date(40))]);
        assert_eq!(lifetime(200, &h), Some(40));
        // The obsolete forms are dates too (RFC 9110 §5.6.7).
        let h = head(&[
            "Date: Sunday, 06-Nov-94 08:49:37 GMT",
            "Expires: Sun Nov  6 08:50:37 1994",
        ]);
        assert_eq!(lifetime(200, &h), Some(60));
    }

    #[test]
    fn an_invalid_expires_such_as_zero_means_already_expired_rfc9111_5_3() {
        for e in ["0", "-1", "tomorrow", "", "Thu, 99 Foo 2024 00:00:00 GMT"] {
            let h = head(&[&format!("Expires: {e}")]);
            assert_eq!(lifetime(200, &h), Some(0), "{e:?}");
        }
        let h = head(&[
            &format!("Date: {}", date(100)),
            &format!("Expires: {}", date(0)),
        ]);
        assert_eq!(lifetime(200, &h), Some(0), "an Expires before Date");
    }

    #[test]
    fn conflicting_duplicate_freshness_directives_make_the_response_stale_rfc9111_4_2_1() {
        assert_eq!(
            lifetime(200, &head(&["Cache-Control: max-age=10, max-age=20"])),
            Some(0)
        );
        assert_eq!(
            lifetime(
                200,
                &head(&["Cache-Control: max-age=10", "Cache-Control: max-age=10"])
            ),
            Some(10),
            "the same value twice is no conflict"
        );
        let h = head(&[
            &format!("Expires: {}", date(10)),
            &format!("Expires: {}", date(20)),
        ]);
        assert_eq!(lifetime(200, &h), Some(0));
        assert_eq!(
            lifetime(200, &head(&["Cache-Control: max-age=soon"])),
            Some(0)
        );
        assert_eq!(
            lifetime(200, &head(&["Cache-Control: max-age=-1"])),
            Some(0)
        );
    }

    #[test]
    fn a_huge_max_age_saturates_at_2_31_seconds_rfc9111_1_2_2() {
        let h = head(&["Cache-Control: max-age=999999999999999999999999999"]);
        assert_eq!(lifetime(200, &h), Some(DELTA_MAX));
    }

    #[test]
    fn the_heuristic_is_a_tenth_of_the_time_since_last_modified_rfc9111_4_2_2() {
        let h = head(&[
            &format!("Date: {}", date(1000)),
            &format!("Last-Modified: {}", date(0)),
        ]);
        let l = freshness_lifetime(200, &h, t(1000), Duration::ZERO).expect("heuristic");
        assert_eq!((l.lifetime, l.source), (secs(100), Source::Heuristic));
    }

    #[test]
    fn the_heuristic_is_capped_at_one_day() {
        let h = head(&[
            &format!("Date: {}", date(0)),
            "Last-Modified: Thu, 01 Jan 2004 00:00:00 GMT",
        ]);
        assert_eq!(lifetime(200, &h), Some(86_400));
    }

    #[test]
    fn no_heuristic_for_a_status_that_does_not_allow_it_rfc9111_4_2_2() {
        let h = head(&[
            &format!("Date: {}", date(1000)),
            &format!("Last-Modified: {}", date(0)),
        ]);
        assert_eq!(lifetime(302, &h), None);
        assert_eq!(lifetime(500, &h), None);
        let h = head(&[
            "Cache-Control: public",
            &format!("Date: {}", date(1000)),
            &format!("Last-Modified: {}", date(0)),
        ]);
        assert_eq!(lifetime(302, &h), Some(100), "public allows it");
    }

    #[test]
    fn a_last_modified_in_the_future_gives_no_heuristic_lifetime() {
        let h = head(&[
            &format!("Date: {}", date(0)),
            &format!("Last-Modified: {}", date(1000)),
        ]);
        assert_eq!(lifetime(200, &h), Some(0));
    }

    // --- age (§4.2.3)

    #[test]
    fn age_is_the_time_resident_plus_the_response_delay_rfc9111_4_2_3() {
        let h = head(&[]);
        assert_eq!(current_age(&h, t(0), t(2), t(12)), secs(12));
    }

    #[test]
    fn an_age_field_is_added_to_the_response_delay_rfc9111_4_2_3() {
        let h = head(&["Age: 30", &format!("Date: {}", date(2))]);
        assert_eq!(current_age(&h, t(0), t(2), t(12)), secs(30 + 2 + 10));
    }

    #[test]
    fn the_apparent_age_from_date_counts_when_larger_rfc9111_4_2_3() {
        let h = head(&[&format!("Date: {}", date(0))]);
        assert_eq!(current_age(&h, t(99), t(100), t(100)), secs(100));
        // A Date in the future gives no negative age.
        let h = head(&[&format!("Date: {}", date(500))]);
        assert_eq!(current_age(&h, t(100), t(100), t(105)), secs(5));
    }

    #[test]
    fn an_invalid_age_is_ignored_and_a_list_uses_its_first_member_rfc9111_5_1() {
        assert_eq!(current_age(&head(&["Age: -3"]), t(0), t(0), t(1)), secs(1));
        assert_eq!(current_age(&head(&["Age: abc"]), t(0), t(0), t(1)), secs(1));
        assert_eq!(
            current_age(&head(&["Age: 5, 9"]), t(0), t(0), t(1)),
            secs(6)
        );
        let huge = current_age(&head(&["Age: 99999999999999999999"]), t(0), t(0), t(1));
        assert_eq!(huge, secs(DELTA_MAX + 1));
    }

    #[test]
    fn a_clock_going_backwards_gives_no_negative_age() {
        assert_eq!(current_age(&head(&[]), t(10), t(5), t(0)), Duration::ZERO);
    }

    #[test]
    fn freshness_ttl_is_negative_once_stale_rfc9211_2_4() {
        let f = fresh_for(&head(&["Cache-Control: max-age=10"]));
        assert_eq!(f.ttl(t(4)), 6);
        assert_eq!(f.ttl(t(15)), -5);
    }

    // --- decide (§4)

    fn rd(h: &[(&str, &str)]) -> RequestDirectives {
        request_directives(&req(h))
    }

    #[test]
    fn a_fresh_response_is_served_with_its_remaining_lifetime_rfc9111_4_2() {
        let f = fresh_for(&head(&["Cache-Control: max-age=60"]));
        assert_eq!(
            decide(&f, &rd(&[]), t(10)),
            Use::Fresh {
                age: secs(10),
                ttl: secs(50)
            }
        );
    }

    #[test]
    fn a_response_whose_age_equals_its_lifetime_is_stale_rfc9111_4_2() {
        let f = fresh_for(&head(&["Cache-Control: max-age=60", "ETag: \"a\""]));
        assert_eq!(
            decide(&f, &rd(&[]), t(60)),
            Use::Validate {
                age: secs(60),
                why: ValidateWhy::Stale
            }
        );
    }

    #[test]
    fn request_no_cache_and_pragma_always_validate_rfc9111_5_2_1_4_and_5_4() {
        let f = fresh_for(&head(&["Cache-Control: max-age=60"]));
        let want = Use::Validate {
            age: secs(1),
            why: ValidateWhy::RequestNoCache,
        };
        assert_eq!(
            decide(&f, &rd(&[("Cache-Control", "no-cache")]), t(1)),
            want
        );
        assert_eq!(decide(&f, &rd(&[("Pragma", "no-cache")]), t(1)), want);
        assert!(ValidateWhy::RequestNoCache.by_request());
    }

    #[test]
    fn response_no_cache_validates_even_when_fresh_rfc9111_5_2_2_4() {
        for cc in ["no-cache, max-age=60", "no-cache=\"X-Foo\", max-age=60"] {
            let f = fresh_for(&head(&[&format!("Cache-Control: {cc}"), "ETag: \"a\""]));
            assert_eq!(
                decide(&f, &rd(&[("Cache-Control", "max-stale")]), t(1)),
                Use::Validate {
                    age: secs(1),
                    why: ValidateWhy::ResponseNoCache
                },
                "{cc}"
            );
        }
    }

    #[test]
    fn request_max_age_refuses_an_older_fresh_response_rfc9111_5_2_1_1() {
        let f = fresh_for(&head(&["Cache-Control: max-age=60"]));
        assert_eq!(
            decide(&f, &rd(&[("Cache-Control", "max-age=5")]), t(10)),
            Use::Validate {
                age: secs(10),
                why: ValidateWhy::RequestFreshness
            }
        );
        assert!(matches!(
            decide(&f, &rd(&[("Cache-Control", "max-age=10")]), t(10)),
            Use::Fresh { .. }
        ));
        assert!(
            matches!(
                decide(&f, &rd(&[("Cache-Control", "max-age=0")]), t(0)),
                Use::Fresh { .. }
            ),
            "age 0 is not older than max-age=0"
        );
    }

    #[test]
    fn request_min_fresh_refuses_a_response_about_to_expire_rfc9111_5_2_1_3() {
        let f = fresh_for(&head(&["Cache-Control: max-age=60"]));
        assert_eq!(
            decide(&f, &rd(&[("Cache-Control", "min-fresh=30")]), t(40)),
            Use::Validate {
                age: secs(40),
                why: ValidateWhy::RequestFreshness
            }
        );
        assert!(matches!(
            decide(&f, &rd(&[("Cache-Control", "min-fresh=20")]), t(40)),
            Use::Fresh { .. }
        ));
    }

    #[test]
    fn max_stale_serves_a_stale_response_within_its_bound_rfc9111_5_2_1_2() {
        let f = fresh_for(&head(&["Cache-Control: max-age=10"]));
        let s = rd(&[("Cache-Control", "max-stale=5")]);
        assert_eq!(
            decide(&f, &s, t(15)),
            Use::Stale {
                age: secs(15),
                why: StaleWhy::MaxStale
            }
        );
        assert!(matches!(decide(&f, &s, t(16)), Use::Validate { .. }));
        let any = rd(&[("Cache-Control", "max-stale")]);
        assert!(matches!(decide(&f, &any, t(1_000_000)), Use::Stale { .. }));
    }

    #[test]
    fn must_revalidate_proxy_revalidate_and_s_maxage_forbid_stale_use_rfc9111_5_2_2_2_8_10() {
        for cc in [
            "max-age=10, must-revalidate",
            "max-age=10, proxy-revalidate",
            "s-maxage=10",
        ] {
            let f = fresh_for(&head(&[
                &format!("Cache-Control: {cc}, stale-while-revalidate=60"),
                "ETag: \"e\"",
            ]));
            assert!(
                matches!(decide(&f, &rd(&[]), t(5)), Use::Fresh { .. }),
                "{cc}"
            );
            assert_eq!(
                decide(&f, &rd(&[("Cache-Control", "max-stale")]), t(11)),
                Use::Validate {
                    age: secs(11),
                    why: ValidateWhy::MustRevalidate
                },
                "{cc}"
            );
        }
    }

    #[test]
    fn stale_while_revalidate_serves_stale_within_its_window_rfc5861_3() {
        let f = fresh_for(&head(&[
            "Cache-Control: max-age=10, stale-while-revalidate=30",
        ]));
        assert_eq!(
            decide(&f, &rd(&[]), t(39)),
            Use::Stale {
                age: secs(39),
                why: StaleWhy::WhileRevalidate
            }
        );
        assert!(matches!(
            decide(&f, &rd(&[]), t(40)),
            Use::Validate {
                why: ValidateWhy::Stale,
                ..
            }
        ));
    }

    #[test]
    fn the_routes_stale_while_revalidate_applies_when_the_response_gives_none_rfc9111_4_2_4() {
        let rules = Rules {
            stale_while_revalidate: secs(30),
            ..Rules::default()
        };
        let h = head(&["Cache-Control: max-age=10"]);
        let f = freshness(&received(200, &h), &rules);
        assert!(matches!(
            decide(&f, &rd(&[]), t(20)),
            Use::Stale {
                why: StaleWhy::WhileRevalidate,
                ..
            }
        ));
        let h = head(&["Cache-Control: max-age=10, stale-while-revalidate=5"]);
        let f = freshness(&received(200, &h), &rules);
        assert!(
            matches!(decide(&f, &rd(&[]), t(20)), Use::Validate { .. }),
            "the response's own wins"
        );
        let h = head(&["Cache-Control: max-age=10, must-revalidate"]);
        let f = freshness(&received(200, &h), &rules);
        assert!(
            matches!(decide(&f, &rd(&[]), t(20)), Use::Validate { .. }),
            "never over must-revalidate"
        );
    }

    #[test]
    fn a_request_asking_for_fresher_content_gets_no_stale_while_revalidate() {
        let f = fresh_for(&head(&[
            "Cache-Control: max-age=10, stale-while-revalidate=30",
        ]));
        assert!(matches!(
            decide(&f, &rd(&[("Cache-Control", "max-age=60")]), t(15)),
            Use::Validate { .. }
        ));
        assert!(
            matches!(
                decide(&f, &rd(&[("Cache-Control", "max-age=5, max-stale")]), t(15)),
                Use::Validate {
                    why: ValidateWhy::RequestFreshness,
                    ..
                }
            ),
            "max-age still bounds a max-stale answer"
        );
    }

    #[test]
    fn only_if_cached_without_a_servable_response_is_504_rfc9111_5_2_1_7() {
        let f = fresh_for(&head(&["Cache-Control: max-age=10"]));
        let oic = rd(&[("Cache-Control", "only-if-cached")]);
        assert!(matches!(decide(&f, &oic, t(1)), Use::Fresh { .. }));
        assert_eq!(decide(&f, &oic, t(11)), Use::GatewayTimeout);
        let both = rd(&[("Cache-Control", "only-if-cached, max-stale")]);
        assert!(matches!(decide(&f, &both, t(11)), Use::Stale { .. }));
        let nc = rd(&[("Cache-Control", "only-if-cached, no-cache")]);
        assert_eq!(decide(&f, &nc, t(1)), Use::GatewayTimeout);
    }

    #[test]
    fn stale_if_error_serves_within_its_window_when_validation_fails_rfc5861_4() {
        let f = fresh_for(&head(&["Cache-Control: max-age=10, stale-if-error=60"]));
        assert!(stale_if_error(&f, &rd(&[]), t(70)));
        assert!(!stale_if_error(&f, &rd(&[]), t(71)));
        assert!(!stale_if_error(
            &f,
            &rd(&[("Cache-Control", "no-cache")]),
            t(20)
        ));
        let none = fresh_for(&head(&["Cache-Control: max-age=10"]));
        assert!(!stale_if_error(&none, &rd(&[]), t(11)));
        assert!(
            stale_if_error(&none, &rd(&[("Cache-Control", "stale-if-error=5")]), t(15)),
            "the request's own"
        );
        assert!(is_error_status(503) && !is_error_status(404));
    }

    #[test]
    fn the_responses_stale_if_error_applies_regardless_of_must_revalidate_rfc5861_4() {
        let f = fresh_for(&head(&[
            "Cache-Control: max-age=10, must-revalidate, stale-if-error=60",
        ]));
        assert!(stale_if_error(&f, &rd(&[]), t(30)));
        let rules = Rules {
            stale_if_error: secs(60),
            ..Rules::default()
        };
        let h = head(&["Cache-Control: max-age=10, must-revalidate"]);
        let f = freshness(&received(200, &h), &rules);
        assert!(
            !stale_if_error(&f, &rd(&[]), t(30)),
            "not the route's default"
        );
        assert!(
            !stale_if_error(&f, &rd(&[("Cache-Control", "stale-if-error=60")]), t(30)),
            "nor the request's"
        );
    }

    // --- Vary (§4.1)

    #[test]
    fn no_vary_gives_an_empty_secondary_key_rfc9111_4_1() {
        assert_eq!(
            vary_key(&head(&[]), &req(&[("Accept-Encoding", "gzip")])),
            Some(vec![])
        );
    }

    #[test]
    fn vary_star_never_matches_rfc9111_4_1() {
        let h = head(&["Vary: Accept-Encoding, *"]);
        assert_eq!(vary_key(&h, &req(&[])), None);
        assert!(!vary_matches(&h, b"", &req(&[])));
    }

    #[test]
    fn vary_matches_the_same_values_only_rfc9111_4_1() {
        let h = head(&["Vary: Accept-Encoding", "Vary: X-Device"]);
        let a = req(&[("Accept-Encoding", "gzip"), ("X-Device", "mobile")]);
        let k = vary_key(&h, &a).expect("key");
        assert!(vary_matches(&h, &k, &a));
        assert!(!vary_matches(
            &h,
            &k,
            &req(&[("Accept-Encoding", "br"), ("X-Device", "mobile")])
        ));
        assert!(
            !vary_matches(
                &h,
                &k,
                &req(&[("Accept-Encoding", "gzip"), ("X-Device", "Mobile")])
            ),
            "X-Device is case-sensitive"
        );
    }

    #[test]
    fn an_absent_field_matches_only_an_absent_field_rfc9111_4_1() {
        let h = head(&["Vary: X-Device"]);
        let absent = vary_key(&h, &req(&[])).expect("key");
        let empty = vary_key(&h, &req(&[("X-Device", "")])).expect("key");
        assert_ne!(absent, empty);
    }

    #[test]
    fn vary_normalises_whitespace_lines_and_case_of_token_lists_rfc9111_4_1() {
        let h = head(&["vary: accept-encoding"]);
        let k = vary_key(&h, &req(&[("Accept-Encoding", "gzip, br")])).expect("key");
        for v in [
            &[("Accept-Encoding", "gzip,br")][..],
            &[("accept-encoding", " GZIP ,  BR ")],
            &[("Accept-Encoding", "gzip"), ("Accept-Encoding", "br")],
            &[("Accept-Encoding", "gzip,, br,")],
        ] {
            assert!(vary_matches(&h, &k, &req(v)), "{v:?}");
        }
        assert!(
            !vary_matches(&h, &k, &req(&[("Accept-Encoding", "br, gzip")])),
            "order is kept"
        );
        let h = head(&["Vary: Accept-Encoding"]);
        let k = vary_key(&h, &req(&[("Accept-Encoding", "gzip;q=1.0, br")])).expect("key");
        assert!(vary_matches(
            &h,
            &k,
            &req(&[("Accept-Encoding", "gzip ; q=1.0,br")])
        ));
    }

    #[test]
    fn vary_keeps_quoted_strings_and_the_case_of_other_fields() {
        let h = head(&["Vary: Accept"]);
        let k = vary_key(&h, &req(&[("Accept", "text/html;a=\"X, Y\"")])).expect("key");
        assert!(!vary_matches(
            &h,
            &k,
            &req(&[("Accept", "text/html;a=\"X,Y\"")])
        ));
        assert!(!vary_matches(
            &h,
            &k,
            &req(&[("Accept", "text/html;a=\"x, y\"")])
        ));
        let h = head(&["Vary: Cookie"]);
        let k = vary_key(&h, &req(&[("Cookie", "a=1,b")])).expect("key");
        assert!(
            !vary_matches(&h, &k, &req(&[("Cookie", "a=1, b")])),
            "not a list field: not normalised"
        );
    }

    #[test]
    fn vary_keys_cannot_be_confused_by_values_that_look_like_separators() {
        let h = head(&["Vary: A, B"]);
        let k1 = vary_key(&h, &req(&[("A", "x\u{0}b\u{0}")])).expect("key");
        let k2 = vary_key(&h, &req(&[("A", "x")])).expect("key");
        assert_ne!(k1, k2);
    }

    // --- validation (§4.3)

    #[test]
    fn validation_sends_the_stored_etags_and_last_modified_rfc9111_4_3_1() {
        let lm = date(0);
        let a = head(&["ETag: \"a\"", &format!("Last-Modified: {lm}")]);
        let b = head(&["ETag: W/\"b\""]);
        let c = head(&["ETag: \"a\""]);
        let v = validation_fields(&[&a, &b, &c]);
        assert_eq!(v.if_none_match.as_deref(), Some(&b"\"a\", W/\"b\""[..]));
        assert_eq!(v.if_modified_since.as_deref(), Some(lm.as_bytes()));
        let v = validation_fields(&[&head(&["Last-Modified: yesterday"])]);
        assert_eq!(
            v,
            ValidationFields::default(),
            "an invalid date is not sent"
        );
    }

    #[test]
    fn a_304_updates_stored_fields_but_not_content_length_or_framing_rfc9111_4_3_4_and_3_2() {
        let stored = head(&[
            "Content-Type: text/html",
            "Content-Length: 10",
            "ETag: \"a\"",
            "Cache-Control: max-age=5",
            "X-Keep: 1",
            "Set-Thing: a",
            "Set-Thing: b",
        ]);
        let new = head(&[
            "Cache-Control: max-age=60",
            "Content-Length: 0",
            "Transfer-Encoding: chunked",
            "Date: x",
            "Set-Thing: c",
            "Connection: X-Hop",
            "X-Hop: 1",
        ]);
        let m = merge_304(&stored, &new);
        assert_eq!(
            String::from_utf8(m).expect("utf-8"),
            "Content-Type: text/html\r\nContent-Length: 10\r\nETag: \"a\"\r\nX-Keep: 1\r\nCache-Control: max-age=60\r\nDate: x\r\nSet-Thing: c\r\n"
        );
    }

    #[test]
    fn a_merged_304_makes_the_stored_response_fresh_again_rfc9111_4_3_4() {
        let stored = head(&[
            "Cache-Control: max-age=10",
            "ETag: \"a\"",
            "Content-Length: 3",
        ]);
        let f = fresh_for(&stored);
        assert!(matches!(decide(&f, &rd(&[]), t(20)), Use::Validate { .. }));
        let merged = merge_304(
            &stored,
            &head(&["Cache-Control: max-age=60", "ETag: \"a\""]),
        );
        let res = Received {
            status: 200,
            head: &merged,
            request_time: t(20),
            response_time: t(21),
        };
        let s = may_store(&req(&[]), &res, &Rules::default()).expect("still storable");
        assert_eq!(
            decide(&s.freshness, &rd(&[]), t(31)),
            Use::Fresh {
                age: secs(11),
                ttl: secs(49)
            }
        );
    }

    #[test]
    fn an_age_from_upstream_shortens_the_freshness_left_rfc9111_4_2_3() {
        let f = fresh_for(&head(&["Cache-Control: max-age=60", "Age: 50"]));
        assert_eq!(
            decide(&f, &rd(&[]), t(5)),
            Use::Fresh {
                age: secs(55),
                ttl: secs(5)
            }
        );
    }

    // --- invalidation (§4.4)

    #[test]
    fn unsafe_methods_with_non_error_status_invalidate_rfc9111_4_4() {
        for m in [
            Method::Post,
            Method::Put,
            Method::Delete,
            Method::Patch,
            Method::Other("FOO".into()),
        ] {
            assert!(invalidates(&m, 200) && invalidates(&m, 303), "{m:?}");
            assert!(!invalidates(&m, 404) && !invalidates(&m, 500) && !invalidates(&m, 100));
        }
        for m in [Method::Get, Method::Head, Method::Options, Method::Trace] {
            assert!(!invalidates(&m, 200), "{m:?}");
        }
    }

    #[test]
    fn location_and_content_location_are_invalidated_only_on_the_same_origin_rfc9111_4_4() {
        let h = head(&[
            "Location: /a/../b?x=1#frag",
            "Content-Location: https://other.example/c",
        ]);
        assert_eq!(
            invalidation_urls("http://ex.com/p/q", &h),
            ["http://ex.com/p/q", "http://ex.com/b?x=1"]
        );
        let h = head(&["Location: HTTP://EX.com:80/z", "Content-Location: c"]);
        assert_eq!(
            invalidation_urls("http://ex.com/p/q?s", &h),
            [
                "http://ex.com/p/q?s",
                "http://ex.com/z",
                "http://ex.com/p/c"
            ]
        );
        let h = head(&[
            "Location: https://ex.com/z",
            "Content-Location: //ex.com:8080/y",
        ]);
        assert_eq!(
            invalidation_urls("http://ex.com/p", &h),
            ["http://ex.com/p"],
            "another scheme or port is another origin"
        );
        let h = head(&["Location: mailto:a@b", "Content-Location: ?q=2"]);
        assert_eq!(
            invalidation_urls("http://ex.com/p?q=1", &h),
            ["http://ex.com/p?q=1", "http://ex.com/p?q=2"]
        );
        let h = head(&["Location: /x y", "Content-Location: ../../.."]);
        assert_eq!(
            invalidation_urls("http://ex.com/p", &h),
            ["http://ex.com/p", "http://ex.com/"]
        );
    }

    // --- delivery

    #[test]
    fn clients_get_the_stored_head_without_the_surrogate_fields_and_stored_age() {
        let h = head(&[
            "Content-Type: a",
            "Surrogate-Control: max-age=5",
            "surrogate-key: x y",
            "X-Accel-Expires: 5",
            "Age: 3",
            "X-Other: b",
        ]);
        assert_eq!(&*client_head(&h), b"Content-Type: a\r\nX-Other: b\r\n");
        let plain = head(&["Content-Type: a", "X-Agent: z"]);
        assert!(
            matches!(client_head(&plain), Cow::Borrowed(_)),
            "nothing to strip: no copy"
        );
        assert_eq!(age_secs(secs(u64::MAX)), DELTA_MAX);
    }

    #[test]
    fn surrogate_key_tags_are_space_separated_on_every_line() {
        let h = head(&[
            "Surrogate-Key: a  b\tc",
            "Surrogate-Key: d",
            "Surrogate-Keys: no",
        ]);
        let t: Vec<&[u8]> = tags(&h).collect();
        assert_eq!(t, [&b"a"[..], b"b", b"c", b"d"]);
    }

    #[test]
    fn hostile_header_blocks_never_panic() {
        let junk: [&[u8]; 8] = [
            b"",
            b":\r\n",
            b"Cache-Control\r\n",
            b"Cache-Control: =\"\\",
            b"Cache-Control: max-age=\"",
            b"Vary: ,,,\r\nExpires:\r\nAge: \xff\r\n",
            b"Date: \xff\xfe\r\nLast-Modified: \x00\r\n",
            b"X-Accel-Expires: @\r\nSurrogate-Control: max-age=+;\r\n",
        ];
        let r = req(&[("Cache-Control", "max-stale=\""), ("Accept-Encoding", "\"")]);
        for h in junk {
            let _ = store(&r, 200, h);
            let _ = freshness_lifetime(200, h, t(0), secs(1));
            let f = freshness(&received(200, h), &Rules::default());
            let _ = decide(&f, &request_directives(&r), t(5));
            let _ = vary_key(h, &r);
            let _ = merge_304(h, h);
            let _ = client_head(h);
            let _ = validation_fields(&[h]);
            let _ = invalidation_urls("http://a/b", h);
            let _ = current_age(h, t(0), t(0), SystemTime::UNIX_EPOCH);
            let _ = tags(h).count();
        }
        let _ = f_at_extremes();
    }

    #[test]
    fn random_bytes_in_every_input_never_panic() {
        // A fixed xorshift stream: the same cases every run.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        const ALPHABET: &[u8] = b"\",=;:@+*- \t\r\n0123456789aAzZ\xff\x00";
        const NAMES: [&str; 12] = [
            "Cache-Control",
            "Expires",
            "Date",
            "Age",
            "Last-Modified",
            "Vary",
            "ETag",
            "Surrogate-Control",
            "X-Accel-Expires",
            "Surrogate-Key",
            "Location",
            "Accept-Encoding",
        ];
        for _ in 0..2000 {
            let mut h = Vec::new();
            for _ in 0..(next() % 5) {
                h.extend_from_slice(NAMES[(next() % 12) as usize].as_bytes());
                h.extend_from_slice(b": ");
                for _ in 0..(next() % 24) {
                    h.push(ALPHABET[(next() % ALPHABET.len() as u64) as usize]);
                }
                h.extend_from_slice(b"\r\n");
            }
            let v = String::from_utf8_lossy(&h).replace(['\r', '\n'], "");
            let r = req(&[("Cache-Control", &v), ("Accept-Encoding", &v), ("Vary", &v)]);
            let status = (next() % 700) as u16;
            let rules = Rules {
                default_ttl: secs(next() % 3),
                ..Rules::default()
            };
            let res = Received {
                status,
                head: &h,
                request_time: t(next() % 9),
                response_time: t(next() % 9),
            };
            let _ = may_store(&r, &res, &rules);
            let f = freshness(&res, &rules);
            let now = t(next() % 100);
            let _ = decide(&f, &request_directives(&r), now);
            let _ = stale_if_error(&f, &request_directives(&r), now);
            let _ = f.ttl(now);
            let _ = vary_key(&h, &r).map(|k| vary_matches(&h, &k, &r));
            let _ = merge_304(&h, &h);
            let _ = client_head(&h);
            let _ = invalidation_urls("http://a/b/c?d", &h);
            let _ = tags(&h).count();
        }
    }

    fn f_at_extremes() -> Use {
        let h = head(&["Cache-Control: max-age=99999999999, stale-while-revalidate=99999999999"]);
        let f = freshness(&received(200, &h), &Rules::default());
        let far = UNIX_EPOCH + Duration::from_secs(u64::MAX / 4);
        let _ = f.ttl(far);
        decide(
            &f,
            &rd(&[(
                "Cache-Control",
                "max-stale=99999999999999, min-fresh=999999999999",
            )]),
            far,
        )
    }
}
