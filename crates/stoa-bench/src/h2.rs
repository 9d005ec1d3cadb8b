//! HTTP/2 for the load generator (RFC 9113): a sans-IO client side of one
//! connection, on the workspace's own frame helpers and HPACK (stoa-h2).
//!
//! Why not the `h2` crate: it runs on tokio's I/O traits and spawns no
//! work of its own only inside a runtime; the engine is one mio loop per
//! thread that owns its sockets, and a request must cost a few hundred
//! nanoseconds of client time. stoa-h2's decoder and stateless encoder fit:
//! a request's header block is encoded once before the run and sent as it
//! is on every stream of every connection (no dynamic table insertions,
//! RFC 7541 §6.2.2), so the per-request work is a frame header and a copy.
//!
//! A connection carries one request at a time ([`H2Conn::start`],
//! h2load's `-m 1`: the engine's client is a connection) or several
//! ([`H2Conn::open`], `--max-concurrent-streams`), never more than the
//! server's SETTINGS_MAX_CONCURRENT_STREAMS ([`H2Conn::can_open`]: the
//! engine queues the rest). Request bodies go as the server's send
//! windows allow (RFC 9113 §6.9); what they hold back is copied once and
//! sent from WINDOW_UPDATE and SETTINGS into [`H2Conn::out`].

use stoa_h2::frame::{self, Head, HEAD_LEN};
use stoa_h2::hpack::Decoder;

/// The window we give the server, per stream and for the connection
/// (h2load's `-w 30 -W 30`): 2^30 - 1 bytes, topped up at half.
const WINDOW: u32 = (1 << 30) - 1;
/// Largest response header list accepted (RFC 9113 §6.5.2).
const MAX_HEADER_LIST: usize = 64 * 1024;
/// Our SETTINGS_HEADER_TABLE_SIZE: the default (RFC 7541 §4.2).
const TABLE_SIZE: usize = 4096;

/// A request as HTTP/2 sends it: the header block (encoded once) and the
/// body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H2Request {
    pub block: Vec<u8>,
    pub body: Vec<u8>,
}

/// Fields of HTTP/1 that HTTP/2 and HTTP/3 forbid (RFC 9113 §8.2.2, RFC
/// 9114 §4.2) or carry as a pseudo-header (`Host` becomes `:authority`).
fn dropped(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// A serialized HTTP/1 request taken apart for HTTP/2 and HTTP/3: every
/// way the CLI and scenarios build requests (-H, -C, -A, mixes, form
/// bodies) gives the same request over every version.
pub(crate) struct Split<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// From `Host`.
    pub authority: Option<&'a str>,
    /// Lowercase names, the connection-specific ones left out.
    pub fields: Vec<(String, &'a str)>,
    pub body: &'a [u8],
}

/// `bytes` (its last `body_len` bytes the body) as a [`Split`].
pub(crate) fn split_h1(bytes: &[u8], body_len: usize) -> Result<Split<'_>, String> {
    let at = bytes.len().saturating_sub(body_len);
    let (head, body) = bytes.split_at(at);
    let text = std::str::from_utf8(head).map_err(|_| "a request head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(format!("bad request line {line:?}"));
    };
    let mut authority = None;
    let mut fields = Vec::new();
    for l in lines {
        let Some((name, value)) = l.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("host") {
            authority = Some(value);
        } else if !dropped(name) {
            fields.push((name.to_ascii_lowercase(), value));
        }
    }
    Ok(Split {
        method,
        path,
        authority,
        fields,
        body,
    })
}

impl H2Request {
    /// The HTTP/2 form of a serialized HTTP/1 request (`bytes`, its last
    /// `body_len` bytes the body): the request line and headers become
    /// `:method`, `:scheme`, `:authority`, `:path` and lowercase fields.
    pub fn from_h1(bytes: &[u8], body_len: usize, scheme: &str) -> Result<H2Request, String> {
        let r = split_h1(bytes, body_len)?;
        let mut block = Vec::new();
        use stoa_h2::hpack::Encoder;
        Encoder::field(&mut block, b":method", r.method.as_bytes());
        Encoder::field(&mut block, b":scheme", scheme.as_bytes());
        if let Some(a) = r.authority {
            Encoder::field(&mut block, b":authority", a.as_bytes());
        }
        Encoder::field(&mut block, b":path", r.path.as_bytes());
        for (n, v) in &r.fields {
            Encoder::field(&mut block, n.as_bytes(), v.as_bytes());
        }
        Ok(H2Request {
            block,
            body: r.body.to_vec(),
        })
    }
}

/// Why a response failed on HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Error {
    /// RST_STREAM on the request's stream (RFC 9113 §6.4).
    Reset,
    /// GOAWAY that leaves the request out (its stream id above the last
    /// one the server will process, §6.8): it was not processed and may be
    /// sent again on a new connection.
    Refused,
    /// A connection error: bad frame, header block or sequence.
    Protocol,
}

/// The response on the current stream.
#[derive(Debug, Default, Clone, Copy)]
pub struct Response {
    /// The final status (0 until its HEADERS).
    pub status: u16,
    pub body: u64,
    pub done: bool,
}

/// A stream of a connection that carries several at once
/// (`--max-concurrent-streams`), and what it is for the engine.
#[derive(Debug, Clone, Copy)]
pub struct Stream {
    pub id: u32,
    /// The engine's request (its client's slot).
    pub tag: usize,
    pub resp: Response,
    /// RST_STREAM, or a GOAWAY that leaves it out.
    pub err: Option<H2Error>,
}

/// A request body still being sent: what the send windows (RFC 9113
/// §6.9) held back, copied once when they did.
struct Sending {
    id: u32,
    /// The stream's send window (may go below zero when the server lowers
    /// SETTINGS_INITIAL_WINDOW_SIZE, §6.9.2).
    win: i64,
    body: Vec<u8>,
    off: usize,
}

/// The client side of one HTTP/2 connection.
pub struct H2Conn {
    /// The engine's connection generation this state belongs to.
    pub gen: u32,
    started: bool,
    next_id: u32,
    /// The stream of the request in progress (0: none).
    cur: u32,
    pub resp: Response,
    dec: Decoder,
    /// Bytes of a frame not complete yet.
    partial: Vec<u8>,
    /// A header block being assembled (HEADERS + CONTINUATION) and its
    /// stream and END_STREAM flag.
    block: Vec<u8>,
    block_of: Option<(u32, bool)>,
    /// Frames for the server (SETTINGS ACK, PING ACK, WINDOW_UPDATE).
    pub out: Vec<u8>,
    /// Bytes received on the connection and on the current stream since
    /// the last WINDOW_UPDATE.
    conn_unacked: u32,
    stream_unacked: u32,
    /// The server sent GOAWAY: no new request on this connection.
    pub goaway: bool,
    /// The `server` field of the first response.
    pub server: Option<Vec<u8>>,
    /// The server's SETTINGS_MAX_FRAME_SIZE (what our frames may carry).
    max_frame: usize,
    /// The last header block decoded with the dynamic table empty before
    /// and after, and its `:status`: the same bytes decode to the same
    /// fields then (RFC 7541 §2.3: only the dynamic table is state), so a
    /// server that sends the same head again (all but `date` is, and the
    /// date changes once a second) is not decoded again. Huffman decoding
    /// was half of the client's instructions per h2c request (callgrind).
    last_block: Vec<u8>,
    last_status: u16,
    /// Several requests at once ([`H2Conn::open`]): the open streams.
    pub streams: Vec<Stream>,
    /// The server's SETTINGS arrived (the first frame it sends, §3.4).
    settings_seen: bool,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (§5.1.2; unlimited
    /// until it says otherwise), as last announced.
    pub max_streams: u32,
    /// The lowest limit the server announced on this connection.
    pub min_max_streams: u32,
    /// The connection's send window and the server's
    /// SETTINGS_INITIAL_WINDOW_SIZE, which new streams start with (§6.9).
    send_conn: i64,
    peer_initial: i64,
    /// Request bodies waiting for window.
    sending: Vec<Sending>,
}

impl H2Conn {
    pub fn new(gen: u32) -> H2Conn {
        H2Conn {
            gen,
            started: false,
            next_id: 1,
            cur: 0,
            resp: Response::default(),
            dec: Decoder::new(TABLE_SIZE),
            partial: Vec::new(),
            block: Vec::new(),
            block_of: None,
            out: Vec::new(),
            conn_unacked: 0,
            stream_unacked: 0,
            goaway: false,
            server: None,
            max_frame: frame::MIN_MAX_FRAME_SIZE as usize,
            last_block: Vec::new(),
            last_status: 0,
            streams: Vec::new(),
            settings_seen: false,
            max_streams: u32::MAX,
            min_max_streams: u32::MAX,
            send_conn: i64::from(frame::DEFAULT_WINDOW),
            peer_initial: i64::from(frame::DEFAULT_WINDOW),
            sending: Vec::new(),
        }
    }

    /// Whether one more stream may open now ([`H2Conn::open`]): fewer are
    /// open than the server's SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113
    /// §5.1.2). Until its SETTINGS arrive, one: the limit is not known,
    /// and a server over its limit refuses streams (REFUSED_STREAM).
    pub fn can_open(&self) -> bool {
        if self.goaway {
            return false;
        }
        let limit = if self.settings_seen {
            self.max_streams
        } else {
            1
        };
        (self.streams.len() as u64) < u64::from(limit)
    }

    /// Request body bytes still waiting for the server's window.
    pub fn body_pending(&self) -> usize {
        self.sending.iter().map(|s| s.body.len() - s.off).sum()
    }

    /// Writes into `out` (cleared first) what opens `req` on a new stream:
    /// on a new connection the preface, our SETTINGS and the connection's
    /// window first; any control frames owed; HEADERS (CONTINUATION past
    /// the frame size) and the body's DATA.
    pub fn start(&mut self, req: &H2Request, out: &mut Vec<u8>) {
        out.clear();
        // The last response came before its request's whole body.
        if let Some(s) = self.sending.first() {
            let id = s.id;
            self.stop_sending(id);
        }
        self.preface(out);
        let id = self.next_id;
        self.next_id += 2;
        self.cur = id;
        self.resp = Response::default();
        self.stream_unacked = 0;
        self.put_request(req, out, id);
    }

    /// Appends to `out` what opens `req` on a new stream of a connection
    /// that carries several at once; `tag` names it in
    /// [`H2Conn::streams`] and [`H2Conn::forget`].
    pub fn open(&mut self, req: &H2Request, out: &mut Vec<u8>, tag: usize) {
        self.preface(out);
        let id = self.next_id;
        self.next_id += 2;
        self.streams.push(Stream {
            id,
            tag,
            resp: Response::default(),
            err: None,
        });
        self.put_request(req, out, id);
    }

    /// The request `tag` was given up (a timeout): frames of its stream
    /// are ignored from now on.
    pub fn forget(&mut self, tag: usize) {
        let mut gone = Vec::new();
        self.streams.retain(|s| {
            if s.tag == tag {
                gone.push(s.id);
            }
            s.tag != tag
        });
        for id in gone {
            self.stop_sending(id);
        }
    }

    /// Stream `id` ended (a response, a reset) or was given up: a body
    /// still being sent stops, and the stream is reset (CANCEL, §8.1: a
    /// response may come before the whole request) unless the server
    /// reset it already.
    fn stop_sending(&mut self, id: u32) {
        if let Some(i) = self.sending.iter().position(|s| s.id == id) {
            self.sending.swap_remove(i);
            frame::put_rst(&mut self.out, id, frame::Reason::CANCEL);
        }
    }

    /// Moves the streams that ended (complete or failed) to `done`.
    pub fn take_ended(&mut self, done: &mut Vec<Stream>) {
        let before = done.len();
        self.streams.retain(|s| {
            let ended = s.resp.done || s.err.is_some();
            if ended {
                done.push(*s);
            }
            !ended
        });
        if !self.sending.is_empty() {
            let ended: Vec<(u32, bool)> = done[before..]
                .iter()
                .map(|s| (s.id, s.err.is_some()))
                .collect();
            for (id, reset) in ended {
                if reset {
                    self.sending.retain(|s| s.id != id);
                } else {
                    self.stop_sending(id);
                }
            }
        }
    }

    /// The response of stream `id`, if it is one of ours still open.
    fn resp_of(&mut self, id: u32) -> Option<&mut Response> {
        if id == 0 {
            return None;
        }
        if id == self.cur {
            return Some(&mut self.resp);
        }
        self.streams
            .iter_mut()
            .find(|s| s.id == id && s.err.is_none())
            .map(|s| &mut s.resp)
    }

    /// On a new connection: the preface, our SETTINGS and the connection's
    /// window; then the control frames owed.
    fn preface(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            out.extend_from_slice(frame::PREFACE);
            let mut s = Vec::with_capacity(18);
            for (id, v) in [
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, WINDOW),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST as u32),
            ] {
                s.extend_from_slice(&id.to_be_bytes());
                s.extend_from_slice(&v.to_be_bytes());
            }
            frame::put_frame(out, frame::SETTINGS, 0, 0, &s);
            frame::put_window_update(out, 0, WINDOW - frame::DEFAULT_WINDOW);
        }
        out.append(&mut self.out);
    }

    fn put_request(&mut self, req: &H2Request, out: &mut Vec<u8>, id: u32) {
        let end = if req.body.is_empty() {
            frame::END_STREAM
        } else {
            0
        };
        let mut chunks = req.block.chunks(self.max_frame);
        let first = chunks.next().unwrap_or_default();
        let rest = req.block.len() > first.len();
        let flags = end | if rest { 0 } else { frame::END_HEADERS };
        frame::put_frame(out, frame::HEADERS, flags, id, first);
        let mut chunks = chunks.peekable();
        while let Some(c) = chunks.next() {
            let last = chunks.peek().is_none();
            let f = if last { frame::END_HEADERS } else { 0 };
            frame::put_frame(out, frame::CONTINUATION, f, id, c);
        }
        if req.body.is_empty() {
            return;
        }
        // As much of the body as the windows allow (§6.9.1); the rest,
        // copied, waits for WINDOW_UPDATE or a larger initial window.
        let mut win = self.peer_initial;
        let off = self.put_data(out, id, &mut win, &req.body, 0);
        if off < req.body.len() {
            self.sending.push(Sending {
                id,
                win,
                body: req.body[off..].to_vec(),
                off: 0,
            });
        }
    }

    /// Appends DATA frames of `body[off..]` on stream `id`, each within
    /// the server's SETTINGS_MAX_FRAME_SIZE (§4.2), while the stream's
    /// window (`win`) and the connection's allow; END_STREAM on the last.
    /// Returns the new offset.
    fn put_data(
        &mut self,
        out: &mut Vec<u8>,
        id: u32,
        win: &mut i64,
        body: &[u8],
        mut off: usize,
    ) -> usize {
        while off < body.len() {
            let room = (*win).min(self.send_conn);
            if room <= 0 {
                break;
            }
            let n = (body.len() - off)
                .min(self.max_frame)
                .min(usize::try_from(room).unwrap_or(usize::MAX));
            let end = off + n == body.len();
            let f = if end { frame::END_STREAM } else { 0 };
            frame::put_frame(out, frame::DATA, f, id, &body[off..off + n]);
            off += n;
            *win -= n as i64;
            self.send_conn -= n as i64;
        }
        off
    }

    /// Sends what the windows now allow of the bodies waiting, into
    /// [`H2Conn::out`] (after a WINDOW_UPDATE or a SETTINGS).
    fn pump(&mut self) {
        let mut sending = std::mem::take(&mut self.sending);
        let mut out = std::mem::take(&mut self.out);
        sending.retain_mut(|s| {
            let mut win = s.win;
            s.off = self.put_data(&mut out, s.id, &mut win, &s.body, s.off);
            s.win = win;
            s.off < s.body.len()
        });
        self.out = out;
        self.sending = sending;
    }

    /// Takes bytes from the server; updates [`H2Conn::resp`] (and queues
    /// control frames in [`H2Conn::out`]).
    pub fn feed(&mut self, data: &[u8]) -> Result<(), H2Error> {
        if self.partial.is_empty() {
            let n = self.frames(data)?;
            self.partial.extend_from_slice(&data[n..]);
        } else {
            let mut buf = std::mem::take(&mut self.partial);
            buf.extend_from_slice(data);
            let n = self.frames(&buf);
            buf.drain(..*n.as_ref().unwrap_or(&0));
            self.partial = buf;
            n?;
        }
        Ok(())
    }

    /// Handles the whole frames at the start of `b`; returns the bytes used.
    fn frames(&mut self, b: &[u8]) -> Result<usize, H2Error> {
        let mut pos = 0;
        while b.len() - pos >= HEAD_LEN {
            let mut hb = [0u8; HEAD_LEN];
            hb.copy_from_slice(&b[pos..pos + HEAD_LEN]);
            let h = Head::parse(&hb);
            // We advertise no larger SETTINGS_MAX_FRAME_SIZE (§4.2).
            if h.len > frame::MIN_MAX_FRAME_SIZE as usize {
                return Err(H2Error::Protocol);
            }
            if b.len() - pos - HEAD_LEN < h.len {
                break;
            }
            let p = &b[pos + HEAD_LEN..pos + HEAD_LEN + h.len];
            pos += HEAD_LEN + h.len;
            self.frame(h, p)?;
        }
        Ok(pos)
    }

    fn frame(&mut self, h: Head, p: &[u8]) -> Result<(), H2Error> {
        // §6.10: nothing but CONTINUATION inside a header block.
        if self.block_of.is_some() && h.kind != frame::CONTINUATION {
            return Err(H2Error::Protocol);
        }
        match h.kind {
            frame::DATA => {
                let len = h.len as u32;
                self.conn_unacked += len;
                if self.conn_unacked >= WINDOW / 2 {
                    frame::put_window_update(&mut self.out, 0, self.conn_unacked);
                    self.conn_unacked = 0;
                }
                if h.stream == self.cur && self.cur != 0 {
                    // One stream at a time: its window is topped up too
                    // (several at once: each gets 2^30 - 1 bytes, the
                    // largest response they may carry).
                    self.stream_unacked += len;
                    if self.stream_unacked >= WINDOW / 2 {
                        frame::put_window_update(&mut self.out, self.cur, self.stream_unacked);
                        self.stream_unacked = 0;
                    }
                }
                let data = unpad(h.flags, p)?;
                if let Some(r) = self.resp_of(h.stream) {
                    r.body += data.len() as u64;
                    if h.flags & frame::END_STREAM != 0 {
                        r.done = true;
                    }
                }
            }
            frame::HEADERS => {
                let mut data = unpad(h.flags, p)?;
                if h.flags & frame::PRIORITY_FLAG != 0 {
                    data = data.get(5..).ok_or(H2Error::Protocol)?;
                }
                self.block.clear();
                self.block.extend_from_slice(data);
                let end_stream = h.flags & frame::END_STREAM != 0;
                if h.flags & frame::END_HEADERS != 0 {
                    self.head(h.stream, end_stream)?;
                } else {
                    self.block_of = Some((h.stream, end_stream));
                }
            }
            frame::CONTINUATION => {
                let Some((stream, end_stream)) = self.block_of else {
                    return Err(H2Error::Protocol);
                };
                if stream != h.stream || self.block.len() + p.len() > MAX_HEADER_LIST {
                    return Err(H2Error::Protocol);
                }
                self.block.extend_from_slice(p);
                if h.flags & frame::END_HEADERS != 0 {
                    self.block_of = None;
                    self.head(stream, end_stream)?;
                }
            }
            frame::RST_STREAM => {
                self.sending.retain(|s| s.id != h.stream);
                // REFUSED_STREAM: not processed, safe to send again
                // (RFC 9113 §8.7).
                let code = p.get(..4).map_or(0, frame::be32);
                let err = if code == frame::Reason::REFUSED_STREAM.0 {
                    H2Error::Refused
                } else {
                    H2Error::Reset
                };
                if h.stream == self.cur && self.cur != 0 && !self.resp.done {
                    return Err(err);
                }
                if let Some(s) = self.streams.iter_mut().find(|s| s.id == h.stream) {
                    if !s.resp.done {
                        s.err = Some(err);
                    }
                }
            }
            frame::WINDOW_UPDATE => {
                let inc = i64::from(p.get(..4).map_or(0, frame::be32) & 0x7fff_ffff);
                if p.len() != 4 {
                    return Err(H2Error::Protocol);
                }
                if h.stream == 0 {
                    self.send_conn += inc;
                    if self.send_conn > frame::MAX_WINDOW {
                        return Err(H2Error::Protocol);
                    }
                } else if let Some(s) = self.sending.iter_mut().find(|s| s.id == h.stream) {
                    s.win += inc;
                }
                if !self.sending.is_empty() {
                    self.pump();
                }
            }
            frame::SETTINGS if h.flags & frame::ACK == 0 => {
                if !p.len().is_multiple_of(6) {
                    return Err(H2Error::Protocol);
                }
                for s in p.chunks(6) {
                    let id = u16::from_be_bytes([s[0], s[1]]);
                    let v = frame::be32(&s[2..]);
                    match id {
                        frame::SETTINGS_MAX_FRAME_SIZE => {
                            self.max_frame = v
                                .clamp(frame::MIN_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE)
                                as usize;
                        }
                        frame::SETTINGS_MAX_CONCURRENT_STREAMS => {
                            self.max_streams = v;
                            self.min_max_streams = self.min_max_streams.min(v);
                        }
                        frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                            // §6.9.2: the difference applies to every
                            // open stream's window, below zero if need be.
                            if i64::from(v) > frame::MAX_WINDOW {
                                return Err(H2Error::Protocol);
                            }
                            let delta = i64::from(v) - self.peer_initial;
                            self.peer_initial = i64::from(v);
                            for s in &mut self.sending {
                                s.win += delta;
                            }
                        }
                        _ => {}
                    }
                }
                self.settings_seen = true;
                frame::put_frame(&mut self.out, frame::SETTINGS, frame::ACK, 0, &[]);
                if !self.sending.is_empty() {
                    self.pump();
                }
            }
            frame::PING if h.flags & frame::ACK == 0 => {
                frame::put_frame(&mut self.out, frame::PING, frame::ACK, 0, p);
            }
            frame::GOAWAY => {
                self.goaway = true;
                let last = p.get(..4).map_or(0, frame::be32) & 0x7fff_ffff;
                for s in &mut self.streams {
                    if s.id > last && !s.resp.done {
                        s.err = Some(H2Error::Refused);
                    }
                }
                if self.cur > last && !self.resp.done {
                    return Err(H2Error::Refused);
                }
            }
            // PRIORITY and unknown types are ignored (§5.5); PUSH_PROMISE
            // is off by our SETTINGS.
            frame::PUSH_PROMISE => return Err(H2Error::Protocol),
            _ => {}
        }
        Ok(())
    }

    /// A complete header block on `stream`.
    fn head(&mut self, stream: u32, end_stream: bool) -> Result<(), H2Error> {
        let mut status = 0u16;
        let mut server = None;
        let empty_before = self.dec.table_len() == 0;
        if empty_before && !self.last_block.is_empty() && self.block == self.last_block {
            status = self.last_status;
        } else {
            let want_server = self.server.is_none();
            let block = std::mem::take(&mut self.block);
            let r = self.dec.decode(&block, MAX_HEADER_LIST, &mut |n, v| {
                if n == b":status" {
                    status = std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                } else if want_server && n == b"server" {
                    server = Some(v.to_vec());
                }
            });
            // The table must stay in step even for a stream we gave up
            // on: a failed decode is a connection error (RFC 9113 §4.3).
            r.map_err(|_| H2Error::Protocol)?;
            if empty_before && self.dec.table_len() == 0 {
                self.last_block.clear();
                self.last_block.extend_from_slice(&block);
                self.last_status = status;
            } else {
                self.last_block.clear();
            }
            self.block = block;
        }
        if self.server.is_none() {
            self.server = server;
        }
        let Some(r) = self.resp_of(stream) else {
            return Ok(());
        };
        if r.status == 0 {
            // Interim responses (1xx) are followed by the final one.
            if (100..200).contains(&status) {
                return Ok(());
            }
            if status == 0 {
                return Err(H2Error::Protocol);
            }
            r.status = status;
        }
        // A second block is trailers, which end the stream.
        if end_stream {
            r.done = true;
        }
        Ok(())
    }
}

/// The data of a frame that may be padded (§6.1, §6.2).
fn unpad(flags: u8, p: &[u8]) -> Result<&[u8], H2Error> {
    if flags & frame::PADDED == 0 {
        return Ok(p);
    }
    let (&pad, rest) = p.split_first().ok_or(H2Error::Protocol)?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|n| &rest[..n])
        .ok_or(H2Error::Protocol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_h2::hpack::Encoder;

    fn h1_get() -> Vec<u8> {
        b"GET /a?b=1 HTTP/1.1\r\nHost: h:8443\r\nUser-Agent: x\r\nConnection: close\r\nX-Y: z\r\n\r\n"
            .to_vec()
    }

    #[test]
    fn an_http1_request_becomes_pseudo_headers_and_lowercase_fields_without_connection_ones() {
        // RFC 9113 §8.3.1 (pseudo-headers, :authority from Host) and §8.2.2
        // (no connection-specific fields).
        let r = H2Request::from_h1(&h1_get(), 0, "https").expect("converts");
        let mut fields = Vec::new();
        Decoder::new(4096)
            .decode(&r.block, 1 << 20, &mut |n, v| {
                fields.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .expect("decodes");
        let want: Vec<(String, String)> = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "h:8443"),
            (":path", "/a?b=1"),
            ("user-agent", "x"),
            ("x-y", "z"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(fields, want);
        assert!(r.body.is_empty());
    }

    #[test]
    fn the_first_request_sends_the_preface_settings_and_a_headers_frame_on_stream_1() {
        // RFC 9113 §3.4: the preface, then SETTINGS; client streams are
        // odd and increase (§5.1.1).
        let req = H2Request::from_h1(&h1_get(), 0, "http").expect("converts");
        let mut c = H2Conn::new(0);
        let mut out = Vec::new();
        c.start(&req, &mut out);
        assert!(out.starts_with(frame::PREFACE));
        let mut kinds = Vec::new();
        let mut pos = frame::PREFACE.len();
        while pos < out.len() {
            let h = Head::parse(out[pos..pos + 9].try_into().expect("9 bytes"));
            kinds.push((h.kind, h.flags, h.stream));
            pos += 9 + h.len;
        }
        assert_eq!(
            kinds,
            [
                (frame::SETTINGS, 0, 0),
                (frame::WINDOW_UPDATE, 0, 0),
                (frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, 1)
            ]
        );
        c.start(&req, &mut out);
        let h = Head::parse(out[..9].try_into().expect("9 bytes"));
        assert_eq!((h.kind, h.stream), (frame::HEADERS, 3));
    }

    #[test]
    fn a_response_split_anywhere_is_read_with_its_status_body_and_end_and_settings_are_acked() {
        let req = H2Request::from_h1(&h1_get(), 0, "http").expect("converts");
        let mut wire = Vec::new();
        frame::put_frame(&mut wire, frame::SETTINGS, 0, 0, &[0, 5, 0, 0, 0x40, 0]);
        let mut block = Vec::new();
        Encoder::status(&mut block, 200);
        Encoder::field(&mut block, b"server", b"stoa");
        frame::put_frame(&mut wire, frame::HEADERS, frame::END_HEADERS, 1, &block);
        // A padded DATA frame (§6.1): 2 bytes of padding.
        frame::put_frame(
            &mut wire,
            frame::DATA,
            frame::PADDED,
            1,
            &[2, b'a', b'b', 0, 0],
        );
        frame::put_frame(&mut wire, frame::DATA, frame::END_STREAM, 1, b"cde");
        for cut in 0..wire.len() {
            let mut c = H2Conn::new(0);
            let mut out = Vec::new();
            c.start(&req, &mut out);
            c.feed(&wire[..cut]).expect("first part");
            c.feed(&wire[cut..]).expect("second part");
            assert_eq!(c.resp.status, 200, "cut {cut}");
            assert_eq!(c.resp.body, 5, "cut {cut}");
            assert!(c.resp.done, "cut {cut}");
            assert_eq!(c.server.as_deref(), Some(&b"stoa"[..]));
            // The SETTINGS ACK (§6.5.3) is owed.
            let h = Head::parse(c.out[..9].try_into().expect("9 bytes"));
            assert_eq!((h.kind, h.flags), (frame::SETTINGS, frame::ACK));
        }
    }

    #[test]
    fn a_repeated_header_block_gives_the_same_status_and_one_that_indexes_is_decoded_again() {
        // RFC 7541 §2.3: the dynamic table is the decoder's only state;
        // with it empty, equal bytes are equal fields.
        let req = H2Request::from_h1(&h1_get(), 0, "http").expect("converts");
        let mut c = H2Conn::new(0);
        let mut out = Vec::new();
        let mut plain = Vec::new();
        Encoder::status(&mut plain, 404);
        // `:status: 200` with incremental indexing (0x48 = literal with
        // indexing, name index 8), then the same block again: the second
        // time the table holds an entry and the block is decoded.
        let indexed = [0x48, 0x03, b'2', b'0', b'0'];
        for (block, want) in [(&plain[..], 404), (&plain[..], 404), (&indexed[..], 200)] {
            c.start(&req, &mut out);
            let id = c.cur;
            let mut wire = Vec::new();
            frame::put_frame(
                &mut wire,
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                id,
                block,
            );
            c.feed(&wire).expect("a response");
            assert_eq!((c.resp.status, c.resp.done), (want, true));
        }
        assert_eq!(c.dec.table_len(), 1);
        c.start(&req, &mut out);
        let mut wire = Vec::new();
        // Index 62: the entry the last block inserted.
        frame::put_frame(
            &mut wire,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            c.cur,
            &[0x80 | 62],
        );
        c.feed(&wire).expect("a response");
        assert_eq!(c.resp.status, 200);
    }

    #[test]
    fn several_streams_end_in_any_order_and_a_reset_fails_only_its_own() {
        // RFC 9113 §5: streams are independent; frames of different
        // streams interleave; RST_STREAM ends one (§6.4).
        let req = H2Request::from_h1(&h1_get(), 0, "http").expect("converts");
        let mut c = H2Conn::new(0);
        let mut out = Vec::new();
        for tag in [10, 11, 12] {
            c.open(&req, &mut out, tag);
        }
        let ids: Vec<u32> = c.streams.iter().map(|s| s.id).collect();
        assert_eq!(ids, [1, 3, 5]);
        let mut block = Vec::new();
        Encoder::status(&mut block, 200);
        let mut wire = Vec::new();
        frame::put_frame(&mut wire, frame::HEADERS, frame::END_HEADERS, 5, &block);
        frame::put_frame(&mut wire, frame::HEADERS, frame::END_HEADERS, 1, &block);
        frame::put_frame(&mut wire, frame::DATA, frame::END_STREAM, 5, b"abc");
        frame::put_rst(&mut wire, 3, frame::Reason(8));
        c.feed(&wire).expect("no connection error");
        let mut done = Vec::new();
        c.take_ended(&mut done);
        let got: Vec<(usize, u16, u64, Option<H2Error>)> = done
            .iter()
            .map(|s| (s.tag, s.resp.status, s.resp.body, s.err))
            .collect();
        assert_eq!(got, [(11, 0, 0, Some(H2Error::Reset)), (12, 200, 3, None)]);
        // Stream 1 is still open; a forgotten one's frames are ignored.
        c.forget(10);
        let mut wire = Vec::new();
        frame::put_frame(&mut wire, frame::DATA, frame::END_STREAM, 1, b"x");
        c.feed(&wire).expect("no connection error");
        c.take_ended(&mut done);
        assert_eq!(done.len(), 2);
    }

    #[test]
    fn a_reset_stream_and_a_goaway_that_leaves_the_request_out_are_errors() {
        let req = H2Request::from_h1(&h1_get(), 0, "http").expect("converts");
        let mut c = H2Conn::new(0);
        let mut out = Vec::new();
        c.start(&req, &mut out);
        let mut wire = Vec::new();
        frame::put_rst(&mut wire, 1, frame::Reason(2));
        assert_eq!(c.feed(&wire), Err(H2Error::Reset));
        let mut c = H2Conn::new(0);
        c.start(&req, &mut out);
        let mut wire = Vec::new();
        frame::put_goaway(&mut wire, 0, frame::Reason(0));
        assert_eq!(c.feed(&wire), Err(H2Error::Refused));
        assert!(c.goaway);
    }

    /// The frames in `b` (after the preface, if any): (type, flags,
    /// stream, payload length).
    fn frames_of(b: &[u8]) -> Vec<(u8, u8, u32, usize)> {
        let mut pos = if b.starts_with(frame::PREFACE) {
            frame::PREFACE.len()
        } else {
            0
        };
        let mut v = Vec::new();
        while pos < b.len() {
            let h = Head::parse(b[pos..pos + 9].try_into().expect("9 bytes"));
            v.push((h.kind, h.flags, h.stream, h.len));
            pos += 9 + h.len;
        }
        v
    }

    fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (id, v) in pairs {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        let mut w = Vec::new();
        frame::put_frame(&mut w, frame::SETTINGS, 0, 0, &p);
        w
    }

    fn post(len: usize) -> H2Request {
        let mut h1 =
            format!("POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: {len}\r\n\r\n").into_bytes();
        h1.extend((0..len).map(|i| (i % 251) as u8));
        H2Request::from_h1(&h1, len, "http").expect("converts")
    }

    /// DATA bytes on stream `id` in `frames`, and whether END_STREAM came.
    fn data_on(frames: &[(u8, u8, u32, usize)], id: u32) -> (usize, bool) {
        frames
            .iter()
            .filter(|f| f.0 == frame::DATA && f.2 == id)
            .fold((0, false), |(n, e), f| {
                (n + f.3, e || f.1 & frame::END_STREAM != 0)
            })
    }

    #[test]
    fn streams_open_up_to_the_servers_max_concurrent_streams_and_follow_its_changes() {
        // RFC 9113 §5.1.2: no more open streams than the peer's
        // SETTINGS_MAX_CONCURRENT_STREAMS; §6.5.3: a later SETTINGS
        // applies when it arrives. Before the server's SETTINGS, one.
        let req = H2Request::from_h1(&h1_get(), 0, "http").expect("converts");
        let mut c = H2Conn::new(0);
        let mut out = Vec::new();
        assert!(c.can_open());
        c.open(&req, &mut out, 0);
        assert!(!c.can_open(), "the limit is unknown before SETTINGS");
        c.feed(&settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 3)]))
            .expect("settings");
        for tag in 1..3 {
            assert!(c.can_open());
            c.open(&req, &mut out, tag);
        }
        assert!(!c.can_open());
        assert_eq!(c.min_max_streams, 3);
        // Raised: one more; lowered to 1: none until two have ended.
        c.feed(&settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 4)]))
            .expect("settings");
        assert!(c.can_open());
        c.feed(&settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 1)]))
            .expect("settings");
        assert_eq!(c.min_max_streams, 1);
        let mut block = Vec::new();
        Encoder::status(&mut block, 204);
        let mut done = Vec::new();
        for id in [1, 3] {
            assert!(!c.can_open());
            let mut wire = Vec::new();
            frame::put_frame(
                &mut wire,
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                id,
                &block,
            );
            c.feed(&wire).expect("response");
            c.take_ended(&mut done);
        }
        assert!(!c.can_open(), "stream 5 is still open");
        let mut wire = Vec::new();
        frame::put_frame(
            &mut wire,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            5,
            &block,
        );
        c.feed(&wire).expect("response");
        c.take_ended(&mut done);
        assert!(c.can_open());
        assert_eq!(done.len(), 3);
    }

    #[test]
    fn a_large_body_goes_as_the_send_windows_open_in_frames_within_max_frame_size() {
        // RFC 9113 §6.9: DATA within the connection's and the stream's
        // send windows (65,535 each to start, §6.9.2); WINDOW_UPDATE opens
        // them (§6.9.1); frames within SETTINGS_MAX_FRAME_SIZE (§4.2).
        let len = 1 << 20;
        let req = post(len);
        let mut c = H2Conn::new(0);
        let mut out = Vec::new();
        c.start(&req, &mut out);
        let f = frames_of(&out);
        assert!(f.iter().all(|f| f.0 != frame::DATA || f.3 <= 16_384));
        assert_eq!(data_on(&f, 1), (65_535, false));
        assert_eq!(c.body_pending(), len - 65_535);
        // The stream's window alone opens nothing: the connection's is 0.
        let mut wire = Vec::new();
        frame::put_window_update(&mut wire, 1, 100_000);
        c.feed(&wire).expect("window update");
        assert_eq!(data_on(&frames_of(&c.out), 1).0, 0);
        // The server allows larger frames, then opens the connection.
        let mut wire = settings(&[(frame::SETTINGS_MAX_FRAME_SIZE, 65_536)]);
        frame::put_window_update(&mut wire, 0, 1 << 24);
        c.feed(&wire).expect("settings, window update");
        let f = frames_of(&std::mem::take(&mut c.out));
        assert_eq!(data_on(&f, 1), (100_000, false), "the stream's window");
        assert!(f.iter().any(|f| f.0 == frame::DATA && f.3 == 65_536));
        // A larger initial window applies to the open stream (§6.9.2):
        // + (2^20 - 65,535), the rest of the body.
        c.feed(&settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)]))
            .expect("settings");
        let f = frames_of(&std::mem::take(&mut c.out));
        let (n, end) = data_on(&f, 1);
        assert_eq!(n, len - 65_535 - 100_000);
        assert!(end, "END_STREAM on the last DATA frame");
        assert_eq!(c.body_pending(), 0);
    }

    #[test]
    fn a_lowered_initial_window_holds_a_body_back_until_window_updates_make_up_for_it() {
        // RFC 9113 §6.9.2: a SETTINGS that lowers the initial window can
        // leave a stream's window negative; nothing is sent until
        // WINDOW_UPDATE brings it above zero.
        let req = post(200_000);
        let mut c = H2Conn::new(0);
        let mut out = Vec::new();
        c.start(&req, &mut out);
        assert_eq!(data_on(&frames_of(&out), 1).0, 65_535);
        let mut wire = settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 16_384)]);
        frame::put_window_update(&mut wire, 0, 1 << 20);
        frame::put_window_update(&mut wire, 1, 49_151);
        c.feed(&wire).expect("settings, window updates");
        // 65,535 - 65,535 - 49,151 + 49,151 = 0: still nothing.
        assert_eq!(data_on(&frames_of(&std::mem::take(&mut c.out)), 1).0, 0);
        let mut wire = Vec::new();
        frame::put_window_update(&mut wire, 1, 1_000);
        c.feed(&wire).expect("window update");
        assert_eq!(data_on(&frames_of(&std::mem::take(&mut c.out)), 1).0, 1_000);
        // The response arrives before the rest of the body: the stream is
        // reset (CANCEL) and nothing more is sent on it.
        let mut block = Vec::new();
        Encoder::status(&mut block, 413);
        let mut wire = Vec::new();
        frame::put_frame(
            &mut wire,
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1,
            &block,
        );
        c.feed(&wire).expect("response");
        assert_eq!((c.resp.status, c.resp.done), (413, true));
        c.start(&req, &mut out);
        let f = frames_of(&out);
        assert_eq!(f[0], (frame::RST_STREAM, 0, 1, 4), "{f:?}");
        assert_eq!(c.body_pending(), 200_000 - 16_384);
    }
}
