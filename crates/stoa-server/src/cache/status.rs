//! The `Cache-Status` response field (RFC 9211) and the access log's
//! `$upstream_cache_status` (nginx's values).
//!
//! API:
//! - [`CacheStatus`]: one cache's entry, built with [`CacheStatus::hit`]
//!   or [`CacheStatus::fwd`] and the `with_*`/[`CacheStatus::stored`]/
//!   [`CacheStatus::collapsed`] setters; [`CacheStatus::write`] puts the
//!   field value into a caller's stack buffer ([`StatusBuf`]) with no
//!   allocation: `Stoa; hit; ttl=12`, `Stoa; fwd=miss; stored`,
//!   `Stoa; fwd=stale; fwd-status=304`, `Stoa; fwd=uri-miss;
//!   detail=only-if-cached`, `Stoa; hit; fwd=stale;
//!   detail=stale-while-revalidate; collapsed`...
//! - [`Fwd`]: RFC 9211 §2.2's forward reasons.
//! - [`LogStatus`]: HIT, MISS, EXPIRED, STALE, UPDATING, REVALIDATED,
//!   BYPASS ([`LogStatus::as_str`]).

// Parts of this API land before the request path calls them (it moves
// onto them as the branches merge).

/// The cache's name in `Cache-Status` (RFC 9211 §2: an sf-token that
/// identifies this cache).
pub(crate) const NAME: &str = "Stoa";

/// The values that carry no number, written as they are (RFC 9211 §2.2
/// `fwd`, §2.8 `detail`): a bypass rule, a method the route does not
/// answer from the cache, an application response not stored, and
/// `only-if-cached` with nothing usable stored.
pub(crate) const FWD_BYPASS: &[u8] = b"Stoa; fwd=bypass";
pub(crate) const FWD_METHOD: &[u8] = b"Stoa; fwd=method";
pub(crate) const FWD_MISS_NOT_STORED: &[u8] = b"Stoa; fwd=miss";
pub(crate) const ONLY_IF_CACHED: &[u8] = b"Stoa; fwd=uri-miss; detail=only-if-cached";

/// Why the request went forward to the application (RFC 9211 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fwd {
    /// Something stored under the key, but no variant matches `Vary`.
    VaryMiss,
    /// Not found, the cache cannot tell which of the above.
    Miss,
    /// The request's own directives (`no-cache`, `max-age=0`) made the
    /// cache forward it.
    Request,
    /// The stored response was stale: validation.
    Stale,
}

impl Fwd {
    /// The parameter's token (RFC 9211 §2.2).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Fwd::VaryMiss => "vary-miss",
            Fwd::Miss => "miss",
            Fwd::Request => "request",
            Fwd::Stale => "stale",
        }
    }
}

/// One `Cache-Status` entry of this cache (RFC 9211 §2). `Copy` and free
/// of heap data: made and written on every response of a cached route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheStatus {
    hit: bool,
    fwd: Option<Fwd>,
    fwd_status: Option<u16>,
    ttl: Option<i64>,
    stored: bool,
    collapsed: bool,
    /// An sf-token (RFC 8941 §3.3.4): the callers pass constants such as
    /// `only-if-cached` or `stale-while-revalidate`.
    detail: Option<&'static str>,
}

/// Room for the longest value [`CacheStatus::write`] makes.
pub(crate) type StatusBuf = [u8; 160];

impl CacheStatus {
    /// A response served from the cache (RFC 9211 §2.1 `hit`) with its
    /// remaining freshness in seconds (§2.4 `ttl`, negative when stale).
    pub(crate) fn hit(ttl: i64) -> CacheStatus {
        CacheStatus {
            hit: true,
            fwd: None,
            fwd_status: None,
            ttl: Some(ttl),
            stored: false,
            collapsed: false,
            detail: None,
        }
    }

    /// A response from the application (RFC 9211 §2.2 `fwd`).
    pub(crate) fn fwd(fwd: Fwd) -> CacheStatus {
        CacheStatus {
            hit: false,
            fwd: Some(fwd),
            fwd_status: None,
            ttl: None,
            stored: false,
            collapsed: false,
            detail: None,
        }
    }

    /// Adds `fwd` to a hit (a stale hit served while revalidating:
    /// `hit; fwd=stale`).
    pub(crate) fn with_fwd(mut self, fwd: Fwd) -> CacheStatus {
        self.fwd = Some(fwd);
        self
    }

    /// The status the application answered the forwarded request with
    /// (§2.3 `fwd-status`, e.g. 304 on revalidation).
    pub(crate) fn with_fwd_status(mut self, status: u16) -> CacheStatus {
        self.fwd_status = Some(status);
        self
    }

    /// The response was stored (§2.5 `stored`).
    pub(crate) fn stored(mut self) -> CacheStatus {
        self.stored = true;
        self
    }

    /// The request was collapsed with another one (§2.6 `collapsed`).
    pub(crate) fn collapsed(mut self) -> CacheStatus {
        self.collapsed = true;
        self
    }

    /// Implementation-specific detail (§2.8), an sf-token.
    pub(crate) fn with_detail(mut self, detail: &'static str) -> CacheStatus {
        self.detail = Some(detail);
        self
    }

    /// The field value in `buf`: `Stoa` then the parameters in RFC
    /// 9211's order (hit, fwd, fwd-status, ttl, stored, collapsed,
    /// detail).
    pub(crate) fn write<'b>(&self, buf: &'b mut StatusBuf) -> &'b [u8] {
        let mut w = Writer { buf, len: 0 };
        w.put(NAME.as_bytes());
        if self.hit {
            w.put(b"; hit");
        }
        if let Some(f) = self.fwd {
            w.put(b"; fwd=");
            w.put(f.as_str().as_bytes());
        }
        if let Some(s) = self.fwd_status {
            w.put(b"; fwd-status=");
            w.num(i64::from(s));
        }
        if let Some(t) = self.ttl {
            w.put(b"; ttl=");
            w.num(t);
        }
        if self.stored {
            w.put(b"; stored");
        }
        if self.collapsed {
            w.put(b"; collapsed");
        }
        if let Some(d) = self.detail {
            w.put(b"; detail=");
            w.put(d.as_bytes());
        }
        let len = w.len;
        &buf[..len]
    }

    /// The value as an owned string (tests, logs).
    #[cfg(test)]
    pub(crate) fn to_string_lossy(self) -> String {
        let mut b = [0; 160];
        String::from_utf8_lossy(self.write(&mut b)).into_owned()
    }
}

/// Appends to a fixed buffer; what does not fit is cut (the longest
/// value is far below the buffer's size: a detail is a short constant).
struct Writer<'b> {
    buf: &'b mut StatusBuf,
    len: usize,
}

impl Writer<'_> {
    fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn num(&mut self, n: i64) {
        let mut d = [0u8; 20];
        let mut i = d.len();
        let mut m = n.unsigned_abs();
        loop {
            i -= 1;
            d[i] = b'0' + (m % 10) as u8;
            m /= 10;
            if m == 0 {
                break;
            }
        }
        if n < 0 {
            self.put(b"-");
        }
        self.put(&d[i..]);
    }
}

/// The access log's `$upstream_cache_status` (nginx's values): the
/// log's own type (a leaf), named here for the cache's code.
pub(crate) use crate::log::access::CacheStatus as LogStatus;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_hit_names_the_cache_hit_and_its_ttl_rfc9211_2_1_and_2_4() {
        assert_eq!(CacheStatus::hit(12).to_string_lossy(), "Stoa; hit; ttl=12");
    }

    #[test]
    fn a_stale_hit_has_a_negative_ttl_rfc9211_2_4() {
        let s = CacheStatus::hit(-5)
            .with_fwd(Fwd::Stale)
            .with_detail("stale-while-revalidate");
        assert_eq!(
            s.to_string_lossy(),
            "Stoa; hit; fwd=stale; ttl=-5; detail=stale-while-revalidate"
        );
    }

    #[test]
    fn a_stored_miss_says_fwd_miss_and_stored_rfc9211_2_2_and_2_5() {
        assert_eq!(
            CacheStatus::fwd(Fwd::Miss).stored().to_string_lossy(),
            "Stoa; fwd=miss; stored"
        );
        assert_eq!(
            CacheStatus::fwd(Fwd::Miss)
                .stored()
                .collapsed()
                .to_string_lossy(),
            "Stoa; fwd=miss; stored; collapsed"
        );
        assert_eq!(
            CacheStatus::fwd(Fwd::VaryMiss).to_string_lossy(),
            "Stoa; fwd=vary-miss"
        );
    }

    #[test]
    fn a_revalidation_carries_the_forwarded_status_rfc9211_2_3() {
        assert_eq!(
            CacheStatus::fwd(Fwd::Stale)
                .with_fwd_status(304)
                .to_string_lossy(),
            "Stoa; fwd=stale; fwd-status=304"
        );
    }

    #[test]
    fn every_forward_reason_is_rfc9211_2_2s_token() {
        let all = [
            (Fwd::VaryMiss, "vary-miss"),
            (Fwd::Miss, "miss"),
            (Fwd::Request, "request"),
            (Fwd::Stale, "stale"),
        ];
        for (f, s) in all {
            assert_eq!(
                CacheStatus::fwd(f).to_string_lossy(),
                format!("Stoa; fwd={s}")
            );
        }
    }

    #[test]
    fn extreme_ttls_are_written_whole() {
        assert_eq!(
            CacheStatus::hit(i64::MIN).to_string_lossy(),
            "Stoa; hit; ttl=-9223372036854775808"
        );
        assert_eq!(
            CacheStatus::hit(i64::MAX).to_string_lossy(),
            "Stoa; hit; ttl=9223372036854775807"
        );
    }

    #[test]
    fn log_values_are_nginxs_upstream_cache_status() {
        let v: Vec<&str> = [
            LogStatus::Hit,
            LogStatus::Miss,
            LogStatus::Expired,
            LogStatus::Stale,
            LogStatus::Updating,
            LogStatus::Revalidated,
            LogStatus::Bypass,
        ]
        .iter()
        .map(|s| s.as_str())
        .collect();
        assert_eq!(
            v,
            [
                "HIT",
                "MISS",
                "EXPIRED",
                "STALE",
                "UPDATING",
                "REVALIDATED",
                "BYPASS"
            ]
        );
    }
}
