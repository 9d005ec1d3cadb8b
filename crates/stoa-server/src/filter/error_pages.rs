//! `error_pages`: an error response replaced by the body of another URI,
//! fetched by an internal subrequest, with the original status kept
//! (nginx `error_page 404 /404.html`, Caddy `handle_errors`). A full URL
//! redirects instead (302, as nginx does for `error_page 404
//! https://...`).
//!
//! This module owns the key's table, its check into [`ErrorPages`] and the
//! lookup; routing runs the subrequest.

use std::collections::BTreeMap;

/// Where an error goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ErrorPage {
    /// A path (with its query) on this site, routed again as a GET.
    Local(Box<[u8]>),
    /// An absolute `http:`/`https:` URL: 302 to it.
    Redirect(Box<[u8]>),
}

/// `error_pages = { "404" = "/404.html", "5xx" = "/50x.html" }` and
/// `intercept_errors`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorPages {
    /// By exact status, sorted.
    exact: Box<[(u16, ErrorPage)]>,
    /// `4xx` and `5xx`.
    class: [Option<ErrorPage>; 2],
    /// Applications' responses with these statuses are replaced too
    /// (`intercept_errors`), not only the server's own.
    pub(crate) intercept: bool,
}

impl ErrorPages {
    /// Checks the table as written: keys a status from 400 to 599 or a
    /// class `4xx` / `5xx`, values a path beginning with `/` or an
    /// `http://` / `https://` URL. `None` for none (a route lifts its
    /// site's with `error_pages = {}`). `intercept`: `intercept_errors`,
    /// which needs pages to show.
    pub(crate) fn build(
        table: Option<&BTreeMap<String, String>>,
        intercept: bool,
    ) -> Result<Option<ErrorPages>, String> {
        let mut exact = Vec::new();
        let mut class: [Option<ErrorPage>; 2] = [None, None];
        for (key, to) in table.into_iter().flatten() {
            let page = target(to).map_err(|m| format!("\"{key}\": {m}"))?;
            let k = key.to_ascii_lowercase();
            match k.as_str() {
                "4xx" => class[0] = Some(page),
                "5xx" => class[1] = Some(page),
                _ => match k.parse::<u16>() {
                    Ok(s) if (400..600).contains(&s) => exact.push((s, page)),
                    _ => {
                        return Err(format!(
                            "`{key}` is not a status from 400 to 599 or a class \
                             (\"4xx\", \"5xx\")"
                        ))
                    }
                },
            }
        }
        if exact.is_empty() && class.iter().all(Option::is_none) {
            if intercept {
                return Err(
                    "intercept_errors replaces applications' errors with error_pages: there are \
                     none here"
                        .into(),
                );
            }
            return Ok(None);
        }
        exact.sort_by_key(|(s, _)| *s);
        Ok(Some(ErrorPages {
            exact: exact.into(),
            class,
            intercept,
        }))
    }

    /// The page for `status`: its own entry, else its class's.
    #[inline]
    pub(crate) fn page(&self, status: u16) -> Option<&ErrorPage> {
        if !(400..600).contains(&status) {
            return None;
        }
        self.exact
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, p)| p)
            .or(self.class[usize::from(status >= 500)].as_ref())
    }
}

/// A value of the table: a local path or a full URL, each a valid
/// request target (no spaces, no control characters, no fragment).
fn target(to: &str) -> Result<ErrorPage, String> {
    let visible = |b: u8| (0x21..=0x7e).contains(&b);
    if to.is_empty() || !to.bytes().all(visible) || to.contains('#') {
        return Err(format!(
            "`{to}` is not a path or URL (no spaces, control characters or fragment)"
        ));
    }
    if to.starts_with('/') && !to.starts_with("//") {
        return Ok(ErrorPage::Local(to.as_bytes().into()));
    }
    let lower = to.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') => {
            Ok(ErrorPage::Redirect(to.as_bytes().into()))
        }
        _ => Err(format!(
            "`{to}`: write a path on this site (\"/404.html\") or a full http(s) URL"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(pairs: &[(&str, &str)]) -> Result<Option<ErrorPages>, String> {
        let table = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ErrorPages::build(Some(&table), false)
    }

    fn local(p: &str) -> ErrorPage {
        ErrorPage::Local(p.as_bytes().into())
    }

    #[test]
    fn a_status_takes_its_own_page_before_its_class_as_nginx_error_page_lists() {
        let p = build(&[
            ("404", "/404.html"),
            ("5xx", "/50x.html"),
            ("503", "/busy.html?x=1"),
            ("4XX", "/4xx.html"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(p.page(404), Some(&local("/404.html")));
        assert_eq!(p.page(403), Some(&local("/4xx.html")));
        assert_eq!(p.page(503), Some(&local("/busy.html?x=1")));
        assert_eq!(p.page(502), Some(&local("/50x.html")));
        assert_eq!(p.page(200), None);
        assert_eq!(p.page(304), None);
        let only = build(&[("404", "/404.html")]).unwrap().unwrap();
        assert_eq!(only.page(500), None);
        assert_eq!(only.page(403), None);
    }

    #[test]
    fn a_full_url_redirects_and_anything_else_is_refused() {
        let p = build(&[("404", "https://example.com/missing")])
            .unwrap()
            .unwrap();
        assert_eq!(
            p.page(404),
            Some(&ErrorPage::Redirect(
                b"https://example.com/missing"[..].into()
            ))
        );
        for bad in [
            "",
            "404.html",
            "//evil.example/x",
            "/a b",
            "/a#frag",
            "/x\r\nLocation: y",
            "ftp://x/",
            "https://",
            "https:///x",
        ] {
            assert!(build(&[("404", bad)]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_are_statuses_from_400_to_599_or_their_classes() {
        for bad in ["200", "302", "600", "3xx", "x", "40", "-404"] {
            let e = build(&[(bad, "/e.html")]).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        assert_eq!(build(&[]), Ok(None));
        assert_eq!(ErrorPages::build(None, false), Ok(None));
        // Intercepting with nothing to show is a mistake.
        assert!(ErrorPages::build(None, true).is_err());
    }
}
