//! HTTP/2 flood detection that the `h2` crate leaves to its user: a
//! reader between the connection's byte stream and `h2` that walks the
//! frame headers of what the client sends (never the payloads) and counts
//! the PING and SETTINGS frames (not acknowledgements), each of which the
//! server must answer (CVE-2019-9512 ping flood, CVE-2019-9515 settings
//! flood). `h2` keeps one answer pending and stops reading until it is
//! written, so a client that does not read its answers only stalls its
//! own connection; but one that reads them could keep the server
//! answering for ever. A token bucket bounds the rate: past it the guard
//! stops reading and raises its alarm, and the connection loop sends
//! GOAWAY `ENHANCE_YOUR_CALM` and closes.
//!
//! The other attacks are `h2`'s own business (0.4.20, as configured in
//! [`crate::conn::h2`]): CONTINUATION floods (CVE-2024-27316,
//! CVE-2023-45288: GOAWAY `ENHANCE_YOUR_CALM` after a few CONTINUATION
//! frames more than the header list size needs), HPACK bombs
//! (CVE-2016-6581: decoding stops at `max_header_list_size`, the request
//! gets 431; four times past it, GOAWAY), empty DATA frames
//! (CVE-2019-9518: GOAWAY after 100 without data and END_STREAM on a
//! connection, and a budget for the framing overhead of small ones),
//! Rapid Reset (CVE-2023-44487: `max_pending_accept_reset_streams`).

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// The client connection preface (RFC 9113 §3.4), which precedes frames.
const PREFACE_LEN: usize = 24;
const FRAME_HEAD: usize = 9;

const SETTINGS: u8 = 4;
const PING: u8 = 6;
const ACK: u8 = 0x1;

/// The client sent PING and SETTINGS frames faster than the budget
/// refills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flood;

impl Flood {
    pub fn describe(self) -> &'static str {
        "PING/SETTINGS frames (CVE-2019-9512, CVE-2019-9515)"
    }
}

/// Where the scan is in the byte stream.
#[derive(Debug, Clone, Copy)]
enum At {
    /// In the connection preface: this many bytes of it are left.
    Preface(usize),
    /// In a frame header: this many of its bytes are in `head`.
    Head(usize),
    /// In a payload: this many bytes are left to skip.
    Payload(usize),
}

/// The frame-header walk and the counters (sans I/O).
#[derive(Debug)]
pub struct Scanner {
    at: At,
    head: [u8; FRAME_HEAD],
    /// PING and SETTINGS frames at once (0: no limit); the budget
    /// refills at a tenth of this per second.
    max: u64,
    /// Control frames the client may still send now (in thousandths, so
    /// that slow refills add up).
    tokens: u64,
    refilled: Option<Instant>,
}

impl Scanner {
    pub fn new(max_control_frames: u32) -> Scanner {
        let max = u64::from(max_control_frames);
        Scanner {
            at: At::Preface(PREFACE_LEN),
            head: [0; FRAME_HEAD],
            max,
            tokens: max * 1000,
            refilled: None,
        }
    }

    /// Walks `bytes`, the next bytes the client sent; the flood they
    /// complete, if any.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Option<Flood> {
        while !bytes.is_empty() {
            match self.at {
                At::Preface(left) => {
                    let n = left.min(bytes.len());
                    bytes = &bytes[n..];
                    self.at = if n == left {
                        At::Head(0)
                    } else {
                        At::Preface(left - n)
                    };
                }
                At::Head(have) => {
                    let n = (FRAME_HEAD - have).min(bytes.len());
                    self.head[have..have + n].copy_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    if have + n < FRAME_HEAD {
                        self.at = At::Head(have + n);
                        continue;
                    }
                    if let Some(f) = self.frame() {
                        return Some(f);
                    }
                }
                At::Payload(left) => {
                    let n = left.min(bytes.len());
                    bytes = &bytes[n..];
                    self.at = skip(left - n);
                }
            }
        }
        None
    }

    /// A frame header is complete: count it, and skip its payload.
    fn frame(&mut self) -> Option<Flood> {
        let h = &self.head;
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let (kind, flags) = (h[3], h[4]);
        self.at = skip(len);
        match kind {
            PING | SETTINGS if flags & ACK == 0 => self.control(),
            _ => None,
        }
    }

    /// A PING or SETTINGS frame the server must acknowledge.
    fn control(&mut self) -> Option<Flood> {
        let max = self.max;
        if max == 0 {
            return None;
        }
        let now = Instant::now();
        if let Some(then) = self.refilled {
            // max/10 frames per second = max/10 thousandths per millisecond.
            let ms = now.duration_since(then).as_millis() as u64;
            self.tokens = (self.tokens + ms * max / 10).min(max * 1000);
        }
        self.refilled = Some(now);
        if self.tokens < 1000 {
            return Some(Flood);
        }
        self.tokens -= 1000;
        None
    }
}

fn skip(n: usize) -> At {
    if n == 0 {
        At::Head(0)
    } else {
        At::Payload(n)
    }
}

/// The alarm a [`Guard`] raises, shared with the connection loop.
#[derive(Default)]
pub struct Alarm {
    flood: Cell<Option<Flood>>,
    pub notify: Notify,
}

impl Alarm {
    pub fn flood(&self) -> Option<Flood> {
        self.flood.get()
    }
}

/// The connection's byte stream, with a [`Scanner`] on what is read. Once
/// it raised the alarm, it reads nothing more.
pub struct Guard<T> {
    io: T,
    scan: Scanner,
    alarm: Rc<Alarm>,
}

impl<T> Guard<T> {
    /// `max_control_frames`: `[http2]`'s (0: no limit).
    pub fn new(io: T, max_control_frames: u32) -> (Guard<T>, Rc<Alarm>) {
        let alarm = Rc::new(Alarm::default());
        let g = Guard {
            io,
            scan: Scanner::new(max_control_frames),
            alarm: alarm.clone(),
        };
        (g, alarm)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guard<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.alarm.flood.get().is_some() {
            // The connection loop closes the connection; nothing the
            // client sends matters any more.
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut me.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            if let Some(f) = me.scan.feed(&buf.filled()[before..]) {
                me.alarm.flood.set(Some(f));
                me.alarm.notify.notify_one();
            }
        }
        r
    }
}

// The guard watches what is read; writes go straight through.
crate::write_through!(Guard<T>, io, T: AsyncWrite + Unpin);

#[cfg(test)]
mod tests {
    use super::*;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const DATA: u8 = 0;
    const HEADERS: u8 = 1;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn pings_and_settings_past_the_budget_are_a_flood_whatever_the_read_sizes() {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(HEADERS, 0x4, 1, b"\x82"));
        for _ in 0..3 {
            bytes.extend(frame(PING, 0, 0, &[0; 8]));
            bytes.extend(frame(DATA, 0, 1, b"body"));
        }
        bytes.extend(frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]));
        for cut in [1, 2, 7, 9, 100] {
            let mut s = Scanner::new(4);
            let hits: Vec<Flood> = bytes.chunks(cut).filter_map(|c| s.feed(c)).collect();
            assert!(hits.is_empty(), "cut {cut}: {hits:?}");
            assert_eq!(s.feed(&frame(PING, 0, 0, &[0; 8])), Some(Flood));
        }
    }

    #[test]
    fn acknowledgements_are_free() {
        let mut s = Scanner::new(1);
        assert_eq!(s.feed(PREFACE), None);
        for _ in 0..100 {
            assert_eq!(s.feed(&frame(PING, ACK, 0, &[0; 8])), None);
            assert_eq!(s.feed(&frame(SETTINGS, ACK, 0, &[])), None);
        }
    }

    #[test]
    fn the_budget_refills_with_time() {
        let mut s = Scanner::new(10);
        assert_eq!(s.feed(PREFACE), None);
        for _ in 0..10 {
            assert_eq!(s.feed(&frame(PING, 0, 0, &[0; 8])), None);
        }
        // 10 per 10 s: one more after a second.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(s.feed(&frame(PING, 0, 0, &[0; 8])), None);
        assert_eq!(s.feed(&frame(PING, 0, 0, &[0; 8])), Some(Flood));
    }

    #[test]
    fn a_zero_limit_turns_the_check_off() {
        let mut s = Scanner::new(0);
        assert_eq!(s.feed(PREFACE), None);
        for _ in 0..10_000 {
            assert_eq!(s.feed(&frame(PING, 0, 0, &[0; 8])), None);
        }
    }

    #[test]
    fn payloads_are_skipped_not_read() {
        let mut s = Scanner::new(1);
        assert_eq!(s.feed(PREFACE), None);
        // A DATA frame whose payload happens to look like PING frames.
        let ping = frame(PING, 0, 0, &[0; 8]);
        let payload: Vec<u8> = ping.iter().cycle().take(17 * 100).copied().collect();
        assert_eq!(s.feed(&frame(DATA, 0, 1, &payload)), None);
        assert_eq!(s.feed(&frame(PING, 0, 0, &[0; 8])), None);
    }
}
