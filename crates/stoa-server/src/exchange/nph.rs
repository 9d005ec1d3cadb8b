//! An NPH script's output — a whole HTTP/1 response — on a carrier that
//! cannot pass HTTP/1 bytes through (an HTTP/2 or HTTP/3 stream): its status line
//! and header fields are parsed and written as this exchange's head
//! (hop-by-hop fields, Date and Server dropped: the carrier and the
//! server write their own), and its body is taken out of its HTTP/1
//! framing (Content-Length, chunked, or up to the end of the output).
//! Handlers keep calling [`Exchange::raw`] and never learn the difference.

use super::{Exchange, Side};
use crate::proto::h2::NphRelay as Relay;
use stoa_h1::body::BodyDecoder;
use stoa_h1::proxy::{write_response_headers, ResponseOptions};
use stoa_h1::response::ResponseHead;
use stoa_h1::{parse_u64, Framing};

/// Largest head an NPH script may write (as for other CGI heads).
const MAX_HEAD: usize = 64 * 1024;

impl Exchange<'_> {
    /// The next piece of an NPH script's output, re-emitted through this
    /// exchange.
    pub(super) fn relay_nph(&mut self, data: &[u8]) {
        let Some(slot) = self.nph_slot() else { return };
        let mut relay = slot.take().unwrap_or_default();
        self.relay_piece(&mut relay, data);
        if let Some(slot) = self.nph_slot() {
            *slot = Some(relay);
        }
    }

    /// Where the carrier keeps the relay's state (streams only).
    fn nph_slot(&mut self) -> Option<&mut Option<Box<Relay>>> {
        match &mut self.side {
            Side::H2(s) => Some(&mut s.nph),
            Side::H3(s) => Some(&mut s.nph),
            _ => None,
        }
    }

    fn relay_piece(&mut self, relay: &mut Relay, data: &[u8]) {
        if relay.failed {
            return;
        }
        let Some(decoder) = relay.body.as_mut() else {
            relay.head.extend_from_slice(data);
            let mut rh = ResponseHead::default();
            let n = match rh.parse(&relay.head, MAX_HEAD) {
                Ok(None) => return,
                Ok(Some(n)) => n,
                Err(e) => {
                    tracing::error!("nph script: not an HTTP response head: {e:?}");
                    return self.relay_fail(relay);
                }
            };
            let Some(decoder) = self.relay_head(&rh) else {
                return self.relay_fail(relay);
            };
            let rest = relay.head.split_off(n);
            relay.head = Vec::new();
            relay.body = Some(decoder);
            return self.relay_piece(relay, &rest);
        };
        let mut input = data;
        while !input.is_empty() && !decoder.is_done() {
            match decoder.decode(input) {
                Ok((0, _)) => break,
                Ok((used, body)) => {
                    self.write(body);
                    input = &input[used..];
                }
                Err(e) => {
                    // The head is gone: the body is cut where it broke.
                    tracing::error!("nph script: bad body framing: {e:?}");
                    relay.failed = true;
                    return;
                }
            }
        }
    }

    /// Writes the head of the script's response; the body's decoder, or
    /// None when the head cannot be carried.
    fn relay_head(&mut self, rh: &ResponseHead) -> Option<BodyDecoder> {
        let framing = match rh.framing(self.is_head()) {
            Ok(f) => f,
            Err(e) => {
                tracing::error!("nph script: {e:?}");
                return None;
            }
        };
        if rh.status < 200 {
            // An interim response as the only one: nothing final follows.
            tracing::error!("nph script: status {} as its response", rh.status);
            return None;
        }
        let mut lines = Vec::new();
        let opts = ResponseOptions {
            drop: &["server", "date"],
            ..ResponseOptions::default()
        };
        if write_response_headers(&mut lines, rh, &opts).is_err() {
            tracing::error!("nph script: an invalid header field");
            return None;
        }
        self.start(rh.status);
        self.raw_headers(&lines);
        let length = rh.header("content-length").and_then(parse_u64);
        match framing {
            Framing::None if stoa_h1::response::bodyless(self.is_head(), rh.status) => {
                // HEAD keeps the length of what GET would send.
                self.end_head(if self.is_head() { length } else { None });
            }
            Framing::None => self.end_head(Some(0)),
            Framing::Length(n) => self.end_head(Some(n)),
            Framing::Chunked | Framing::Close => self.end_head_stream(),
        }
        Some(BodyDecoder::new(framing))
    }

    fn relay_fail(&mut self, relay: &mut Relay) {
        relay.failed = true;
        relay.head = Vec::new();
        self.error(502, &[]);
    }

    /// At the end of the output: a head that never completed is a 502.
    pub(super) fn relay_end(&mut self) {
        let Some(Some(relay)) = self.nph_slot() else {
            return;
        };
        if relay.body.is_none() && !relay.failed {
            tracing::error!("nph script: output ended before a complete head");
            relay.failed = true;
            self.error(502, &[]);
        }
    }
}
