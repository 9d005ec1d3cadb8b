//! An application's response head (CGI, FastCGI; the proxy next) written
//! to the exchange. The framing toward the client is the exchange's
//! business: the application's Content-Length when it gave one, else
//! whatever the carrier uses for a body of unknown length.

use crate::exchange::Exchange;

/// Writes the head of an application's response. `body_done` says whether
/// the request body was read to its end (if not, the connection closes
/// after this response). `whole` is the body's length when all of it is
/// already in hand: it then goes out with a Content-Length instead of
/// chunks (one write for the whole response). Returns whether the response
/// has no body (HEAD, 204, 304).
pub fn start(
    h: &stoa_cgi::ResponseHead,
    ex: &mut Exchange<'_>,
    body_done: bool,
    whole: Option<u64>,
) -> bool {
    if !body_done {
        ex.close();
    }
    let status = h.effective_status();
    ex.start(status);
    if let Some(ct) = &h.content_type {
        ex.header("Content-Type", ct);
    }
    if let Some(loc) = &h.location {
        ex.header("Location", loc);
    }
    for (name, value) in &h.headers {
        ex.header(name, value);
    }
    let is_head = ex.is_head();
    let bodyless = stoa_h1::response::bodyless(is_head, status);
    if bodyless {
        ex.end_head(if is_head { h.content_length } else { None });
    } else if let Some(cl) = h.content_length.or(whole) {
        ex.end_head(Some(cl));
    } else {
        ex.end_head_stream();
    }
    bodyless
}

/// Writes a piece of body and waits until the client took it
/// (backpressure). False when the client is gone.
pub async fn send(ex: &mut Exchange<'_>, data: &[u8]) -> bool {
    ex.write(data);
    ex.flush().await
}
