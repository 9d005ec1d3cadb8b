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
    ex.catch_errors();
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

#[cfg(test)]
mod tests {
    use crate::config::{from_str, Overrides, Runtime};
    use crate::exchange::Edge;
    use crate::filter::error_pages::ErrorPage;
    use stoa_h1::{Method, RequestHead, Version};

    fn runtime(body: &str) -> Result<Runtime, String> {
        let root = std::env::temp_dir();
        let text = format!("[[site]]\nroot = {:?}\n{body}", root.display().to_string());
        from_str(&text, "t.toml", &root, &Overrides::default()).map_err(|e| e.to_string())
    }

    /// The edge routing settles on for `path`.
    fn edge<'r>(rt: &'r Runtime, path: &str) -> &'r Edge {
        let head = RequestHead::from_parts(
            Method::Get,
            path.as_bytes(),
            Version::Http11,
            [(&b"host"[..], &b"x"[..])],
        );
        let (mut hsts, mut edge) = (None, Edge::none());
        super::super::pick_request(&head, rt, false, &mut hsts, &mut edge);
        edge
    }

    fn page(rt: &Runtime, path: &str, status: u16) -> Option<ErrorPage> {
        edge(rt, path)
            .error_pages
            .as_ref()
            .and_then(|p| p.page(status))
            .cloned()
    }

    fn local(p: &str) -> Option<ErrorPage> {
        Some(ErrorPage::Local(p.as_bytes().into()))
    }

    /// A route's `error_pages` replaces its site's whole (nginx inherits
    /// `error_page` into a location unless the location has its own);
    /// `{}` lifts them; a dotfile refused before any route has the site's.
    #[test]
    fn a_routes_error_pages_replace_its_sites_and_an_empty_table_lifts_them() {
        let rt = runtime(
            "error_pages = { \"404\" = \"/404.html\", \"5xx\" = \"/50x.html\" }\n\
             [[site.route]]\nprefix = \"/own/\"\nstatic = {}\nerror_pages = { \"404\" = \"/own404.html\" }\n\
             [[site.route]]\nprefix = \"/none/\"\nstatic = {}\nerror_pages = {}\n\
             [[site.route]]\nprefix = \"/same/\"\nstatic = {}\n",
        )
        .expect("a valid config");
        assert_eq!(page(&rt, "/x", 404), local("/404.html"));
        assert_eq!(page(&rt, "/x", 503), local("/50x.html"));
        assert_eq!(page(&rt, "/same/x", 404), local("/404.html"));
        assert_eq!(page(&rt, "/own/x", 404), local("/own404.html"));
        assert_eq!(page(&rt, "/own/x", 503), None);
        assert_eq!(page(&rt, "/none/x", 404), None);
        assert!(edge(&rt, "/none/x").error_pages.is_none());
        assert_eq!(page(&rt, "/.git/config", 403), None);
        assert_eq!(page(&rt, "/.git/config", 404), local("/404.html"));
        // Only routes that ask intercept applications' errors.
        assert!(edge(&rt, "/x")
            .error_pages
            .as_ref()
            .is_some_and(|p| !p.intercept));
    }

    #[test]
    fn intercept_errors_is_inherited_and_needs_error_pages() {
        let rt = runtime(
            "error_pages = { \"5xx\" = \"/50x.html\" }\nintercept_errors = true\n\
             [[site.route]]\nprefix = \"/off/\"\nstatic = {}\nintercept_errors = false\n",
        )
        .expect("a valid config");
        assert!(edge(&rt, "/x")
            .error_pages
            .as_ref()
            .is_some_and(|p| p.intercept));
        assert!(edge(&rt, "/off/x")
            .error_pages
            .as_ref()
            .is_some_and(|p| !p.intercept));
        let e = runtime("[[site.route]]\nprefix = \"/a/\"\nstatic = {}\nintercept_errors = true\n")
            .expect_err("intercept_errors without pages");
        assert!(e.contains("site[0].route[0].intercept_errors"), "{e}");
        let e = runtime("error_pages = { \"200\" = \"/x.html\" }\n").expect_err("a 200 page");
        assert!(e.contains("t.toml:3: site[0].error_pages"), "{e}");
    }

    /// `headers`, `expires` and `cache_control` each inherit on their own:
    /// a route's `expires` keeps its site's `headers`; nothing configured
    /// is no filter at all.
    #[test]
    fn header_keys_reach_the_filters_of_the_route_each_on_its_own() {
        let rt = runtime(
            "headers = { add = { X-A = \"1\" } }\n\
             [[site.route]]\nprefix = \"/assets/\"\nstatic = {}\nexpires = \"1d\"\n\
             [[site.route]]\nprefix = \"/bare/\"\nstatic = {}\nheaders = {}\n",
        )
        .expect("a valid config");
        let rules = |p: &str| {
            edge(&rt, p)
                .filters
                .as_ref()
                .and_then(|f| f.headers.clone())
        };
        assert!(rules("/x").is_some());
        assert!(rules("/assets/x").is_some_and(|r| r != rules("/x").expect("the site's")));
        assert!(rules("/bare/x").is_none());
        assert!(runtime("").expect("valid").sites[0].edge.filters.is_none());
    }
}
