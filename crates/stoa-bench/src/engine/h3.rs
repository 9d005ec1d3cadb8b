//! The engine's HTTP/3 side (`--http3`): QUIC connections (quinn-proto)
//! driven by the worker's mio loop, each carrying `--streams N` clients,
//! one request stream each at a time (as HTTP/2's groups: the group index
//! of a client is its connection here too).
//!
//! One connected UDP socket per connection, not one per thread: the
//! kernel hands each connection its own datagrams (no demultiplexing by
//! connection id in the loop), each connection has its own 4-tuple as
//! real clients have (a server that spreads connections over workers by
//! address, as `SO_REUSEPORT` does, sees them spread), an ICMP "port
//! unreachable" reaches the connection it is about (ECONNREFUSED on the
//! connected socket), and readiness is per connection as it is for TCP.
//! Datagrams go through quinn-udp: GSO on send (a burst of packets in one
//! `sendmsg`), GRO and `recvmmsg` on receive. Packets are written once per
//! turn of the loop, after the events of that turn: the requests and ACKs
//! of a batch of responses leave together, as the TCP paths write theirs.

use super::{Phase, Worker};
use crate::h3::{self as proto, Control, Qpack, Response};
use crate::record::Failure;
use bytes::BytesMut;
use mio::{Interest, Token};
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointEvent, Event, ReadError,
    StreamEvent, StreamId, VarInt,
};
use quinn_udp::{RecvMeta, UdpSocketState};
use std::io::{self, IoSliceMut};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// Marks an HTTP/3 connection's token and its entries in the timer heap
/// (slot indices stay below it; HTTP/2 groups use bit 31).
pub(super) const H3_BIT: usize = 1 << 30;
/// Datagram buffers per receive call (`recvmmsg`), each large enough for
/// one GRO batch.
const RECV_BATCH: usize = 8;
const RECV_BUF: usize = 64 * 1024;
/// The receive buffer asked of each connection's socket.
const RECV_SOCKET_BUF: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Handshaking,
    Ready,
}

/// A request stream in flight.
struct Req {
    id: StreamId,
    slot: usize,
    resp: Response,
    /// Bytes of the request written into the stream so far.
    sent: usize,
    /// The request's length.
    len: usize,
}

/// A unidirectional stream the server opened (RFC 9114 §6.2).
enum Uni {
    /// Its type not read yet (the bytes of the type's varint so far).
    Unknown(Vec<u8>),
    Control(Control),
    /// QPACK encoder/decoder streams (nothing on them with no dynamic
    /// table) and unknown types: read and dropped.
    Skip,
}

pub(super) struct H3Conn {
    gen: u32,
    state: State,
    sock: Option<mio::net::UdpSocket>,
    udp: Option<UdpSocketState>,
    ch: Option<ConnectionHandle>,
    quic: Option<Box<Connection>>,
    reqs: Vec<Req>,
    /// Clients whose request waits for the handshake or a stream credit.
    waiting: Vec<usize>,
    /// The client whose request opened the connection (it has the connect
    /// and TLS phases).
    opener: Option<usize>,
    uni: Vec<(StreamId, Uni)>,
    /// The time of this connection's entry in the timer heap.
    timer_at: Option<Instant>,
    dirty: bool,
    goaway: bool,
    /// This connection's handshake checked the server's certificate (with
    /// resumption on: it was a full handshake, not a resumed one).
    checked: bool,
    /// The `server` field of the first response.
    pub(super) server: Option<Vec<u8>>,
}

impl H3Conn {
    fn new() -> H3Conn {
        H3Conn {
            gen: 0,
            state: State::Closed,
            sock: None,
            udp: None,
            ch: None,
            quic: None,
            reqs: Vec::new(),
            waiting: Vec::new(),
            opener: None,
            uni: Vec::new(),
            timer_at: None,
            dirty: false,
            goaway: false,
            checked: false,
            server: None,
        }
    }
}

/// A worker thread's HTTP/3 state.
pub(super) struct Side {
    endpoint: Endpoint,
    pub(super) conns: Vec<H3Conn>,
    /// Connections with packets to send after this batch of events.
    dirty: Vec<usize>,
    bufs: Box<[[u8; RECV_BUF]; RECV_BATCH]>,
    tbuf: Vec<u8>,
    /// QPACK decoding of response sections (no dynamic table: one for
    /// all connections).
    qpack: Qpack,
    control: Vec<u8>,
    readable: Vec<StreamId>,
    writable: Vec<StreamId>,
}

impl Side {
    pub(super) fn new(setup: &crate::quic::QuicSetup) -> Side {
        Side {
            // Path MTU discovery as the server's quinn does it (quinn-udp
            // sets don't-fragment on the sockets).
            endpoint: Endpoint::new(setup.endpoint.clone(), None, true, None),
            conns: Vec::new(),
            dirty: Vec::new(),
            bufs: Box::new([[0; RECV_BUF]; RECV_BATCH]),
            tbuf: Vec::with_capacity(RECV_BUF),
            qpack: Qpack::default(),
            control: proto::control_stream(),
            readable: Vec::new(),
            writable: Vec::new(),
        }
    }

    pub(super) fn ensure(&mut self, g: usize) {
        while self.conns.len() <= g {
            self.conns.push(H3Conn::new());
        }
    }

    fn mark(&mut self, g: usize) {
        let c = &mut self.conns[g];
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(g);
        }
    }

    pub(super) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }
}

/// How a stream's read ended.
enum Ended {
    Done(u16, u64, u64),
    Failed(Failure),
}

impl Worker<'_> {
    fn side(&mut self) -> Option<&mut Side> {
        self.h3.as_deref_mut()
    }

    /// Slot `s` (a client of connection `g`) starts its request.
    pub(super) fn h3_begin(&mut self, s: usize, g: usize, now: Instant) {
        Self::reset_response(&mut self.slots[s]);
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        let ready = c.state == State::Ready && !c.goaway;
        self.slots[s].reused = ready;
        if ready {
            return self.h3_open(s, g, now);
        }
        let slot = &mut self.slots[s];
        slot.phase = Phase::Connecting;
        slot.t_conn = now;
        c.waiting.push(s);
        match c.state {
            State::Closed => self.h3_connect(g, s, now),
            State::Ready if c.reqs.is_empty() => {
                // After a GOAWAY (RFC 9114 §5.2), a new connection once the
                // old one's requests are done.
                self.h3_drop(g, now);
                self.h3_connect(g, s, now);
            }
            _ => {}
        }
    }

    fn h3_connect(&mut self, g: usize, opener: usize, now: Instant) {
        self.rec.counters.connections += 1;
        let sh = self.sh;
        let target = &sh.plan.target;
        let (Some(setup), Some(&remote)) = (target.quic.as_ref(), target.addrs.first()) else {
            return;
        };
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        c.gen = c.gen.wrapping_add(1);
        c.reqs.clear();
        c.uni.clear();
        c.goaway = false;
        c.checked = false;
        c.opener = Some(opener);
        c.timer_at = None;
        let token = Token((c.gen as usize) << 32 | H3_BIT | g);
        let registry = self.poll.registry();
        let sock = (|| -> io::Result<_> {
            let local: SocketAddr = if remote.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let std_sock = std::net::UdpSocket::bind(local)?;
            std_sock.connect(remote)?;
            std_sock.set_nonblocking(true)?;
            let state = UdpSocketState::new((&std_sock).into())?;
            // Room for a burst of a large response while the loop is busy
            // elsewhere (the default, 208 KiB, is 150 packets); capped by
            // net.core.rmem_max.
            let _ = state.set_recv_buffer_size((&std_sock).into(), RECV_SOCKET_BUF);
            let mut sock = mio::net::UdpSocket::from_std(std_sock);
            registry.register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)?;
            Ok((sock, state))
        })();
        let (sock, udp) = match sock {
            Ok(x) => x,
            Err(e) => {
                let f = super::classify_connect(&e);
                return self.h3_fail(g, f, now);
            }
        };
        match side
            .endpoint
            .connect(now, setup.client.clone(), remote, &setup.server_name)
        {
            Ok((ch, conn)) => {
                c.sock = Some(sock);
                c.udp = Some(udp);
                c.ch = Some(ch);
                c.quic = Some(Box::new(conn));
                c.state = State::Handshaking;
                side.mark(g);
                // The handshake starts now: the Initial leaves with this
                // turn's packets.
                self.slots[opener].t_tcp = Some(now);
            }
            Err(e) => {
                if let Ok(mut m) = sh.tls_error.lock() {
                    m.get_or_insert_with(|| format!("QUIC: {e}"));
                }
                self.h3_fail(g, Failure::Connect, now);
            }
        }
    }

    /// Closes connection `g` (CONNECTION_CLOSE with H3_NO_ERROR) without
    /// failing the requests of its clients.
    pub(super) fn h3_drop(&mut self, g: usize, now: Instant) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        if let Some(q) = c.quic.as_mut() {
            if !q.is_closed() {
                q.close(
                    now,
                    VarInt::from_u32(proto::H3_NO_ERROR as u32),
                    Default::default(),
                );
            }
        }
        transmit(side, g, now);
        let c = &mut side.conns[g];
        if let (Some(ch), Some(_)) = (c.ch.take(), c.quic.take()) {
            // The endpoint forgets the connection (its ids).
            let _ = side.endpoint.handle_event(ch, EndpointEvent::drained());
        }
        let c = &mut side.conns[g];
        c.sock = None;
        c.udp = None;
        c.state = State::Closed;
        c.gen = c.gen.wrapping_add(1);
        c.timer_at = None;
        c.reqs.clear();
        c.uni.clear();
    }

    /// Connection `g` failed: every request on it or waiting for it fails
    /// with `f`; the next request opens a new one.
    fn h3_fail(&mut self, g: usize, f: Failure, now: Instant) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        let mut victims: Vec<usize> = c.reqs.iter().map(|r| r.slot).collect();
        victims.append(&mut c.waiting);
        self.h3_drop(g, now);
        for s in victims {
            if self.slots[s].active() && self.slots[s].group == Some(g) {
                self.fail(s, f, now);
            }
        }
    }

    /// Opens slot `s`'s request stream on ready connection `g`, or queues
    /// the slot until the server allows another stream.
    fn h3_open(&mut self, s: usize, g: usize, now: Instant) {
        // A templated request's frames are the slot's, which the opening
        // writes to: taken for the while.
        let rendered = self.slots[s].rendered.take();
        self.h3_open_stream(s, g, now, &rendered);
        self.slots[s].rendered = rendered;
    }

    fn h3_open_stream(
        &mut self,
        s: usize,
        g: usize,
        now: Instant,
        rendered: &Option<Box<super::Rendered>>,
    ) {
        let sh = self.sh;
        let Some(req) = super::h3_request(&sh.plan.requests[self.slots[s].req], rendered) else {
            return;
        };
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        let Some(q) = c.quic.as_mut() else {
            return;
        };
        let slot = &mut self.slots[s];
        let Some(id) = q.streams().open(Dir::Bi) else {
            // The server's MAX_STREAMS is reached (RFC 9000 §4.6): the
            // request waits for a stream to end. Its clock runs.
            slot.phase = Phase::Writing;
            c.waiting.push(s);
            return;
        };
        let mut stream = q.send_stream(id);
        let sent = stream.write(&req.wire).unwrap_or(0);
        if sent == req.wire.len() {
            let _ = stream.finish();
        }
        c.reqs.push(Req {
            id,
            slot: s,
            resp: Response::default(),
            sent,
            len: req.wire.len(),
        });
        side.mark(g);
        slot.phase = Phase::Reading;
        slot.req_len = 1;
        slot.written = 1;
        if slot.reused {
            slot.t_start = now;
            slot.t_conn = now;
        }
        slot.t_written = Some(now);
        self.rec.counters.bytes_sent += sent as u64;
        self.rec.counters.body_sent += slot.body_len as u64;
    }

    /// Slot `s` gave up its request (a timeout): its stream is cancelled
    /// (RFC 9114 §4.1.1: H3_REQUEST_CANCELLED both ways).
    pub(super) fn h3_forget(&mut self, s: usize, g: usize) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        c.waiting.retain(|&w| w != s);
        if let Some(i) = c.reqs.iter().position(|r| r.slot == s) {
            let r = c.reqs.swap_remove(i);
            if let Some(q) = c.quic.as_mut() {
                let code = VarInt::from_u32(proto::H3_REQUEST_CANCELLED as u32);
                let _ = q.send_stream(r.id).reset(code);
                let _ = q.recv_stream(r.id).stop(code);
            }
            side.mark(g);
        }
    }

    /// A readiness event on connection `g`'s socket.
    pub(super) fn h3_event(&mut self, g: usize, gen: u32, ev: &mio::event::Event, now: Instant) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        if g >= side.conns.len() || side.conns[g].gen != gen {
            return;
        }
        if ev.is_writable() {
            // Room in the socket again for packets that did not go.
            side.mark(g);
        }
        if ev.is_readable() || ev.is_error() {
            self.h3_recv(g, now);
        }
    }

    /// Reads every datagram the socket holds into the connection.
    fn h3_recv(&mut self, g: usize, now: Instant) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let mut refused = None;
        loop {
            let c = &mut side.conns[g];
            let (Some(sock), Some(udp)) = (c.sock.as_ref(), c.udp.as_ref()) else {
                return;
            };
            let mut meta = [RecvMeta::default(); RECV_BATCH];
            let r = {
                let mut iovs = side.bufs.each_mut().map(|b| IoSliceMut::new(&mut b[..]));
                udp.recv(sock.into(), &mut iovs, &mut meta)
            };
            let n = match r {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ECONNREFUSED: an ICMP port unreachable (nothing
                    // listens on that UDP port).
                    refused = Some(e);
                    break;
                }
            };
            for (m, buf) in meta.iter().zip(side.bufs.iter()).take(n) {
                let data = &buf[..m.len.min(RECV_BUF)];
                for d in data.chunks(m.stride.max(1)) {
                    let ecn = m
                        .ecn
                        .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
                    side.tbuf.clear();
                    match side.endpoint.handle(
                        now,
                        m.addr,
                        m.dst_ip,
                        ecn,
                        BytesMut::from(d),
                        &mut side.tbuf,
                    ) {
                        Some(DatagramEvent::ConnectionEvent(ch, e)) => {
                            let c = &mut side.conns[g];
                            if c.ch == Some(ch) {
                                if let Some(q) = c.quic.as_mut() {
                                    // rustls runs (and checks the
                                    // certificate) within this call.
                                    let checked = crate::transport::certificates_checked_here();
                                    q.handle_event(e);
                                    if crate::transport::certificates_checked_here() != checked {
                                        c.checked = true;
                                    }
                                }
                            }
                        }
                        Some(DatagramEvent::Response(t)) => {
                            // A stateless reset or version negotiation.
                            let c = &side.conns[g];
                            if let (Some(sock), Some(udp)) = (c.sock.as_ref(), c.udp.as_ref()) {
                                let _ = udp.send(
                                    sock.into(),
                                    &quinn_udp::Transmit {
                                        destination: t.destination,
                                        ecn: None,
                                        contents: &side.tbuf[..t.size],
                                        segment_size: t.segment_size,
                                        src_ip: t.src_ip,
                                    },
                                );
                            }
                        }
                        Some(DatagramEvent::NewConnection(i)) => side.endpoint.ignore(i),
                        None => {}
                    }
                }
            }
        }
        if let Some(e) = refused {
            let handshaking = side.conns[g].state == State::Handshaking;
            let f = if handshaking {
                super::classify_connect(&e)
            } else {
                Failure::Reset
            };
            return self.h3_fail(g, f, now);
        }
        self.h3_process(g, now);
    }

    /// The connection's timer (loss detection, ACK delay, idle timeout).
    pub(super) fn h3_timer(&mut self, g: usize, gen: u32, at: Instant, now: Instant) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let Some(c) = side.conns.get_mut(g) else {
            return;
        };
        if c.gen != gen || c.timer_at != Some(at) {
            return;
        }
        c.timer_at = None;
        if let Some(q) = c.quic.as_mut() {
            if q.poll_timeout().is_some_and(|t| t <= now) {
                q.handle_timeout(now);
            }
        }
        side.mark(g);
        self.h3_process(g, now);
    }

    /// Takes what the connection has for us after datagrams or a timeout:
    /// its events, the streams' bytes, the responses that ended.
    fn h3_process(&mut self, g: usize, now: Instant) {
        let sh = self.sh;
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        let (Some(q), Some(ch)) = (c.quic.as_mut(), c.ch) else {
            return;
        };
        while let Some(e) = q.poll_endpoint_events() {
            if let Some(back) = side.endpoint.handle_event(ch, e) {
                q.handle_event(back);
            }
        }
        let (mut connected, mut lost, mut uni, mut available) = (false, None, false, false);
        side.readable.clear();
        side.writable.clear();
        while let Some(ev) = q.poll() {
            match ev {
                Event::Connected => connected = true,
                Event::ConnectionLost { reason } => lost = Some(reason),
                Event::Stream(StreamEvent::Readable { id }) => side.readable.push(id),
                Event::Stream(StreamEvent::Writable { id }) => side.writable.push(id),
                Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => uni = true,
                Event::Stream(StreamEvent::Available { dir: Dir::Bi }) => available = true,
                _ => {}
            }
        }
        side.mark(g);
        if connected && self.h3_ready(g, now).is_err() {
            return;
        }
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let c = &mut side.conns[g];
        let Some(q) = c.quic.as_mut() else {
            return;
        };
        if uni {
            while let Some(id) = q.streams().accept(Dir::Uni) {
                c.uni.push((id, Uni::Unknown(Vec::new())));
                side.readable.push(id);
            }
        }
        // Request bytes that did not fit (flow control) go on.
        for &id in &side.writable {
            if let Some(r) = c.reqs.iter_mut().find(|r| r.id == id) {
                let Some(wire) = super::h3_request(
                    &sh.plan.requests[self.slots[r.slot].req],
                    &self.slots[r.slot].rendered,
                )
                .map(|x| &x.wire) else {
                    continue;
                };
                if r.sent < wire.len() {
                    let mut st = q.send_stream(id);
                    let n = st.write(&wire[r.sent..]).unwrap_or(0);
                    r.sent += n;
                    self.rec.counters.bytes_sent += n as u64;
                    if r.sent == wire.len() {
                        let _ = st.finish();
                    }
                }
            }
        }
        let mut ended: Vec<(usize, Ended)> = Vec::new();
        let mut conn_error = None;
        let want_server = c.server.is_none();
        for &id in &side.readable {
            if id.dir() == Dir::Uni {
                let Some((_, u)) = c.uni.iter_mut().find(|(i, _)| *i == id) else {
                    continue;
                };
                let mut rs = q.recv_stream(id);
                let Ok(mut chunks) = rs.read(true) else {
                    continue;
                };
                while let Ok(Some(ch)) = chunks.next(usize::MAX) {
                    let mut data = &ch.bytes[..];
                    if let Uni::Unknown(b) = u {
                        b.extend_from_slice(data);
                        let Some((kind, n)) = proto::get_varint(b) else {
                            continue;
                        };
                        let rest = b.split_off(n);
                        *u = if kind == proto::CONTROL_STREAM {
                            let mut ctl = Control::default();
                            ctl.feed(&rest);
                            Uni::Control(ctl)
                        } else {
                            Uni::Skip
                        };
                        data = &[];
                    }
                    if let Uni::Control(ctl) = u {
                        ctl.feed(data);
                        if ctl.goaway {
                            c.goaway = true;
                        }
                    }
                }
                let _ = chunks.finalize();
                continue;
            }
            let Some(i) = c.reqs.iter().position(|r| r.id == id) else {
                // A stream we gave up on: drain it.
                if let Ok(mut chunks) = q.recv_stream(id).read(true) {
                    while let Ok(Some(_)) = chunks.next(usize::MAX) {}
                    let _ = chunks.finalize();
                }
                continue;
            };
            let r = &mut c.reqs[i];
            let mut rs = q.recv_stream(id);
            let Ok(mut chunks) = rs.read(true) else {
                continue;
            };
            let mut end = None;
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(ch)) => {
                        let n = ch.bytes.len() as u64;
                        self.rec.counters.bytes_read += n;
                        self.iv.bytes += n;
                        let had = r.resp.status != 0;
                        if let Err(proto::H3Error::Protocol(code)) = r.resp.feed(
                            &ch.bytes,
                            VarInt::from(id).into_inner(),
                            want_server,
                            &mut side.qpack,
                        ) {
                            conn_error = Some(code);
                            break;
                        }
                        if !had && r.resp.status != 0 {
                            // The first byte of the response: its HEADERS.
                            self.slots[r.slot].t_first.get_or_insert(now);
                        }
                    }
                    Ok(None) => {
                        end = Some(if r.resp.complete() {
                            Ended::Done(r.resp.status, r.resp.body, r.resp.wire)
                        } else if r.resp.wire == 0 {
                            Ended::Failed(Failure::Closed)
                        } else {
                            Ended::Failed(Failure::ShortBody)
                        });
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(ReadError::Reset(code)) => {
                        let code = code.into_inner();
                        if let Ok(mut e) = sh.h3_error.lock() {
                            e.get_or_insert_with(|| {
                                format!(
                                    "HTTP/3: the server reset a request stream with {}",
                                    proto::error_name(code)
                                )
                            });
                        }
                        end = Some(Ended::Failed(Failure::Reset));
                        break;
                    }
                }
            }
            let _ = chunks.finalize();
            if conn_error.is_some() {
                break;
            }
            if let Some(e) = end {
                let r = c.reqs.swap_remove(i);
                if r.sent < r.len {
                    // The response came before the whole request went (a
                    // server may answer early, RFC 9114 §4.1): the rest of
                    // the request is abandoned.
                    let code = VarInt::from_u32(proto::H3_NO_ERROR as u32);
                    let _ = q.send_stream(r.id).reset(code);
                }
                if want_server && c.server.is_none() {
                    c.server = r.resp.server;
                }
                ended.push((r.slot, e));
            }
        }
        let goaway_idle = c.goaway && c.reqs.is_empty() && !c.waiting.is_empty();
        for (s, e) in ended {
            if !self.slots[s].active() || self.slots[s].group != Some(g) {
                continue;
            }
            match e {
                Ended::Done(status, body, wire) => {
                    let slot = &mut self.slots[s];
                    slot.got_head = true;
                    slot.head.status = status;
                    slot.body_bytes = body;
                    slot.resp_bytes = wire;
                    slot.t_first.get_or_insert(now);
                    slot.keep = true;
                    self.complete(s, now);
                }
                Ended::Failed(f) => self.fail(s, f, now),
            }
        }
        if let Some(code) = conn_error {
            // RFC 9114 §8: a connection error closes the connection with
            // its code.
            if let Some(q) = self
                .side()
                .and_then(|s| s.conns.get_mut(g))
                .and_then(|c| c.quic.as_mut())
            {
                q.close(
                    now,
                    VarInt::from_u64(code).unwrap_or(VarInt::from_u32(0x101)),
                    Default::default(),
                );
            }
            if let Ok(mut e) = sh.h3_error.lock() {
                e.get_or_insert_with(|| {
                    format!("HTTP/3: a bad response ({})", proto::error_name(code))
                });
            }
            return self.h3_fail(g, Failure::Malformed, now);
        }
        if let Some(reason) = lost {
            let handshaking = self
                .side()
                .is_some_and(|s| s.conns[g].state == State::Handshaking);
            let (f, msg, fatal) = crate::quic::classify(&reason, handshaking);
            let slot = if handshaking || f == Failure::Tls {
                &sh.tls_error
            } else {
                &sh.h3_error
            };
            if let Ok(mut e) = slot.lock() {
                e.get_or_insert(msg);
            }
            if fatal {
                sh.stop.store(true, Relaxed);
            }
            return self.h3_fail(g, f, now);
        }
        if available || goaway_idle {
            self.h3_resume_waiting(g, now);
        }
    }

    /// Requests that waited (for a stream credit, or for a new connection
    /// after a GOAWAY) try again.
    fn h3_resume_waiting(&mut self, g: usize, now: Instant) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        let waiting = std::mem::take(&mut side.conns[g].waiting);
        for s in waiting {
            let slot = &self.slots[s];
            if slot.group == Some(g) && matches!(slot.phase, Phase::Writing | Phase::Connecting) {
                self.h3_begin(s, g, now);
            }
        }
    }

    /// The handshake is done: the control stream, then the waiting
    /// requests.
    fn h3_ready(&mut self, g: usize, _now: Instant) -> Result<(), ()> {
        let sh = self.sh;
        // The client's half of the handshake took time since this event's
        // clock was read.
        let now = Instant::now();
        let Some(side) = self.h3.as_deref_mut() else {
            return Err(());
        };
        let c = &mut side.conns[g];
        let Some(q) = c.quic.as_mut() else {
            return Err(());
        };
        self.rec.counters.tls_handshakes += 1;
        if !c.checked && sh.plan.target.tls.as_ref().is_some_and(|t| t.resume) {
            self.rec.counters.tls_resumed += 1;
        }
        let alpn = q
            .crypto_session()
            .handshake_data()
            .and_then(|d| {
                d.downcast::<quinn_proto::crypto::rustls::HandshakeData>()
                    .ok()
            })
            .and_then(|d| d.protocol);
        if alpn.as_deref() != Some(b"h3") {
            if let Ok(mut e) = sh.tls_error.lock() {
                e.get_or_insert_with(|| {
                    "the server did not choose h3 by ALPN (RFC 9114 §3.1)".into()
                });
            }
            sh.stop.store(true, Relaxed);
            self.h3_fail(g, Failure::Tls, now);
            return Err(());
        }
        if let Ok(mut p) = sh.tls_params.lock() {
            if p.is_none() {
                // QUIC is TLS 1.3 (RFC 9001 §4.2); the suite from the keys
                // the handshake made (quinn-proto does not say it).
                let suite = sh
                    .plan
                    .target
                    .quic
                    .as_ref()
                    .and_then(|q| q.negotiated_suite())
                    .unwrap_or_default();
                *p = Some(("TLSv1.3".into(), suite, Some("h3".into())));
            }
        }
        // Our control stream (RFC 9114 §6.2.1): SETTINGS, kept open.
        if let Some(id) = q.streams().open(Dir::Uni) {
            let _ = q.send_stream(id).write(&side.control);
        }
        c.state = State::Ready;
        if let Some(o) = c.opener.take() {
            if self.slots[o].group == Some(g) {
                self.slots[o].t_tls = Some(now);
                self.slots[o].t_conn = now;
            }
        }
        side.mark(g);
        let waiting = std::mem::take(&mut side.conns[g].waiting);
        for s in waiting {
            if self.slots[s].phase == Phase::Connecting && self.slots[s].group == Some(g) {
                self.h3_open(s, g, now);
            }
        }
        Ok(())
    }

    /// Sends the packets of the connections touched in this batch.
    pub(super) fn h3_flush(&mut self) {
        let Some(side) = self.h3.as_deref_mut() else {
            return;
        };
        if side.dirty.is_empty() {
            return;
        }
        let now = Instant::now();
        let dirty = std::mem::take(&mut side.dirty);
        for &g in &dirty {
            side.conns[g].dirty = false;
            transmit(side, g, now);
            // The connection's next timer.
            let c = &mut side.conns[g];
            if let Some(t) = c.quic.as_mut().and_then(|q| q.poll_timeout()) {
                if c.timer_at.is_none_or(|at| t < at) {
                    c.timer_at = Some(t);
                    self.timers.push(std::cmp::Reverse((t, H3_BIT | g, c.gen)));
                }
            }
        }
        let mut dirty = dirty;
        dirty.clear();
        if let Some(side) = self.h3.as_deref_mut() {
            if side.dirty.is_empty() {
                side.dirty = dirty;
            }
        }
    }

    /// The run ends: every connection is closed.
    pub(super) fn h3_stop(&mut self) {
        let n = self.side().map_or(0, |s| s.conns.len());
        let now = Instant::now();
        for g in 0..n {
            self.h3_drop(g, now);
        }
    }
}

/// Writes connection `g`'s packets (GSO batches as quinn-udp allows) until
/// it has none or the socket is full (the rest is lost and resent, as
/// quinn does on a full socket).
fn transmit(side: &mut Side, g: usize, now: Instant) {
    let c = &mut side.conns[g];
    let (Some(q), Some(sock), Some(udp)) = (c.quic.as_mut(), c.sock.as_ref(), c.udp.as_ref())
    else {
        return;
    };
    let segments = udp.max_gso_segments();
    loop {
        side.tbuf.clear();
        let Some(t) = q.poll_transmit(now, segments, &mut side.tbuf) else {
            break;
        };
        let r = udp.send(
            sock.into(),
            &quinn_udp::Transmit {
                destination: t.destination,
                ecn: t
                    .ecn
                    .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
                contents: &side.tbuf[..t.size],
                segment_size: t.segment_size,
                src_ip: t.src_ip,
            },
        );
        if let Err(e) = r {
            if e.kind() == io::ErrorKind::WouldBlock {
                break;
            }
        }
    }
}
