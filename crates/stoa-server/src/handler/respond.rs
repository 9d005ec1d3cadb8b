//! `respond = { status = 404, body = "...", content_type = "text/plain" }`:
//! a fixed answer from the config (nginx `return 404 "text"`, Caddy
//! `respond`): no file is looked up, no application asked.

use crate::exchange::Exchange;
use bytes::Bytes;
use serde::Deserialize;

/// `respond = {...}` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RespondRouteConfig {
    /// 200 (default) to 599.
    pub(crate) status: Option<u16>,
    /// The body, sent as written. Without it a status of 400 or more gets
    /// the server's own small error page (as nginx `return 404;`), any
    /// other an empty body.
    pub(crate) body: Option<String>,
    /// The body's `Content-Type` (default `text/plain; charset=utf-8`).
    pub(crate) content_type: Option<String>,
}

/// A `respond` route, validated.
#[derive(Debug)]
pub(crate) struct RespondConfig {
    status: u16,
    /// None: the server's error page (400 and above) or nothing.
    body: Option<Bytes>,
    content_type: Vec<u8>,
}

impl RespondConfig {
    pub(crate) fn new(c: &RespondRouteConfig) -> Result<RespondConfig, String> {
        let status = c.status.unwrap_or(200);
        if !(200..=599).contains(&status) {
            return Err(format!("status {status}: a final status, 200 to 599"));
        }
        // RFC 9110 §15.3.5, §15.4.5: 204 and 304 end at their head.
        if matches!(status, 204 | 304) && c.body.as_ref().is_some_and(|b| !b.is_empty()) {
            return Err(format!("status {status} has no body (RFC 9110)"));
        }
        let content_type = c
            .content_type
            .as_deref()
            .unwrap_or("text/plain; charset=utf-8");
        if content_type.is_empty() || content_type.bytes().any(|b| b.is_ascii_control()) {
            return Err(format!(
                "content_type `{content_type}` is not a header value"
            ));
        }
        Ok(RespondConfig {
            status,
            body: c.body.clone().map(Bytes::from),
            content_type: content_type.as_bytes().to_vec(),
        })
    }
}

impl super::configure::Configure for RespondRouteConfig {
    fn configure(
        &self,
        _: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        let cfg = RespondConfig::new(self).map_err(super::configure::Fail::at("respond"))?;
        Ok(super::Handler::Respond(std::sync::Arc::new(cfg)))
    }
}

impl RespondConfig {
    /// The status it answers with.
    #[cfg(test)]
    pub(crate) fn status(&self) -> u16 {
        self.status
    }
}

/// Sends the configured answer.
pub(crate) fn serve(cfg: &RespondConfig, ex: &mut Exchange<'_>) {
    if cfg.body.is_none() && cfg.status >= 400 {
        ex.error(cfg.status, &[]);
        return;
    }
    ex.start(cfg.status);
    if no_length(cfg.status) {
        ex.end_head(None);
        return;
    }
    let body = cfg.body.clone().unwrap_or_default();
    if !body.is_empty() {
        ex.header("Content-Type", &cfg.content_type);
    }
    ex.end_head(Some(body.len() as u64));
    ex.body_mem(body);
}

/// 204 and 304 carry no Content-Length of a body (RFC 9110 §8.6).
fn no_length(status: u16) -> bool {
    matches!(status, 204 | 304)
}

#[cfg(test)]
mod tests {
    use super::{RespondConfig, RespondRouteConfig};

    fn cfg(status: Option<u16>, body: Option<&str>) -> RespondRouteConfig {
        RespondRouteConfig {
            status,
            body: body.map(str::to_owned),
            content_type: None,
        }
    }

    #[test]
    fn a_fixed_answer_is_a_final_status_and_204_or_304_have_no_body() {
        assert_eq!(
            RespondConfig::new(&cfg(None, Some("ok"))).unwrap().status,
            200
        );
        assert!(RespondConfig::new(&cfg(Some(404), Some("gone"))).is_ok());
        assert!(RespondConfig::new(&cfg(Some(204), None)).is_ok());
        assert!(RespondConfig::new(&cfg(Some(204), Some(""))).is_ok());
        for (s, b) in [
            (101, None),
            (199, None),
            (600, None),
            (204, Some("x")),
            (304, Some("x")),
        ] {
            assert!(RespondConfig::new(&cfg(Some(s), b)).is_err(), "{s}");
        }
    }

    #[test]
    fn the_content_type_defaults_to_plain_text_and_must_be_a_header_value() {
        let c = RespondConfig::new(&cfg(None, Some("x"))).unwrap();
        assert_eq!(c.content_type, b"text/plain; charset=utf-8");
        let mut bad = cfg(None, Some("x"));
        bad.content_type = Some("text/html\r\nX: y".into());
        assert!(RespondConfig::new(&bad).is_err());
    }
}
