//! Error pages (`error_pages`, `intercept_errors`): a response the
//! exchange caught because the route has a page for its status is
//! replaced by that page, fetched by an internal subrequest (routing
//! again: a static file, an SSI page, a script), with the original status
//! kept — nginx's `error_page 404 /404.html`. A full URL is a 302 to it,
//! as nginx answers `error_page 404 https://...`. A page that cannot be
//! had (missing, itself an error, too large) gives the built-in error
//! instead: an error page's own errors are never replaced, so nothing
//! loops.

use super::{dispatch_in, Includer, Nest};
use crate::config::Runtime;
use crate::exchange::Exchange;
use crate::filter::error_pages::ErrorPage;

/// The most body kept of an error page; a larger one is not used.
const MAX_ERROR_PAGE: usize = 1 << 20;

/// Fields of the caught response that its status needs and the page
/// keeps (RFC 9110 §15.5.2 `WWW-Authenticate` with a 401, §15.5.6
/// `Allow` with a 405, §10.2.3 `Retry-After` with a 503 or 429, §15.5.17
/// `Content-Range` with a 416).
const KEPT: [&str; 4] = ["www-authenticate", "allow", "retry-after", "content-range"];

/// Fields of the page's own response that describe the body sent: the
/// rest (validators, ranges, cookies) belongs to the page, not to the
/// error it stands for.
const FROM_PAGE: [&str; 2] = ["content-type", "content-language"];

/// Runs what routing chose on `ex` to its end; if its response was
/// caught for an error page, writes the page.
pub(super) async fn run_in(
    p: super::Pick<'_>,
    ex: &mut Exchange<'_>,
    rt: &Runtime,
    depth: u8,
    vars: &[(String, Vec<u8>)],
    nest: Option<&Nest>,
) {
    if let Some(f) = dispatch_in(p, ex, rt, depth, vars, nest) {
        f.await;
    }
    if ex.is_caught() {
        serve(ex, rt, nest).await;
    }
}

/// Writes the error page of the response caught on `ex`, and ends it.
pub(super) async fn serve(ex: &mut Exchange<'_>, rt: &Runtime, nest: Option<&Nest>) {
    let Some((status, caught)) = ex.take_caught() else {
        return;
    };
    let mut kept = Vec::new();
    for_lines(&caught, |name, line| {
        if KEPT.iter().any(|k| k.as_bytes().eq_ignore_ascii_case(name)) {
            kept.extend_from_slice(line);
        }
    });
    let page = ex.edge().error_pages.as_ref().and_then(|p| p.page(status));
    match page {
        None => ex.error_lines(status, &kept),
        Some(ErrorPage::Redirect(url)) => {
            stoa_h1::response::push_header(&mut kept, "Location", url);
            ex.error_lines(302, &kept);
        }
        Some(ErrorPage::Local(target)) => {
            let norm = crate::http::path::normalize(ex.req().path()).unwrap_or_default();
            let inc = Includer::inside(rt, ex, MAX_ERROR_PAGE, nest, &norm, None);
            let resp = crate::exchange::Include::include(&inc, ex.req(), target).await;
            if resp.status != 200 || resp.cut {
                tracing::error!(
                    "error page {} for {status}: {}; the built-in page was sent ({})",
                    String::from_utf8_lossy(target),
                    if resp.cut {
                        format!("larger than {MAX_ERROR_PAGE} bytes")
                    } else {
                        format!("status {}", resp.status)
                    },
                    ex.who()
                );
                ex.error_lines(status, &kept);
            } else {
                ex.begin(status);
                ex.raw_headers(&kept);
                for_lines(&resp.head, |name, line| {
                    if FROM_PAGE
                        .iter()
                        .any(|k| k.as_bytes().eq_ignore_ascii_case(name))
                    {
                        ex.raw_headers(line);
                    }
                });
                ex.end_head(Some(resp.body.len() as u64));
                ex.body_mem(resp.body);
            }
        }
    }
    ex.finish();
}

/// Each `Name: value\r\n` line of a head block, with its name.
fn for_lines(block: &[u8], mut f: impl FnMut(&[u8], &[u8])) {
    let mut rest = block;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let line = &rest[..end];
        // A line cut short is not passed on (it would end the head).
        if let (Some(c), true) = (
            line.iter().position(|&b| b == b':'),
            line.ends_with(b"\r\n"),
        ) {
            f(&line[..c], line);
        }
        rest = &rest[end..];
    }
}
