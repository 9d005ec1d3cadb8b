//! The server side of one HTTP/2 connection (RFC 9113), sans I/O.
//!
//! [`Conn::recv`] takes the bytes the client sent, [`Conn::next_event`]
//! hands out what they meant, the `send_*` calls queue the response, and
//! [`Conn::output`] holds the bytes to write, in order. Every defence
//! against the known floods lives here (the server has no other filter):
//! see [`Config`] and the module tests.

use crate::frame::{self, Head, Reason, HEAD_LEN, MAX_WINDOW};
use crate::hpack::{self, DecodeError};
use crate::request::{Builder, Request, Trailers};
use bytes::{Buf, Bytes, BytesMut};
use std::collections::VecDeque;
use std::time::Instant;

/// Our side's limits; `[http2]` in the server's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK table the client may fill.
    pub header_table_size: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams past it are refused.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may
    /// send ahead of the handler.
    pub initial_window_size: u32,
    /// The connection's receive window (all streams together).
    pub initial_connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame we accept.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a longer request head gets
    /// [`Event::HeadersTooLarge`] (answered with 431).
    pub max_header_list_size: u32,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441): `:protocol` allowed.
    pub enable_connect_protocol: bool,
    /// Rapid Reset (CVE-2023-44487): streams the client may reset while
    /// their requests wait in the event queue; past it, GOAWAY
    /// ENHANCE_YOUR_CALM.
    pub max_pending_accept_reset_streams: usize,
    /// Stream errors the client may cause on one connection (each one a
    /// RST_STREAM from us); past it, GOAWAY ENHANCE_YOUR_CALM.
    pub max_local_error_reset_streams: usize,
    /// PING and SETTINGS frames at once (CVE-2019-9512, CVE-2019-9515);
    /// the budget refills at a tenth of this per second (0: no limit).
    pub max_control_frames: u32,
}

impl Default for Config {
    /// The values of RFC 9113 §6.5.2 where it has them, and the `h2`
    /// crate's limits otherwise.
    fn default() -> Config {
        Config {
            header_table_size: 4096,
            max_concurrent_streams: 128,
            initial_window_size: frame::DEFAULT_WINDOW,
            initial_connection_window_size: frame::DEFAULT_WINDOW,
            max_frame_size: frame::MIN_MAX_FRAME_SIZE,
            max_header_list_size: 16 << 10,
            enable_connect_protocol: false,
            max_pending_accept_reset_streams: 20,
            max_local_error_reset_streams: 1024,
            max_control_frames: 1000,
        }
    }
}

/// What the client's bytes meant, in order.
#[derive(Debug)]
pub enum Event {
    /// A new stream's request head, validated (RFC 9113 §8.2, §8.3).
    Request {
        id: u32,
        head: Box<Request>,
        end_stream: bool,
    },
    /// Request body bytes: they count against our windows until
    /// [`Conn::release`] gives them back.
    Data {
        id: u32,
        data: Bytes,
        end_stream: bool,
    },
    /// Trailer fields; the request ends with them.
    Trailers {
        id: u32,
        fields: Vec<(Bytes, Bytes)>,
    },
    /// A request head past `max_header_list_size` (RFC 9113 §10.5.1):
    /// answer 431 (RFC 6585 §5) on this stream; its body, if any, is
    /// dropped by the codec.
    HeadersTooLarge { id: u32 },
    /// The client's RST_STREAM, or a stream error we raised (our
    /// RST_STREAM is queued): the stream is gone, drop its response.
    Reset { id: u32, code: Reason },
    /// Sending may resume on stream `id` (0: on every stream).
    WindowUpdate { id: u32 },
    /// The client's GOAWAY.
    GoAway { last_stream_id: u32, code: Reason },
}

impl Event {
    /// The stream the event is about (None: the connection).
    pub fn stream_id(&self) -> Option<u32> {
        match self {
            Event::Request { id, .. }
            | Event::Data { id, .. }
            | Event::Trailers { id, .. }
            | Event::HeadersTooLarge { id }
            | Event::Reset { id, .. } => Some(*id),
            Event::WindowUpdate { id } if *id != 0 => Some(*id),
            Event::WindowUpdate { .. } | Event::GoAway { .. } => None,
        }
    }
}

/// A connection error (RFC 9113 §5.4.1): our GOAWAY is queued; write the
/// output and close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnError {
    pub code: Reason,
    /// What the client did, for the log.
    pub what: &'static str,
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.what)
    }
}

impl std::error::Error for ConnError {}

/// `recv` stops taking frames while this much output waits to be
/// written: a client that does not read cannot make us queue answers
/// (PING/SETTINGS ACKs, RST_STREAMs) without bound.
pub const OUTPUT_HIGH: usize = 64 << 10;

/// Empty DATA frames without END_STREAM allowed on a connection
/// (CVE-2019-9518; the `h2` crate's and nghttp2's figure).
const MAX_EMPTY_DATA: u32 = 100;

/// Buffers larger than this are freed once empty, not kept for reuse
/// (a turn of h2load -m 10 on a 1,358-byte file writes ~15 KiB: at 16 KiB
/// the output was freed and grown again every turn, 8 reallocations;
/// an idle connection gives it back with `shrink_idle`).
const KEEP_CAPACITY: usize = OUTPUT_HIGH;

/// Closed streams remembered, to tell "closed" from "never opened" and to
/// ignore what was in flight when we reset a stream (RFC 9113 §5.1).
const RECENT: usize = 32;
/// In `Conn::recent`: the stream was reset by us.
const BY_US: u32 = 1 << 31;

/// A given-back request whose buffer grew past this is let go rather
/// than kept for the next (a large head is rare; it is not held for the
/// connection's life).
const RECYCLE_MAX: usize = 4096;

/// Given-back requests kept for the next heads (each a few hundred
/// bytes; all go when the connection idles, `shrink_idle`).
const SPARE_REQUESTS: usize = 16;

/// DATA payloads of a shared body ([`Conn::send_data_shared`]) at least
/// this long go out from the caller's buffer (one more piece of the
/// vectored write); shorter ones are copied into the output, which costs
/// less than the extra piece.
const SPLICE_MIN: usize = 1024;

#[derive(Debug)]
struct Stream {
    id: u32,
    /// The client may still send (no END_STREAM yet).
    recv_open: bool,
    /// We may still send (no END_STREAM or reset from us).
    send_open: bool,
    /// Its Request (or HeadersTooLarge) event was queued.
    announced: bool,
    /// ... and still waits in the queue.
    queued: bool,
    /// Body bytes are dropped and given back at once (431 streams).
    discard: bool,
    send_window: i64,
    recv_window: i64,
    /// Released bytes not yet announced in a WINDOW_UPDATE.
    pending_update: u32,
    /// Bytes handed out in Data events and not yet released.
    unreleased: u64,
    content_length: Option<u64>,
    received: u64,
}

/// How a recently closed stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    /// We reset it: frames in flight are ignored (RFC 9113 §5.1 "closed").
    ByUs,
    /// Both sides ended it, or the client reset it.
    Other,
}

/// A header block in progress (HEADERS without END_HEADERS).
struct Block {
    id: u32,
    end_stream: bool,
    self_dependent: bool,
    frames: usize,
}

/// The server side of one HTTP/2 connection.
pub struct Conn {
    cfg: Config,
    decoder: hpack::Decoder,
    out: Vec<u8>,
    /// Bytes of `out` already written (moved out lazily: a large output
    /// written in small pieces is not moved down after each).
    out_pos: usize,
    /// DATA payloads sent from the caller's buffers, not copied: each
    /// goes out right after the first `at` bytes of `out` (positions in
    /// `out`, in order; the front one is cut as it is written).
    spliced: VecDeque<(usize, Bytes)>,
    /// Bytes in `spliced`.
    spliced_len: usize,
    events: VecDeque<Event>,
    /// Bytes of the client preface still to check.
    preface_left: usize,
    got_settings: bool,
    our_settings_acked: bool,
    block: Option<Block>,
    block_buf: Vec<u8>,
    streams: Vec<Stream>,
    last_peer_id: u32,
    /// Closed streams, oldest first from `recent_next` (a ring): the id,
    /// with the top bit set when we reset it; 0 is an empty place (stream
    /// ids are 31 bits and never 0). Inline, not a heap list: a parked
    /// connection's state is then one block the lot holds, with nothing
    /// of it left among the buffers it gave back (docs/BENCHMARKS.md,
    /// "Idle HTTP/2 connections").
    recent: [u32; RECENT],
    recent_next: u8,
    peer_max_frame: usize,
    /// Our own cap on DATA payloads (`set_max_data_frame`).
    data_frame_cap: usize,
    peer_initial_window: i64,
    peer_table_size: u32,
    size_update_owed: Option<u32>,
    conn_send: i64,
    conn_recv: i64,
    conn_pending: u64,
    goaway_sent: bool,
    goaway_recv: bool,
    error: Option<ConnError>,
    ctrl_tokens: u64,
    ctrl_refilled: Option<Instant>,
    empty_data: u32,
    local_resets: usize,
    pending_accept_resets: usize,
    /// Requests the caller gave back ([`Conn::recycle`]), whose boxes and
    /// buffers the next request heads are decoded into. Boxed: the box
    /// itself is what `Event::Request` hands out again.
    #[allow(clippy::vec_box)]
    spare_requests: Vec<Box<Request>>,
}

impl Conn {
    /// A connection whose first output is our SETTINGS (and a
    /// WINDOW_UPDATE when the connection window is above the default).
    pub fn new(cfg: &Config) -> Conn {
        let mut cfg = cfg.clone();
        cfg.max_frame_size = cfg
            .max_frame_size
            .clamp(frame::MIN_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        cfg.initial_window_size = cfg.initial_window_size.min(MAX_WINDOW as u32);
        cfg.initial_connection_window_size = cfg
            .initial_connection_window_size
            .clamp(frame::DEFAULT_WINDOW, MAX_WINDOW as u32);
        let mut out = Vec::with_capacity(64);
        let mut settings = Vec::with_capacity(36);
        let mut set = |id: u16, v: u32| {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&v.to_be_bytes());
        };
        if cfg.header_table_size != 4096 {
            set(frame::SETTINGS_HEADER_TABLE_SIZE, cfg.header_table_size);
        }
        set(
            frame::SETTINGS_MAX_CONCURRENT_STREAMS,
            cfg.max_concurrent_streams,
        );
        if cfg.initial_window_size != frame::DEFAULT_WINDOW {
            set(frame::SETTINGS_INITIAL_WINDOW_SIZE, cfg.initial_window_size);
        }
        if cfg.max_frame_size != frame::MIN_MAX_FRAME_SIZE {
            set(frame::SETTINGS_MAX_FRAME_SIZE, cfg.max_frame_size);
        }
        set(
            frame::SETTINGS_MAX_HEADER_LIST_SIZE,
            cfg.max_header_list_size,
        );
        if cfg.enable_connect_protocol {
            set(frame::SETTINGS_ENABLE_CONNECT_PROTOCOL, 1);
        }
        frame::put_frame(&mut out, frame::SETTINGS, 0, 0, &settings);
        let extra = cfg.initial_connection_window_size - frame::DEFAULT_WINDOW;
        if extra > 0 {
            frame::put_window_update(&mut out, 0, extra);
        }
        Conn {
            decoder: hpack::Decoder::new(cfg.header_table_size as usize),
            out,
            out_pos: 0,
            spliced: VecDeque::new(),
            spliced_len: 0,
            events: VecDeque::new(),
            preface_left: frame::PREFACE.len(),
            got_settings: false,
            our_settings_acked: false,
            block: None,
            block_buf: Vec::new(),
            streams: Vec::new(),
            last_peer_id: 0,
            recent: [0; RECENT],
            recent_next: 0,
            peer_max_frame: frame::MIN_MAX_FRAME_SIZE as usize,
            data_frame_cap: usize::MAX,
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            peer_table_size: 4096,
            size_update_owed: None,
            conn_send: i64::from(frame::DEFAULT_WINDOW),
            conn_recv: i64::from(cfg.initial_connection_window_size),
            conn_pending: 0,
            goaway_sent: false,
            goaway_recv: false,
            error: None,
            ctrl_tokens: u64::from(cfg.max_control_frames) * 1000,
            ctrl_refilled: None,
            empty_data: 0,
            local_resets: 0,
            pending_accept_resets: 0,
            spare_requests: Vec::new(),
            cfg,
        }
    }

    /// Takes every complete frame from `input` (what it took is split
    /// off; a partial frame stays), updates the state, queues events and
    /// the frames we owe. Stops early while [`Conn::backlogged`]: write
    /// the output, then call again. `Err`: a connection error, GOAWAY
    /// queued; write the output and close.
    pub fn recv(&mut self, input: &mut BytesMut) -> Result<(), ConnError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let r = self.frames(input);
        if let Err(e) = r {
            if self.error.is_none() {
                self.error = Some(e);
                if !self.goaway_sent || e.code != Reason::NO_ERROR {
                    frame::put_goaway(&mut self.out, self.last_peer_id, e.code);
                    self.goaway_sent = true;
                }
            }
        }
        r
    }

    fn frames(&mut self, input: &mut BytesMut) -> Result<(), ConnError> {
        if self.preface_left > 0 {
            let done = frame::PREFACE.len() - self.preface_left;
            let n = self.preface_left.min(input.len());
            if input[..n] != frame::PREFACE[done..done + n] {
                return Err(fail(Reason::PROTOCOL_ERROR, "no client connection preface"));
            }
            input.advance(n);
            self.preface_left -= n;
            if self.preface_left > 0 {
                return Ok(());
            }
        }
        while input.len() >= HEAD_LEN && !self.backlogged() {
            let head = Head::parse(input[..HEAD_LEN].try_into().unwrap_or(&[0; HEAD_LEN]));
            if head.len > self.cfg.max_frame_size as usize {
                return Err(fail(
                    Reason::FRAME_SIZE_ERROR,
                    "a frame past SETTINGS_MAX_FRAME_SIZE (RFC 9113 §4.2)",
                ));
            }
            if input.len() < HEAD_LEN + head.len {
                input.reserve(HEAD_LEN + head.len - input.len());
                return Ok(());
            }
            if !self.got_settings && (head.kind != frame::SETTINGS || head.flags & frame::ACK != 0)
            {
                return Err(fail(
                    Reason::PROTOCOL_ERROR,
                    "the preface is not followed by SETTINGS (RFC 9113 §3.4)",
                ));
            }
            if let Some(b) = &self.block {
                if head.kind != frame::CONTINUATION || head.stream != b.id {
                    return Err(fail(
                        Reason::PROTOCOL_ERROR,
                        "a header block interrupted (RFC 9113 §6.10)",
                    ));
                }
            }
            if head.kind == frame::DATA {
                input.advance(HEAD_LEN);
                let payload = input.split_to(head.len).freeze();
                self.on_data(head, payload)?;
            } else {
                let r = self.on_frame(head, &input[HEAD_LEN..HEAD_LEN + head.len]);
                input.advance(HEAD_LEN + head.len);
                r?;
            }
        }
        Ok(())
    }

    /// The next event, in the order the frames came.
    pub fn next_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front();
        match &e {
            Some(Event::Request { id, .. } | Event::HeadersTooLarge { id }) => {
                if let Some(i) = self.find(*id) {
                    self.streams[i].queued = false;
                }
            }
            Some(_) => {}
            // Every request was taken: none waits any more (Rapid Reset
            // counts resets of requests still waiting, as `h2` does).
            None => self.pending_accept_resets = 0,
        }
        e
    }

    fn push(&mut self, e: Event) {
        self.events.push_back(e);
    }

    /// A window grew: one event for a run of updates (a client sending
    /// WINDOW_UPDATE after WINDOW_UPDATE makes the server look at its
    /// streams once, not once per frame).
    fn window_event(&mut self, id: u32) {
        match self.events.back() {
            Some(Event::WindowUpdate { id: last }) if *last == id || *last == 0 => {}
            _ => self.push(Event::WindowUpdate { id }),
        }
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    fn is_idle(&self, id: u32) -> bool {
        id > self.last_peer_id || id.is_multiple_of(2)
    }

    fn closed_how(&self, id: u32) -> Option<Closed> {
        if id == 0 {
            return None;
        }
        self.recent.iter().find(|&&r| r & !BY_US == id).map(|&r| {
            if r & BY_US != 0 {
                Closed::ByUs
            } else {
                Closed::Other
            }
        })
    }

    fn remember(&mut self, id: u32, how: Closed) {
        let tag = match how {
            Closed::ByUs => BY_US,
            Closed::Other => 0,
        };
        let i = usize::from(self.recent_next);
        self.recent[i] = (id & !BY_US) | tag;
        self.recent_next = ((i + 1) % RECENT) as u8;
    }

    /// Removes stream `i`, giving back to the connection window what its
    /// handler never released.
    fn remove(&mut self, i: usize, how: Closed) -> Stream {
        let s = self.streams.swap_remove(i);
        self.give_back_conn(s.unreleased);
        self.remember(s.id, how);
        s
    }

    fn close_if_done(&mut self, i: usize) {
        let s = &self.streams[i];
        if !s.recv_open && !s.send_open {
            self.remove(i, Closed::Other);
        }
    }

    fn give_back_conn(&mut self, n: u64) {
        self.conn_pending += n;
        let half = u64::from(self.cfg.initial_connection_window_size / 2);
        if self.conn_pending >= half.max(1) {
            let inc = self.conn_pending.min(MAX_WINDOW as u64) as u32;
            frame::put_window_update(&mut self.out, 0, inc);
            self.conn_recv += i64::from(inc);
            self.conn_pending -= u64::from(inc);
        }
    }

    /// A stream error (RFC 9113 §5.4.2): RST_STREAM, and the stream is
    /// gone. Too many of them on one connection is a flood.
    fn stream_error(&mut self, id: u32, code: Reason) -> Result<(), ConnError> {
        frame::put_rst(&mut self.out, id, code);
        if let Some(i) = self.find(id) {
            let s = self.remove(i, Closed::ByUs);
            if s.announced {
                self.push(Event::Reset { id, code });
            }
        } else if self.closed_how(id).is_none() {
            self.remember(id, Closed::ByUs);
        }
        self.local_resets += 1;
        if self.local_resets > self.cfg.max_local_error_reset_streams {
            return Err(fail(
                Reason::ENHANCE_YOUR_CALM,
                "too many stream errors on one connection",
            ));
        }
        Ok(())
    }

    fn on_data(&mut self, head: Head, payload: Bytes) -> Result<(), ConnError> {
        let id = head.stream;
        if id == 0 {
            return Err(fail(
                Reason::PROTOCOL_ERROR,
                "DATA on stream 0 (RFC 9113 §6.1)",
            ));
        }
        let len = payload.len();
        let data = if head.flags & frame::PADDED != 0 {
            let pad = usize::from(*payload.first().unwrap_or(&0));
            if len == 0 || pad >= len {
                return Err(fail(
                    Reason::PROTOCOL_ERROR,
                    "DATA padding too long (RFC 9113 §6.1)",
                ));
            }
            payload.slice(1..len - pad)
        } else {
            payload
        };
        let end = head.flags & frame::END_STREAM != 0;
        if len as i64 > self.conn_recv {
            return Err(fail(
                Reason::FLOW_CONTROL_ERROR,
                "DATA past the connection window (RFC 9113 §6.9)",
            ));
        }
        self.conn_recv -= len as i64;
        let Some(i) = self.find(id) else {
            if self.is_idle(id) {
                return Err(fail(
                    Reason::PROTOCOL_ERROR,
                    "DATA on an idle stream (RFC 9113 §5.1)",
                ));
            }
            self.give_back_conn(len as u64);
            if self.closed_how(id) == Some(Closed::ByUs) {
                return Ok(());
            }
            return self.stream_error(id, Reason::STREAM_CLOSED);
        };
        if !self.streams[i].recv_open {
            self.give_back_conn(len as u64);
            return self.stream_error(id, Reason::STREAM_CLOSED);
        }
        // Before our SETTINGS is acknowledged, the client may still count
        // from the default window (RFC 9113 §6.9.2).
        let slack = if self.our_settings_acked {
            0
        } else {
            (i64::from(frame::DEFAULT_WINDOW) - i64::from(self.cfg.initial_window_size)).max(0)
        };
        if len as i64 > self.streams[i].recv_window + slack {
            self.give_back_conn(len as u64);
            return self.stream_error(id, Reason::FLOW_CONTROL_ERROR);
        }
        if data.is_empty() && !end {
            self.empty_data += 1;
            if self.empty_data > MAX_EMPTY_DATA {
                return Err(fail(
                    Reason::ENHANCE_YOUR_CALM,
                    "a flood of empty DATA frames (CVE-2019-9518)",
                ));
            }
        }
        let s = &mut self.streams[i];
        s.recv_window -= len as i64;
        s.received += data.len() as u64;
        let padding = (len - data.len()) as u64;
        let bad_length = match s.content_length {
            Some(cl) => s.received > cl || (end && s.received != cl),
            None => false,
        };
        if bad_length {
            self.give_back_conn(len as u64);
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        if end {
            s.recv_open = false;
        }
        let discard = s.discard;
        if discard {
            // Dropped: both windows get it back, so that the client can
            // finish sending the body of a refused request.
            self.release_stream(i, len as u64);
            self.give_back_conn(len as u64);
        } else {
            s.unreleased += data.len() as u64;
            if padding > 0 {
                self.release_stream(i, padding);
                self.give_back_conn(padding);
            }
            if !data.is_empty() || end {
                self.push(Event::Data {
                    id,
                    data,
                    end_stream: end,
                });
            }
        }
        if end {
            self.close_if_done(i);
        }
        Ok(())
    }

    fn on_frame(&mut self, head: Head, p: &[u8]) -> Result<(), ConnError> {
        match head.kind {
            frame::HEADERS => self.on_headers(head, p),
            frame::CONTINUATION => self.on_continuation(head, p),
            frame::PRIORITY => {
                if head.stream == 0 {
                    return Err(fail(
                        Reason::PROTOCOL_ERROR,
                        "PRIORITY on stream 0 (RFC 9113 §6.3)",
                    ));
                }
                if p.len() != 5 {
                    return self.stream_error(head.stream, Reason::FRAME_SIZE_ERROR);
                }
                if frame::be32(p) & 0x7fff_ffff == head.stream {
                    return self.stream_error(head.stream, Reason::PROTOCOL_ERROR);
                }
                Ok(())
            }
            frame::RST_STREAM => self.on_rst(head, p),
            frame::SETTINGS => self.on_settings(head, p),
            frame::PUSH_PROMISE => Err(fail(
                Reason::PROTOCOL_ERROR,
                "PUSH_PROMISE from a client (RFC 9113 §8.4)",
            )),
            frame::PING => {
                if head.stream != 0 {
                    return Err(fail(
                        Reason::PROTOCOL_ERROR,
                        "PING on a stream (RFC 9113 §6.7)",
                    ));
                }
                if p.len() != 8 {
                    return Err(fail(
                        Reason::FRAME_SIZE_ERROR,
                        "PING not 8 bytes (RFC 9113 §6.7)",
                    ));
                }
                if head.flags & frame::ACK == 0 {
                    self.control()?;
                    frame::put_frame(&mut self.out, frame::PING, frame::ACK, 0, p);
                }
                Ok(())
            }
            frame::GOAWAY => {
                if head.stream != 0 {
                    return Err(fail(
                        Reason::PROTOCOL_ERROR,
                        "GOAWAY on a stream (RFC 9113 §6.8)",
                    ));
                }
                if p.len() < 8 {
                    return Err(fail(
                        Reason::FRAME_SIZE_ERROR,
                        "GOAWAY under 8 bytes (RFC 9113 §6.8)",
                    ));
                }
                self.goaway_recv = true;
                self.push(Event::GoAway {
                    last_stream_id: frame::be32(p) & 0x7fff_ffff,
                    code: Reason(frame::be32(&p[4..])),
                });
                Ok(())
            }
            frame::WINDOW_UPDATE => self.on_window_update(head, p),
            // Unknown frame types are ignored (RFC 9113 §4.1, §5.5).
            _ => Ok(()),
        }
    }

    fn on_headers(&mut self, head: Head, p: &[u8]) -> Result<(), ConnError> {
        let id = head.stream;
        if id == 0 || id.is_multiple_of(2) {
            return Err(fail(
                Reason::PROTOCOL_ERROR,
                "HEADERS on stream 0 or an even stream (RFC 9113 §5.1.1)",
            ));
        }
        let mut start = 0;
        let mut end = p.len();
        if head.flags & frame::PADDED != 0 {
            let pad = usize::from(*p.first().unwrap_or(&0));
            start = 1;
            if p.is_empty() || pad >= p.len() {
                return Err(fail(
                    Reason::PROTOCOL_ERROR,
                    "HEADERS padding too long (RFC 9113 §6.2)",
                ));
            }
            end = p.len() - pad;
        }
        let mut self_dependent = false;
        if head.flags & frame::PRIORITY_FLAG != 0 {
            if end < start + 5 {
                return Err(fail(
                    Reason::FRAME_SIZE_ERROR,
                    "HEADERS too short for its priority (RFC 9113 §6.2)",
                ));
            }
            self_dependent = frame::be32(&p[start..]) & 0x7fff_ffff == id;
            start += 5;
        }
        let fragment = &p[start..end];
        let end_stream = head.flags & frame::END_STREAM != 0;
        if fragment.len() > self.max_block() {
            return Err(bomb());
        }
        if head.flags & frame::END_HEADERS != 0 {
            return self.on_block(id, end_stream, self_dependent, fragment);
        }
        self.block = Some(Block {
            id,
            end_stream,
            self_dependent,
            frames: 1,
        });
        self.block_buf.clear();
        self.block_buf.extend_from_slice(fragment);
        Ok(())
    }

    /// An honest client's block is no longer than the list it decodes to
    /// (each field counts 32 bytes more there, and an encoder picks
    /// Huffman only when shorter): past the list limit and a frame, or in
    /// more frames than honest clients use, it is a CONTINUATION flood
    /// (CVE-2024-27316, CVE-2023-45288) or an HPACK bomb in the making.
    fn max_block(&self) -> usize {
        self.cfg.max_header_list_size as usize + frame::MIN_MAX_FRAME_SIZE as usize
    }

    fn check_block_size(&self) -> Result<(), ConnError> {
        let max_frames = 16 + self.max_block() / 1024;
        match &self.block {
            Some(b) if self.block_buf.len() > self.max_block() || b.frames > max_frames => {
                Err(bomb())
            }
            _ => Ok(()),
        }
    }

    fn on_continuation(&mut self, head: Head, p: &[u8]) -> Result<(), ConnError> {
        let Some(b) = &mut self.block else {
            return Err(fail(
                Reason::PROTOCOL_ERROR,
                "CONTINUATION without a header block (RFC 9113 §6.10)",
            ));
        };
        b.frames += 1;
        self.block_buf.extend_from_slice(p);
        self.check_block_size()?;
        if head.flags & frame::END_HEADERS == 0 {
            return Ok(());
        }
        let Some(b) = self.block.take() else {
            return Ok(());
        };
        let mut block = std::mem::take(&mut self.block_buf);
        let r = self.on_block(b.id, b.end_stream, b.self_dependent, &block);
        if block.capacity() <= KEEP_CAPACITY {
            block.clear();
            self.block_buf = block;
        }
        r
    }

    /// Decodes a header block, ignoring what it says: the HPACK state
    /// must follow every block (RFC 9113 §4.3).
    fn skip_block(&mut self, block: &[u8]) -> Result<(), ConnError> {
        let limit = self.cfg.max_header_list_size as usize;
        match self.decoder.decode(block, limit, &mut |_, _| {}) {
            Ok(()) | Err(DecodeError::ListTooLarge) => Ok(()),
            Err(_) => Err(compression()),
        }
    }

    fn on_block(
        &mut self,
        id: u32,
        end_stream: bool,
        self_dependent: bool,
        block: &[u8],
    ) -> Result<(), ConnError> {
        if let Some(i) = self.find(id) {
            return self.on_trailers(i, end_stream, block);
        }
        if id <= self.last_peer_id {
            self.skip_block(block)?;
            return match self.closed_how(id) {
                Some(Closed::ByUs) => Ok(()),
                Some(Closed::Other) => Err(fail(
                    Reason::STREAM_CLOSED,
                    "HEADERS on a closed stream (RFC 9113 §5.1)",
                )),
                None => Err(fail(
                    Reason::PROTOCOL_ERROR,
                    "a stream identifier below one already used (RFC 9113 §5.1.1)",
                )),
            };
        }
        self.last_peer_id = id;
        if self.goaway_sent {
            // Streams past our GOAWAY are ignored (RFC 9113 §6.8).
            self.skip_block(block)?;
            self.remember(id, Closed::ByUs);
            return Ok(());
        }
        if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
            self.skip_block(block)?;
            frame::put_rst(&mut self.out, id, Reason::REFUSED_STREAM);
            self.remember(id, Closed::ByUs);
            return Ok(());
        }
        let limit = self.cfg.max_header_list_size as usize;
        let spare = self.spare_requests.pop();
        let mut b = Builder::reusing(spare, self.cfg.enable_connect_protocol, limit, block.len());
        let r = self.decoder.decode(block, limit, &mut |n, v| b.field(n, v));
        let too_large = match r {
            Ok(()) => false,
            Err(DecodeError::ListTooLarge) => true,
            Err(_) => return Err(compression()),
        };
        if self_dependent {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        let head = if too_large {
            None
        } else {
            match b.finish() {
                Ok(r) => Some(r),
                Err(_) => return self.stream_error(id, Reason::PROTOCOL_ERROR),
            }
        };
        let content_length = head.as_deref().and_then(Request::content_length);
        if end_stream && content_length.is_some_and(|n| n != 0) {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        self.streams.push(Stream {
            id,
            recv_open: !end_stream,
            send_open: true,
            announced: true,
            queued: true,
            discard: head.is_none(),
            send_window: self.peer_initial_window,
            recv_window: i64::from(self.cfg.initial_window_size),
            pending_update: 0,
            unreleased: 0,
            content_length,
            received: 0,
        });
        match head {
            Some(h) => self.push(Event::Request {
                id,
                head: h,
                end_stream,
            }),
            None => self.push(Event::HeadersTooLarge { id }),
        }
        Ok(())
    }

    fn on_trailers(&mut self, i: usize, end_stream: bool, block: &[u8]) -> Result<(), ConnError> {
        let id = self.streams[i].id;
        let mut t = Trailers::default();
        let limit = self.cfg.max_header_list_size as usize;
        let r = self.decoder.decode(block, limit, &mut |n, v| t.field(n, v));
        let too_large = match r {
            Ok(()) => false,
            Err(DecodeError::ListTooLarge) => true,
            Err(_) => return Err(compression()),
        };
        let s = &self.streams[i];
        if !s.recv_open {
            return self.stream_error(id, Reason::STREAM_CLOSED);
        }
        // Trailers end the stream (RFC 9113 §8.1); the body is complete.
        let short = s.content_length.is_some_and(|n| n != s.received);
        if too_large || t.fault.is_some() || !end_stream || short {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        self.streams[i].recv_open = false;
        if !self.streams[i].discard {
            self.push(Event::Trailers {
                id,
                fields: t.fields,
            });
        }
        self.close_if_done(i);
        Ok(())
    }

    fn on_rst(&mut self, head: Head, p: &[u8]) -> Result<(), ConnError> {
        let id = head.stream;
        if p.len() != 4 {
            return Err(fail(
                Reason::FRAME_SIZE_ERROR,
                "RST_STREAM not 4 bytes (RFC 9113 §6.4)",
            ));
        }
        if id == 0 || self.is_idle(id) {
            return Err(fail(
                Reason::PROTOCOL_ERROR,
                "RST_STREAM on stream 0 or an idle stream (RFC 9113 §6.4)",
            ));
        }
        let Some(i) = self.find(id) else {
            return Ok(());
        };
        let code = Reason(frame::be32(p));
        let s = self.remove(i, Closed::Other);
        if s.announced {
            if s.queued {
                // Its request still waits in the queue: reset before the
                // server even saw it (Rapid Reset, CVE-2023-44487).
                self.pending_accept_resets += 1;
                if self.pending_accept_resets > self.cfg.max_pending_accept_reset_streams {
                    return Err(fail(
                        Reason::ENHANCE_YOUR_CALM,
                        "streams opened and reset at once (CVE-2023-44487)",
                    ));
                }
            }
            self.push(Event::Reset { id, code });
        }
        Ok(())
    }

    fn on_settings(&mut self, head: Head, p: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(fail(
                Reason::PROTOCOL_ERROR,
                "SETTINGS on a stream (RFC 9113 §6.5)",
            ));
        }
        if head.flags & frame::ACK != 0 {
            if !p.is_empty() {
                return Err(fail(
                    Reason::FRAME_SIZE_ERROR,
                    "a SETTINGS ACK with a payload (RFC 9113 §6.5)",
                ));
            }
            self.our_settings_acked = true;
            return Ok(());
        }
        if !p.len().is_multiple_of(6) {
            return Err(fail(
                Reason::FRAME_SIZE_ERROR,
                "SETTINGS not a multiple of 6 bytes (RFC 9113 §6.5)",
            ));
        }
        self.got_settings = true;
        self.control()?;
        for s in p.chunks_exact(6) {
            let v = frame::be32(&s[2..]);
            match u16::from_be_bytes([s[0], s[1]]) {
                frame::SETTINGS_HEADER_TABLE_SIZE => {
                    if v < self.peer_table_size {
                        let owed = self.size_update_owed.map_or(v, |o| o.min(v));
                        self.size_update_owed = Some(owed);
                    }
                    self.peer_table_size = v;
                }
                frame::SETTINGS_ENABLE_PUSH if v > 1 => {
                    return Err(fail(
                        Reason::PROTOCOL_ERROR,
                        "ENABLE_PUSH not 0 or 1 (RFC 9113 §6.5.2)",
                    ));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(fail(
                            Reason::FLOW_CONTROL_ERROR,
                            "INITIAL_WINDOW_SIZE past 2^31-1 (RFC 9113 §6.5.2)",
                        ));
                    }
                    let delta = i64::from(v) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(v);
                    for st in &mut self.streams {
                        st.send_window += delta;
                        if st.send_window > MAX_WINDOW {
                            return Err(fail(
                                Reason::FLOW_CONTROL_ERROR,
                                "a stream window past 2^31-1 (RFC 9113 §6.9.2)",
                            ));
                        }
                    }
                    if delta > 0 {
                        self.window_event(0);
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::MIN_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&v) {
                        return Err(fail(
                            Reason::PROTOCOL_ERROR,
                            "MAX_FRAME_SIZE out of range (RFC 9113 §6.5.2)",
                        ));
                    }
                    self.peer_max_frame = v as usize;
                }
                frame::SETTINGS_ENABLE_CONNECT_PROTOCOL if v > 1 => {
                    return Err(fail(
                        Reason::PROTOCOL_ERROR,
                        "ENABLE_CONNECT_PROTOCOL not 0 or 1 (RFC 8441 §3)",
                    ));
                }
                // Others, and unknown ones, are ignored (RFC 9113 §6.5.2).
                _ => {}
            }
        }
        frame::put_frame(&mut self.out, frame::SETTINGS, frame::ACK, 0, &[]);
        Ok(())
    }

    fn on_window_update(&mut self, head: Head, p: &[u8]) -> Result<(), ConnError> {
        if p.len() != 4 {
            return Err(fail(
                Reason::FRAME_SIZE_ERROR,
                "WINDOW_UPDATE not 4 bytes (RFC 9113 §6.9)",
            ));
        }
        let inc = i64::from(frame::be32(p) & 0x7fff_ffff);
        let id = head.stream;
        if id == 0 {
            if inc == 0 {
                return Err(fail(
                    Reason::PROTOCOL_ERROR,
                    "a WINDOW_UPDATE of 0 (RFC 9113 §6.9)",
                ));
            }
            self.conn_send += inc;
            if self.conn_send > MAX_WINDOW {
                return Err(fail(
                    Reason::FLOW_CONTROL_ERROR,
                    "the connection window past 2^31-1 (RFC 9113 §6.9.1)",
                ));
            }
            self.window_event(0);
            return Ok(());
        }
        if self.is_idle(id) {
            return Err(fail(
                Reason::PROTOCOL_ERROR,
                "WINDOW_UPDATE on an idle stream (RFC 9113 §5.1)",
            ));
        }
        let Some(i) = self.find(id) else {
            return Ok(());
        };
        if inc == 0 {
            return self.stream_error(id, Reason::PROTOCOL_ERROR);
        }
        let s = &mut self.streams[i];
        s.send_window += inc;
        if s.send_window > MAX_WINDOW {
            return self.stream_error(id, Reason::FLOW_CONTROL_ERROR);
        }
        if s.send_open {
            self.window_event(id);
        }
        Ok(())
    }

    /// The PING/SETTINGS budget: a token bucket of `max_control_frames`
    /// refilled at a tenth of it per second (as the server's guard did).
    fn control(&mut self) -> Result<(), ConnError> {
        let max = u64::from(self.cfg.max_control_frames);
        if max == 0 {
            return Ok(());
        }
        let now = Instant::now();
        if let Some(then) = self.ctrl_refilled {
            let ms = now.duration_since(then).as_millis() as u64;
            let refill = ms.saturating_mul(max) / 10;
            self.ctrl_tokens = self.ctrl_tokens.saturating_add(refill).min(max * 1000);
        }
        self.ctrl_refilled = Some(now);
        if self.ctrl_tokens < 1000 {
            return Err(fail(
                Reason::ENHANCE_YOUR_CALM,
                "a PING/SETTINGS flood (CVE-2019-9512, CVE-2019-9515)",
            ));
        }
        self.ctrl_tokens -= 1000;
        Ok(())
    }

    /// Queues a response head or trailers: `block` is an HPACK block
    /// ([`hpack::Encoder`]), split into HEADERS and CONTINUATION frames at
    /// the client's frame size, with a table size update in front when
    /// one is owed (RFC 7541 §4.2). Ignored on a stream that is gone.
    pub fn send_headers(&mut self, id: u32, block: &[u8], end_stream: bool) {
        if self.error.is_some() {
            return;
        }
        let Some(i) = self.find(id) else { return };
        if !self.streams[i].send_open {
            return;
        }
        let prefixed: Vec<u8>;
        let mut block = block;
        if let Some(size) = self.size_update_owed.take() {
            let mut p = Vec::with_capacity(block.len() + 5);
            hpack::Encoder::size_update(&mut p, size as usize);
            p.extend_from_slice(block);
            prefixed = p;
            block = &prefixed;
        }
        let max = self.peer_max_frame;
        let mut kind = frame::HEADERS;
        let mut flags = if end_stream { frame::END_STREAM } else { 0 };
        loop {
            let n = block.len().min(max);
            let (now, rest) = block.split_at(n);
            if rest.is_empty() {
                flags |= frame::END_HEADERS;
            }
            frame::put_frame(&mut self.out, kind, flags, id, now);
            block = rest;
            if block.is_empty() {
                break;
            }
            kind = frame::CONTINUATION;
            flags = 0;
        }
        if end_stream {
            self.streams[i].send_open = false;
            self.close_if_done(i);
        }
    }

    /// Trailers: HEADERS with END_STREAM.
    pub fn send_trailers(&mut self, id: u32, block: &[u8]) {
        self.send_headers(id, block, true);
    }

    /// The body bytes stream `id` may send now: the smaller of its window
    /// and the connection's; 0 once it is gone or ended.
    pub fn send_window(&self, id: u32) -> usize {
        if self.error.is_some() {
            return 0;
        }
        match self.find(id) {
            Some(i) if self.streams[i].send_open => {
                self.streams[i].send_window.min(self.conn_send).max(0) as usize
            }
            _ => 0,
        }
    }

    /// Queues DATA frames for as much of `data` as the windows allow
    /// (frames of the client's max frame size); returns the bytes taken.
    /// END_STREAM goes on the last frame if all of `data` was taken
    /// (`data` may be empty to end the stream).
    pub fn send_data(&mut self, id: u32, data: &[u8], end_stream: bool) -> usize {
        self.data_frames(id, data.len(), end_stream, |out, from, k| {
            out.extend_from_slice(&data[from..from + k]);
        })
    }

    /// [`Conn::send_data`] for a body in a shared buffer (a cached file):
    /// what it takes is cut from the front of `data`, and each frame's
    /// payload goes out from that buffer, after its frame header, without
    /// being copied into the output ([`Conn::output_vectored`]). Flow
    /// control, frame sizes and the order of frames are as with
    /// `send_data`.
    pub fn send_data_shared(&mut self, id: u32, data: &mut Bytes, end_stream: bool) -> usize {
        let mut spliced = std::mem::take(&mut self.spliced);
        let mut spliced_len = 0;
        let mut taken = 0;
        let n = self.data_frames(id, data.len(), end_stream, |out, from, k| {
            debug_assert_eq!(from, taken);
            taken += k;
            let piece = if k == data.len() {
                std::mem::take(data)
            } else {
                data.split_to(k)
            };
            if k < SPLICE_MIN {
                out.extend_from_slice(&piece);
            } else {
                spliced.push_back((out.len(), piece));
                spliced_len += k;
            }
        });
        self.spliced = spliced;
        self.spliced_len += spliced_len;
        n
    }

    /// DATA frames for `len` bytes of a body (as much as the windows
    /// allow); `payload(out, from, k)` appends bytes `from..from + k` of
    /// it after each frame header (or has them go out there).
    fn data_frames(
        &mut self,
        id: u32,
        len: usize,
        end_stream: bool,
        mut payload: impl FnMut(&mut Vec<u8>, usize, usize),
    ) -> usize {
        let window = self.send_window(id);
        let Some(i) = self.find(id) else { return 0 };
        if !self.streams[i].send_open {
            return 0;
        }
        let n = len.min(window);
        let ends = end_stream && n == len;
        let max = self.peer_max_frame.min(self.data_frame_cap).max(1);
        let mut from = 0;
        while from < n || (ends && n == 0) {
            let k = (n - from).min(max);
            let last = from + k == n;
            let flags = if last && ends { frame::END_STREAM } else { 0 };
            frame::put_head(&mut self.out, k, frame::DATA, flags, id);
            if k > 0 {
                payload(&mut self.out, from, k);
            }
            from += k;
            if last {
                break;
            }
        }
        let s = &mut self.streams[i];
        s.send_window -= n as i64;
        self.conn_send -= n as i64;
        if ends {
            s.send_open = false;
            self.close_if_done(i);
        }
        n
    }

    /// DATA payloads at most `n` bytes (besides the client's max frame
    /// size): e.g. 16,384 - 9 over TLS, so that a frame and its header
    /// fill one TLS record and no frame straddles two.
    pub fn set_max_data_frame(&mut self, n: usize) {
        self.data_frame_cap = n.max(1);
    }

    /// The handler consumed `n` body bytes of stream `id`: they are given
    /// back to the client in WINDOW_UPDATEs, batched (once half a window
    /// is free). Unknown streams are ignored: a stream's unreleased bytes
    /// go back to the connection when it ends.
    pub fn release(&mut self, id: u32, n: usize) {
        let Some(i) = self.find(id) else { return };
        let n = (n as u64).min(self.streams[i].unreleased);
        self.streams[i].unreleased -= n;
        self.release_stream(i, n);
        self.give_back_conn(n);
    }

    fn release_stream(&mut self, i: usize, n: u64) {
        let half = self.cfg.initial_window_size / 2;
        let s = &mut self.streams[i];
        if !s.recv_open {
            return;
        }
        s.pending_update = s.pending_update.saturating_add(n as u32);
        if s.pending_update >= half.max(1) {
            frame::put_window_update(&mut self.out, s.id, s.pending_update);
            s.recv_window += i64::from(s.pending_update);
            s.pending_update = 0;
        }
    }

    /// RST_STREAM from us (e.g. CANCEL, or NO_ERROR after a complete
    /// response to stop an unread request body, RFC 9113 §8.1). The
    /// stream's events still in the queue are dropped: none names it
    /// after this.
    pub fn reset(&mut self, id: u32, code: Reason) {
        // After this, no event names the stream (even when the
        // connection failed meanwhile).
        self.events.retain(|e| e.stream_id() != Some(id));
        if self.error.is_some() {
            return;
        }
        if let Some(i) = self.find(id) {
            frame::put_rst(&mut self.out, id, code);
            self.remove(i, Closed::ByUs);
        }
    }

    /// GOAWAY with the last stream we took. NO_ERROR is graceful: the
    /// streams in progress finish, new ones are ignored; any other code
    /// closes the connection at once.
    pub fn go_away(&mut self, code: Reason) {
        if self.error.is_some() || (self.goaway_sent && code == Reason::NO_ERROR) {
            return;
        }
        frame::put_goaway(&mut self.out, self.last_peer_id, code);
        self.goaway_sent = true;
        if code != Reason::NO_ERROR {
            self.error = Some(ConnError {
                code,
                what: "closed by the server",
            });
        }
    }

    /// The next bytes to write: the output up to the first body piece
    /// sent from a shared buffer, or that piece (empty only when nothing
    /// is left to write). Write it, [`Conn::consume_output`] what went,
    /// and ask again; or write [`Conn::output_vectored`] at once.
    pub fn output(&self) -> &[u8] {
        match self.spliced.front() {
            Some((at, b)) if *at == self.out_pos => b,
            Some((at, _)) => &self.out[self.out_pos..*at],
            None => &self.out[self.out_pos..],
        }
    }

    /// Bytes left to write, in all.
    pub fn output_len(&self) -> usize {
        self.out.len() - self.out_pos + self.spliced_len
    }

    /// The bytes to write, in order, as up to `dst.len()` slices (for a
    /// vectored write); returns how many it filled.
    pub fn output_vectored<'a>(&'a self, dst: &mut [std::io::IoSlice<'a>]) -> usize {
        let cap = dst.len();
        let mut n = 0;
        let mut pos = self.out_pos;
        let mut put = |s: &'a [u8], n: &mut usize| {
            if !s.is_empty() && *n < cap {
                dst[*n] = std::io::IoSlice::new(s);
                *n += 1;
            }
        };
        for (at, b) in &self.spliced {
            put(&self.out[pos..*at], &mut n);
            put(b, &mut n);
            pos = *at;
            if n >= cap {
                return n;
            }
        }
        put(&self.out[pos..], &mut n);
        n
    }

    /// `n` bytes of the output were written.
    pub fn consume_output(&mut self, mut n: usize) {
        while n > 0 {
            match self.spliced.front_mut() {
                Some((at, b)) if *at == self.out_pos => {
                    let k = n.min(b.len());
                    b.advance(k);
                    self.spliced_len -= k;
                    n -= k;
                    if b.is_empty() {
                        self.spliced.pop_front();
                    }
                }
                Some((at, _)) => {
                    let k = n.min(*at - self.out_pos);
                    self.out_pos += k;
                    n -= k;
                }
                None => {
                    self.out_pos = (self.out_pos + n).min(self.out.len());
                    n = 0;
                }
            }
        }
        if self.out_pos == self.out.len() {
            let written = self.out_pos;
            self.out.clear();
            self.out_pos = 0;
            for (at, _) in &mut self.spliced {
                *at -= written;
            }
            if self.out.capacity() > KEEP_CAPACITY {
                // An idle connection keeps no large buffer (a body written
                // through it grew this one).
                self.out = Vec::new();
            }
        } else if self.out_pos >= KEEP_CAPACITY && self.out_pos * 2 >= self.out.len() {
            // Most of it is written: what is left moves down, once.
            let written = self.out_pos;
            self.out.drain(..written);
            self.out_pos = 0;
            for (at, _) in &mut self.spliced {
                *at -= written;
            }
        }
    }

    /// Gives back the memory an idle connection does not need: the
    /// output, event and stream buffers once empty, the header block
    /// buffer (call when nothing is in progress; the HPACK table stays,
    /// as the client's encoder counts on it).
    pub fn shrink_idle(&mut self) {
        if self.out.is_empty() && self.out_pos == 0 {
            self.out = Vec::new();
        }
        if self.spliced.is_empty() {
            self.spliced = VecDeque::new();
        }
        if self.block.is_none() {
            self.block_buf = Vec::new();
        }
        if self.events.is_empty() {
            self.events = VecDeque::new();
        }
        if self.streams.is_empty() {
            self.streams = Vec::new();
        }
        if self.block.is_none() {
            self.decoder.shrink_idle();
        }
        self.spare_requests = Vec::new();
    }

    /// Gives a request back once its head was read (copied out): a later
    /// request head is decoded into its box and buffers instead of three
    /// new allocations. Up to 16 are kept (more than one read brings at
    /// `h2load -m 10`), and no large one.
    pub fn recycle(&mut self, req: Box<Request>) {
        if self.spare_requests.len() < SPARE_REQUESTS && req.held() <= RECYCLE_MAX {
            self.spare_requests.push(req);
        }
    }

    /// Nothing in progress: no stream open, no header block half read, no
    /// event or output waiting, no GOAWAY either way and no error. Such a
    /// connection can be set aside (its state kept, its buffers given
    /// back with [`Conn::shrink_idle`]) until the client sends again.
    pub fn at_rest(&self) -> bool {
        self.streams.is_empty()
            && self.block.is_none()
            && self.events.is_empty()
            && self.out.len() == self.out_pos
            && self.spliced.is_empty()
            && !self.goaway_sent
            && !self.goaway_recv
            && self.error.is_none()
    }

    /// Output waits past [`OUTPUT_HIGH`]: write before reading more
    /// (`recv` takes no frames meanwhile).
    pub fn backlogged(&self) -> bool {
        self.output_len() >= OUTPUT_HIGH
    }

    /// Streams open or half-closed.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Nothing more will happen: a connection error or a GOAWAY with an
    /// error code, or a GOAWAY (ours or the client's) and no stream left.
    pub fn is_closed(&self) -> bool {
        self.error.is_some() || ((self.goaway_sent || self.goaway_recv) && self.streams.is_empty())
    }

    /// The highest stream the client opened.
    pub fn last_stream_id(&self) -> u32 {
        self.last_peer_id
    }
}

fn fail(code: Reason, what: &'static str) -> ConnError {
    ConnError { code, what }
}

fn bomb() -> ConnError {
    fail(
        Reason::ENHANCE_YOUR_CALM,
        "a header block past any honest size: CONTINUATION flood or HPACK bomb (CVE-2024-27316, CVE-2016-6581)",
    )
}

fn compression() -> ConnError {
    fail(
        Reason::COMPRESSION_ERROR,
        "a header block that does not decode (RFC 9113 §4.3)",
    )
}
