//! The web server's side of one transport connection to an application.
//!
//! A [`Connection`] carries any number of concurrent requests (up to
//! [`Connection::max_concurrent`], 1 unless the caller raises it after
//! learning that the application multiplexes). The caller owns the socket:
//!
//! ```text
//! let id = conn.start_request(Role::Responder, true, params, &mut out)?;
//! conn.stdin(id, body, &mut out)?;  conn.end_stdin(id, &mut out)?;
//! write out to the socket;
//! on readable: conn.feed(&bytes)?; while let Some(ev) = conn.poll_event() { .. }
//! ```
//!
//! Request ids are the lowest free ones, never 0. An id is freed when its
//! [`Event::End`] is taken from [`Connection::poll_event`], so events are
//! never confused with those of a later request given the same id.

use std::collections::VecDeque;

use crate::nv;
use crate::record::{
    self, Body, Decoder, ProtocolStatus, Record, RecordType, Role, Values, MAX_CONNS, MAX_REQS,
    MPXS_CONNS,
};
use crate::Error;

/// What the application sent, per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Bytes of the request's FCGI_STDOUT (never empty).
    Stdout { id: u16, data: Vec<u8> },
    /// Bytes of the request's FCGI_STDERR (never empty).
    Stderr { id: u16, data: Vec<u8> },
    /// FCGI_END_REQUEST: the request is over (§5.5). `CantMpxConn` and
    /// `Overloaded` mean the application refused it: it may be sent again,
    /// to another connection or process.
    End {
        id: u16,
        app_status: u32,
        protocol_status: ProtocolStatus,
    },
    /// FCGI_GET_VALUES_RESULT (§4.1).
    Values(Values),
    /// FCGI_UNKNOWN_TYPE: the application does not know a management record
    /// type we sent (§4.2).
    UnknownType(u8),
    /// A record the gateway cannot place: for a request id that is not
    /// active (never started, or already ended), or of a type an application
    /// does not send. The connection is still usable; the caller logs it and
    /// may close.
    Unexpected { id: u16, record_type: RecordType },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Free,
    Active {
        stdin_ended: bool,
        data_ended: bool,
    },
    /// END_REQUEST received; free once its event is taken.
    Ended,
}

/// The gateway state of one transport connection. See the module docs.
#[derive(Debug)]
pub struct Connection {
    decoder: Decoder,
    st: State,
}

#[derive(Debug)]
struct State {
    /// Indexed by request id - 1.
    slots: Vec<Slot>,
    active: usize,
    max_concurrent: usize,
    events: VecDeque<Event>,
    /// No new request: one went without FCGI_KEEP_CONN, or input ended.
    closing: bool,
    failed: Option<Error>,
    values: Option<Values>,
}

impl Default for Connection {
    fn default() -> Self {
        Connection::new()
    }
}

impl Connection {
    /// A connection allowing one request at a time.
    pub fn new() -> Connection {
        Connection {
            decoder: Decoder::new(),
            st: State {
                slots: Vec::new(),
                active: 0,
                max_concurrent: 1,
                events: VecDeque::new(),
                closing: false,
                failed: None,
                values: None,
            },
        }
    }

    /// How many requests may be active at once (at least 1, at most 65535).
    /// Raise it only for an application that multiplexes (FCGI_MPXS_CONNS):
    /// one that does not answers a second request with CANT_MPX_CONN, after
    /// which this connection drops back to 1 by itself.
    pub fn set_max_concurrent(&mut self, n: usize) {
        self.st.max_concurrent = n.clamp(1, usize::from(u16::MAX));
    }

    pub fn max_concurrent(&self) -> usize {
        self.st.max_concurrent
    }

    /// Requests started and not yet ended.
    pub fn active(&self) -> usize {
        self.st.active
    }

    /// Ids of the requests started and not yet ended: the ones that fail if
    /// the connection is lost.
    pub fn active_ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.st
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Slot::Active { .. }))
            .map(|(i, _)| (i + 1) as u16)
    }

    /// True when [`Connection::start_request`] would not refuse for lack of
    /// room or because the connection is closing or failed.
    pub fn has_capacity(&self) -> bool {
        self.st.failed.is_none()
            && !self.st.closing
            && self.st.active < self.st.max_concurrent
            && self.free_id().is_some()
    }

    /// True once no new request may start here.
    pub fn is_closing(&self) -> bool {
        self.st.closing || self.st.failed.is_some()
    }

    /// True when nothing is in flight: no request active, no event pending
    /// and no partial record buffered.
    pub fn is_idle(&self) -> bool {
        self.st.active == 0 && self.st.events.is_empty() && self.decoder.is_idle()
    }

    /// The last FCGI_GET_VALUES_RESULT received.
    pub fn values(&self) -> Option<&Values> {
        self.st.values.as_ref()
    }

    fn free_id(&self) -> Option<u16> {
        match self.st.slots.iter().position(|s| *s == Slot::Free) {
            Some(i) => Some((i + 1) as u16),
            None if self.st.slots.len() < usize::from(u16::MAX) => {
                Some((self.st.slots.len() + 1) as u16)
            }
            None => None,
        }
    }

    fn usable(&self) -> Result<(), Error> {
        match self.st.failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Starts a request: FCGI_BEGIN_REQUEST, then `params` as the
    /// FCGI_PARAMS stream and its end (§5.1, §5.2), appended to `out`.
    /// Returns the request id. Without `keep_conn` the application closes
    /// the connection after this request (§3.5), so no other may start.
    /// On error nothing is written.
    pub fn start_request<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        role: Role,
        keep_conn: bool,
        params: impl IntoIterator<Item = (N, V)>,
        out: &mut Vec<u8>,
    ) -> Result<u16, Error> {
        self.usable()?;
        if self.st.closing {
            return Err(Error::Closing);
        }
        if self.st.active >= self.st.max_concurrent {
            return Err(Error::Busy);
        }
        let id = self.free_id().ok_or(Error::Busy)?;
        let mark = out.len();
        record::push_begin_request(out, id, role, keep_conn);
        if let Err(e) = nv::push_params(out, id, params) {
            out.truncate(mark);
            return Err(e);
        }
        let i = usize::from(id - 1);
        if i == self.st.slots.len() {
            self.st.slots.push(Slot::Free);
        }
        self.st.slots[i] = Slot::Active {
            stdin_ended: false,
            data_ended: false,
        };
        self.st.active += 1;
        if !keep_conn {
            self.st.closing = true;
        }
        Ok(id)
    }

    fn slot_mut(&mut self, id: u16) -> Result<&mut Slot, Error> {
        let slot = usize::from(id)
            .checked_sub(1)
            .and_then(|i| self.st.slots.get_mut(i));
        match slot {
            Some(s @ Slot::Active { .. }) => Ok(s),
            _ => Err(Error::UnknownRequest(id)),
        }
    }

    fn stream(
        &mut self,
        id: u16,
        record_type: RecordType,
        data: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        self.usable()?;
        let Slot::Active {
            stdin_ended,
            data_ended,
        } = self.slot_mut(id)?
        else {
            return Err(Error::UnknownRequest(id));
        };
        let ended = if record_type == RecordType::Stdin {
            stdin_ended
        } else {
            data_ended
        };
        if *ended {
            return Err(Error::StreamEnded(id));
        }
        match data {
            Some(d) => record::push_stream(out, record_type, id, d),
            None => {
                record::push_stream_end(out, record_type, id);
                *ended = true;
            }
        }
        Ok(())
    }

    /// Appends request body bytes as FCGI_STDIN records (§5.3). Empty data
    /// writes nothing.
    pub fn stdin(&mut self, id: u16, data: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        self.stream(id, RecordType::Stdin, Some(data), out)
    }

    /// Ends FCGI_STDIN. Every Responder and Filter request needs it, even
    /// without a body; an Authorizer may be sent it (it is ignored).
    pub fn end_stdin(&mut self, id: u16, out: &mut Vec<u8>) -> Result<(), Error> {
        self.stream(id, RecordType::Stdin, None, out)
    }

    /// Appends FCGI_DATA bytes, the file a Filter filters (§6.4).
    pub fn data(&mut self, id: u16, data: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        self.stream(id, RecordType::Data, Some(data), out)
    }

    /// Ends FCGI_DATA.
    pub fn end_data(&mut self, id: u16, out: &mut Vec<u8>) -> Result<(), Error> {
        self.stream(id, RecordType::Data, None, out)
    }

    /// Asks the application to abort a request, e.g. because its client went
    /// away (§5.4). The request stays active until its END_REQUEST arrives;
    /// its output should be discarded meanwhile.
    pub fn abort(&mut self, id: u16, out: &mut Vec<u8>) -> Result<(), Error> {
        self.usable()?;
        self.slot_mut(id)?;
        record::push_abort_request(out, id);
        Ok(())
    }

    /// Appends FCGI_GET_VALUES for FCGI_MAX_CONNS, FCGI_MAX_REQS and
    /// FCGI_MPXS_CONNS (§4.1); the answer comes as [`Event::Values`].
    pub fn query_values(&mut self, out: &mut Vec<u8>) {
        record::push_get_values(out, [MAX_CONNS, MAX_REQS, MPXS_CONNS]).unwrap_or_default();
    }

    /// Takes bytes read from the application; the records become events. An
    /// error means the application broke the protocol: close the connection
    /// and fail its active requests ([`Connection::active_ids`]). Events
    /// queued before the error can still be taken.
    pub fn feed(&mut self, input: &[u8]) -> Result<(), Error> {
        self.usable()?;
        let mut pos = 0;
        while pos < input.len() {
            match self.decoder.decode(&input[pos..]) {
                Ok((n, rec)) => {
                    pos += n;
                    if let Some(rec) = rec {
                        if let Err(e) = self.st.on_record(rec) {
                            self.st.failed = Some(e);
                            return Err(e);
                        }
                    }
                }
                Err(e) => {
                    self.st.failed = Some(e);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The application closed the connection. `Truncated` if it stopped
    /// inside a record. Requests still active have failed (a process that
    /// dies mid-request): see [`Connection::active_ids`].
    pub fn eof(&mut self) -> Result<(), Error> {
        self.st.closing = true;
        self.decoder.finish()
    }

    /// The next event, in the order the records arrived. Taking an
    /// [`Event::End`] frees its request id for reuse.
    pub fn poll_event(&mut self) -> Option<Event> {
        let ev = self.st.events.pop_front()?;
        if let Event::End { id, .. } = ev {
            if let Some(s) = usize::from(id)
                .checked_sub(1)
                .and_then(|i| self.st.slots.get_mut(i))
            {
                if *s == Slot::Ended {
                    *s = Slot::Free;
                }
            }
        }
        Some(ev)
    }
}

impl State {
    fn slot(&self, id: u16) -> Slot {
        usize::from(id)
            .checked_sub(1)
            .and_then(|i| self.slots.get(i))
            .copied()
            .unwrap_or(Slot::Free)
    }

    fn unexpected(&mut self, rec: &Record<'_>) {
        self.events.push_back(Event::Unexpected {
            id: rec.request_id,
            record_type: rec.body.record_type(),
        });
    }

    fn on_record(&mut self, rec: Record<'_>) -> Result<(), Error> {
        let id = rec.request_id;
        let active = matches!(self.slot(id), Slot::Active { .. });
        match rec.body {
            Body::Stdout(d) if active => {
                if !d.is_empty() {
                    self.events.push_back(Event::Stdout {
                        id,
                        data: d.to_vec(),
                    });
                }
            }
            Body::Stderr(d) if active => {
                if !d.is_empty() {
                    self.events.push_back(Event::Stderr {
                        id,
                        data: d.to_vec(),
                    });
                }
            }
            Body::EndRequest {
                app_status,
                protocol_status,
            } if active => {
                self.slots[usize::from(id - 1)] = Slot::Ended;
                self.active -= 1;
                if protocol_status == ProtocolStatus::CantMpxConn {
                    self.max_concurrent = 1;
                }
                self.events.push_back(Event::End {
                    id,
                    app_status,
                    protocol_status,
                });
            }
            Body::GetValuesResult(c) if id == 0 => {
                let v = Values::parse(c)?;
                self.values = Some(v.clone());
                self.events.push_back(Event::Values(v));
            }
            Body::UnknownType(t) if id == 0 => self.events.push_back(Event::UnknownType(t)),
            _ => self.unexpected(&rec),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{push_end_request, push_stream, push_stream_end, KEEP_CONN};

    fn events(c: &mut Connection) -> Vec<Event> {
        std::iter::from_fn(|| c.poll_event()).collect()
    }

    fn stdout(id: u16, d: &[u8]) -> Vec<u8> {
        let mut o = Vec::new();
        push_stream(&mut o, RecordType::Stdout, id, d);
        o
    }

    fn end(id: u16, status: ProtocolStatus) -> Vec<u8> {
        let mut o = Vec::new();
        push_stream_end(&mut o, RecordType::Stdout, id);
        push_end_request(&mut o, id, 0, status);
        o
    }

    /// Decodes what the gateway wrote into (id, body as owned debug text).
    fn records(wire: &[u8]) -> Vec<(u16, RecordType, Vec<u8>)> {
        let mut d = Decoder::new();
        let mut pos = 0;
        let mut v = Vec::new();
        while pos < wire.len() {
            let (n, r) = d.decode(&wire[pos..]).unwrap();
            pos += n;
            if let Some(r) = r {
                let mut e = Vec::new();
                r.encode(&mut e).unwrap();
                let len = u16::from_be_bytes([e[4], e[5]]) as usize;
                v.push((r.request_id, r.body.record_type(), e[8..8 + len].to_vec()));
            }
        }
        v
    }

    #[test]
    fn a_request_is_begin_params_end_of_params_then_stdin_spec_6_2() {
        let mut c = Connection::new();
        let mut out = Vec::new();
        let id = c
            .start_request(
                Role::Responder,
                true,
                [("SCRIPT_NAME", "/x"), ("CONTENT_LENGTH", "5")],
                &mut out,
            )
            .unwrap();
        assert_eq!(id, 1);
        c.stdin(id, b"hello", &mut out).unwrap();
        c.stdin(id, b"", &mut out).unwrap();
        c.end_stdin(id, &mut out).unwrap();
        let recs = records(&out);
        let types: Vec<RecordType> = recs.iter().map(|r| r.1).collect();
        assert_eq!(
            types,
            [
                RecordType::BeginRequest,
                RecordType::Params,
                RecordType::Params,
                RecordType::Stdin,
                RecordType::Stdin
            ]
        );
        assert_eq!(recs[0].2, [0, 1, KEEP_CONN, 0, 0, 0, 0, 0]);
        assert_eq!(
            nv::parse_pairs(&recs[1].2).unwrap(),
            vec![
                (&b"SCRIPT_NAME"[..], &b"/x"[..]),
                (&b"CONTENT_LENGTH"[..], &b"5"[..])
            ]
        );
        assert!(recs[2].2.is_empty() && recs[4].2.is_empty());
        assert_eq!(recs[3].2, b"hello");
        assert_eq!(c.end_stdin(id, &mut out), Err(Error::StreamEnded(1)));
        assert_eq!(c.stdin(7, b"x", &mut out), Err(Error::UnknownRequest(7)));
    }

    #[test]
    fn stdout_stderr_and_end_become_events_for_their_request_spec_5_3() {
        let mut c = Connection::new();
        let mut out = Vec::new();
        let id = c
            .start_request(Role::Responder, true, [("A", "b")], &mut out)
            .unwrap();
        let mut wire = stdout(id, b"Content-Type: text/plain\r\n\r\nhi");
        push_stream(&mut wire, RecordType::Stderr, id, b"warn");
        wire.extend(end(id, ProtocolStatus::RequestComplete));
        c.feed(&wire).unwrap();
        assert_eq!(
            events(&mut c),
            vec![
                Event::Stdout {
                    id: 1,
                    data: b"Content-Type: text/plain\r\n\r\nhi".to_vec()
                },
                Event::Stderr {
                    id: 1,
                    data: b"warn".to_vec()
                },
                Event::End {
                    id: 1,
                    app_status: 0,
                    protocol_status: ProtocolStatus::RequestComplete
                },
            ]
        );
        assert!(c.is_idle());
    }

    #[test]
    fn interleaved_records_of_two_multiplexed_requests_are_told_apart_spec_3_3() {
        let mut c = Connection::new();
        c.set_max_concurrent(2);
        let mut out = Vec::new();
        let a = c
            .start_request(Role::Responder, true, [("N", "a")], &mut out)
            .unwrap();
        let b = c
            .start_request(Role::Responder, true, [("N", "b")], &mut out)
            .unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(
            c.start_request(Role::Responder, true, [("N", "c")], &mut out),
            Err(Error::Busy)
        );
        let mut wire = stdout(b, b"b1");
        wire.extend(stdout(a, b"a1"));
        wire.extend(stdout(b, b"b2"));
        wire.extend(end(a, ProtocolStatus::RequestComplete));
        wire.extend(stdout(b, b"b3"));
        wire.extend(end(b, ProtocolStatus::RequestComplete));
        // Fed in odd pieces: the decoder copes.
        for piece in wire.chunks(5) {
            c.feed(piece).unwrap();
        }
        let evs = events(&mut c);
        let of = |id: u16| -> Vec<u8> {
            evs.iter()
                .filter_map(|e| match e {
                    Event::Stdout { id: i, data } if *i == id => Some(data.clone()),
                    _ => None,
                })
                .flatten()
                .collect()
        };
        assert_eq!(of(a), b"a1");
        assert_eq!(of(b), b"b1b2b3");
        assert_eq!(
            evs.iter()
                .filter(|e| matches!(e, Event::End { .. }))
                .count(),
            2
        );
        assert_eq!(c.active(), 0);
    }

    #[test]
    fn ids_are_reused_after_end_is_taken_never_zero_and_never_in_use() {
        let mut c = Connection::new();
        c.set_max_concurrent(3);
        let mut out = Vec::new();
        let p: [(&str, &str); 0] = [];
        assert_eq!(c.start_request(Role::Responder, true, p, &mut out), Ok(1));
        assert_eq!(c.start_request(Role::Responder, true, p, &mut out), Ok(2));
        assert_eq!(c.start_request(Role::Responder, true, p, &mut out), Ok(3));
        c.feed(&end(2, ProtocolStatus::RequestComplete)).unwrap();
        // Ended but its event not yet taken: 2 is not reused yet.
        assert_eq!(c.start_request(Role::Responder, true, p, &mut out), Ok(4));
        assert!(matches!(c.poll_event(), Some(Event::End { id: 2, .. })));
        c.feed(&end(4, ProtocolStatus::RequestComplete)).unwrap();
        assert!(matches!(c.poll_event(), Some(Event::End { id: 4, .. })));
        assert_eq!(c.start_request(Role::Responder, true, p, &mut out), Ok(2));
        assert_eq!(c.active_ids().collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn records_for_unknown_or_finished_requests_are_error_events_not_panics() {
        let mut c = Connection::new();
        let mut out = Vec::new();
        let id = c
            .start_request(Role::Responder, true, [("A", "b")], &mut out)
            .unwrap();
        c.feed(&end(id, ProtocolStatus::RequestComplete)).unwrap();
        let mut wire = stdout(id, b"late");
        wire.extend(stdout(9, b"never started"));
        wire.extend(stdout(0, b"null id"));
        push_end_request(&mut wire, 9, 0, ProtocolStatus::RequestComplete);
        // A type an application never sends.
        record::push_begin_request(&mut wire, 1, Role::Responder, true);
        record::push_get_values(&mut wire, ["X"]).unwrap();
        c.feed(&wire).unwrap();
        let evs = events(&mut c);
        assert!(matches!(evs[0], Event::End { id: 1, .. }));
        assert_eq!(
            evs[1..],
            [
                Event::Unexpected {
                    id: 1,
                    record_type: RecordType::Stdout
                },
                Event::Unexpected {
                    id: 9,
                    record_type: RecordType::Stdout
                },
                Event::Unexpected {
                    id: 0,
                    record_type: RecordType::Stdout
                },
                Event::Unexpected {
                    id: 9,
                    record_type: RecordType::EndRequest
                },
                Event::Unexpected {
                    id: 1,
                    record_type: RecordType::BeginRequest
                },
                Event::Unexpected {
                    id: 0,
                    record_type: RecordType::GetValues
                },
            ]
        );
    }

    #[test]
    fn get_values_asks_for_the_three_variables_and_parses_the_result_spec_4_1() {
        let mut c = Connection::new();
        let mut out = Vec::new();
        c.query_values(&mut out);
        let recs = records(&out);
        assert_eq!(recs.len(), 1);
        assert_eq!((recs[0].0, recs[0].1), (0, RecordType::GetValues));
        assert_eq!(
            nv::parse_pairs(&recs[0].2).unwrap(),
            vec![
                (&b"FCGI_MAX_CONNS"[..], &b""[..]),
                (&b"FCGI_MAX_REQS"[..], &b""[..]),
                (&b"FCGI_MPXS_CONNS"[..], &b""[..])
            ]
        );
        let mut wire = Vec::new();
        record::push_get_values_result(
            &mut wire,
            [(MAX_CONNS, "4"), (MAX_REQS, "16"), (MPXS_CONNS, "1")],
        )
        .unwrap();
        c.feed(&wire).unwrap();
        let want = Values {
            max_conns: Some(4),
            max_reqs: Some(16),
            mpxs_conns: Some(true),
        };
        assert_eq!(c.poll_event(), Some(Event::Values(want.clone())));
        assert_eq!(c.values(), Some(&want));
    }

    #[test]
    fn unknown_type_is_reported_spec_4_2() {
        let mut c = Connection::new();
        let mut wire = Vec::new();
        record::push_unknown_type(&mut wire, 9);
        c.feed(&wire).unwrap();
        assert_eq!(c.poll_event(), Some(Event::UnknownType(9)));
    }

    #[test]
    fn cant_mpx_conn_drops_the_connection_to_one_request_at_a_time_spec_5_5() {
        let mut c = Connection::new();
        c.set_max_concurrent(8);
        let mut out = Vec::new();
        let p: [(&str, &str); 0] = [];
        c.start_request(Role::Responder, true, p, &mut out).unwrap();
        let b = c.start_request(Role::Responder, true, p, &mut out).unwrap();
        let mut wire = Vec::new();
        push_end_request(&mut wire, b, 0, ProtocolStatus::CantMpxConn);
        c.feed(&wire).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(Event::End {
                id: b,
                app_status: 0,
                protocol_status: ProtocolStatus::CantMpxConn
            })
        );
        assert_eq!(c.max_concurrent(), 1);
        assert!(!c.has_capacity());
    }

    #[test]
    fn a_request_without_keep_conn_is_the_last_on_its_connection_spec_3_5() {
        let mut c = Connection::new();
        c.set_max_concurrent(4);
        let mut out = Vec::new();
        c.start_request(Role::Responder, false, [("A", "b")], &mut out)
            .unwrap();
        assert_eq!(out[8 + 2], 0, "flags without FCGI_KEEP_CONN");
        assert!(c.is_closing());
        assert_eq!(
            c.start_request(Role::Responder, true, [("A", "b")], &mut out),
            Err(Error::Closing)
        );
    }

    #[test]
    fn abort_sends_abort_request_and_waits_for_end_spec_5_4() {
        let mut c = Connection::new();
        let mut out = Vec::new();
        let id = c
            .start_request(Role::Responder, true, [("A", "b")], &mut out)
            .unwrap();
        out.clear();
        c.abort(id, &mut out).unwrap();
        assert_eq!(out, [1, 2, 0, 1, 0, 0, 0, 0]);
        assert_eq!(c.active(), 1);
        assert_eq!(c.abort(5, &mut out), Err(Error::UnknownRequest(5)));
        assert_eq!(c.abort(0, &mut out), Err(Error::UnknownRequest(0)));
    }

    #[test]
    fn malformed_input_fails_the_connection_but_keeps_earlier_events() {
        let mut c = Connection::new();
        let mut out = Vec::new();
        let id = c
            .start_request(Role::Responder, true, [("A", "b")], &mut out)
            .unwrap();
        let mut wire = stdout(id, b"ok");
        wire.extend_from_slice(&[3, 6, 0, 1, 0, 0, 0, 0]);
        assert_eq!(c.feed(&wire), Err(Error::Version(3)));
        assert_eq!(c.feed(b""), Err(Error::Version(3)));
        assert!(c.is_closing());
        assert!(matches!(c.poll_event(), Some(Event::Stdout { .. })));
        assert_eq!(c.active_ids().collect::<Vec<_>>(), vec![1]);
        // A GET_VALUES_RESULT whose pair runs past its record.
        let mut c = Connection::new();
        let mut wire = Vec::new();
        record::push_record(
            &mut wire,
            RecordType::GetValuesResult,
            0,
            b"\x0e\x09FCGI_MAX_CONNS1",
        )
        .unwrap();
        assert_eq!(c.feed(&wire), Err(Error::BadPairs));
        // Input ending inside a record.
        let mut c = Connection::new();
        c.feed(&wire[..5]).unwrap();
        assert_eq!(c.eof(), Err(Error::Truncated));
    }

    #[test]
    fn a_filter_request_sends_stdin_then_data_spec_6_4() {
        let mut c = Connection::new();
        let mut out = Vec::new();
        let id = c
            .start_request(Role::Filter, true, [("FCGI_DATA_LENGTH", "3")], &mut out)
            .unwrap();
        c.end_stdin(id, &mut out).unwrap();
        c.data(id, b"abc", &mut out).unwrap();
        c.end_data(id, &mut out).unwrap();
        assert_eq!(c.end_data(id, &mut out), Err(Error::StreamEnded(id)));
        let types: Vec<RecordType> = records(&out).iter().map(|r| r.1).collect();
        assert_eq!(
            types[3..],
            [RecordType::Stdin, RecordType::Data, RecordType::Data]
        );
    }
}
