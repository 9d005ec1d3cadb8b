//! `redirect = { to = "https://$host$request_uri", status = 301 }`: a
//! route answered with a redirect built from a template (nginx `return
//! 301 URL`, Caddy `redir`), no file or application involved.

use super::template::{Template, Vars};
use crate::exchange::Exchange;
use serde::Deserialize;

/// `redirect = {...}` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RedirectRouteConfig {
    /// The `Location`: a template of `$scheme`, `$host`, `$http_host`,
    /// `$uri`, `$query` (`$args`), `$is_args`, `$request_uri` and, on a
    /// `regex` route, `$1`..`$9`.
    pub(crate) to: String,
    /// 301, 302 (default, as nginx and Caddy), 303, 307 or 308.
    pub(crate) status: Option<u16>,
}

/// A `redirect` route, validated.
#[derive(Debug)]
pub(crate) struct RedirectConfig {
    status: u16,
    to: Template,
    /// The route's regex, kept only when `to` reads its captures: they
    /// are taken again on the path at answer time, which costs nothing
    /// to routes that do not redirect.
    regex: Option<regex::Regex>,
}

impl RedirectConfig {
    /// `regex`: the route's, when it is a `regex` route.
    pub(crate) fn new(
        c: &RedirectRouteConfig,
        regex: Option<&regex::Regex>,
    ) -> Result<RedirectConfig, String> {
        let status = c.status.unwrap_or(302);
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            return Err(format!(
                "status {status}: a redirect is 301, 302, 303, 307 or 308 (`respond` sends other statuses)"
            ));
        }
        if c.to.is_empty() {
            return Err("`to` is empty".into());
        }
        let groups = regex.map_or(0, |r| r.captures_len() - 1);
        let to = Template::parse(&c.to, groups)?;
        let regex = if to.uses_captures() {
            regex.cloned()
        } else {
            None
        };
        Ok(RedirectConfig { status, to, regex })
    }
}

impl super::configure::Configure for RedirectRouteConfig {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        let cfg =
            RedirectConfig::new(self, cx.regex).map_err(super::configure::Fail::at("redirect"))?;
        Ok(super::Handler::Redirect(std::sync::Arc::new(cfg)))
    }
}

/// Answers with the redirect for the path `norm` routing chose by. A
/// `Location` that cannot be made (`$host` without a usable Host) is a
/// 400: the client's request is what lacks it.
pub(crate) fn serve(cfg: &RedirectConfig, ex: &mut Exchange<'_>, norm: &str) {
    let req = ex.req();
    let loc = cfg.to.expand(&Vars {
        scheme: ex.scheme(),
        host: req.host(),
        uri: norm,
        query: req.query(),
        request_uri: req.original_target(),
        captures: cfg.regex.as_ref().and_then(|re| re.captures(norm)),
        granted: &[],
        client_cert: None,
    });
    match loc {
        // The small HTML body says where, for clients that do not
        // follow (RFC 9110 §15.4: "SHOULD contain a short hypertext note").
        Some(loc) => ex.error(cfg.status, &[("Location", &loc)]),
        None => ex.error(400, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::{RedirectConfig, RedirectRouteConfig};

    fn cfg(to: &str, status: Option<u16>) -> RedirectRouteConfig {
        RedirectRouteConfig {
            to: to.into(),
            status,
        }
    }

    #[test]
    fn a_redirect_status_is_one_of_the_five_redirect_codes() {
        for s in [301, 302, 303, 307, 308] {
            assert!(
                RedirectConfig::new(&cfg("/x", Some(s)), None).is_ok(),
                "{s}"
            );
        }
        for s in [200, 300, 304, 305, 306, 404] {
            let e = RedirectConfig::new(&cfg("/x", Some(s)), None).unwrap_err();
            assert!(e.contains("301, 302, 303, 307 or 308"), "{s}: {e}");
        }
        assert_eq!(
            RedirectConfig::new(&cfg("/x", None), None).unwrap().status,
            302
        );
        assert!(RedirectConfig::new(&cfg("", None), None).is_err());
    }

    /// The regex is kept only for a template that reads captures.
    #[test]
    fn captures_need_the_routes_regex() {
        let re = regex::Regex::new(r"^/old/(.*)$").unwrap();
        let c = RedirectConfig::new(&cfg("/new/$1", Some(301)), Some(&re)).unwrap();
        assert!(c.regex.is_some());
        let c = RedirectConfig::new(&cfg("/new$uri", Some(301)), Some(&re)).unwrap();
        assert!(c.regex.is_none());
        let e = RedirectConfig::new(&cfg("/new/$1", Some(301)), None).unwrap_err();
        assert!(e.contains("regex"), "{e}");
    }
}
