//! The application's side: to write FastCGI applications in Rust.
//!
//! [`Connection`] is the sans-IO core for one transport connection: feed it
//! the web server's bytes and it gathers each request (FCGI_BEGIN_REQUEST,
//! the FCGI_PARAMS stream, FCGI_STDIN and, for a Filter, FCGI_DATA) into a
//! complete [`Request`]. It answers by itself what needs no application
//! code: FCGI_GET_VALUES (§4.1), management records of unknown type with
//! FCGI_UNKNOWN_TYPE (§4.2), a role not offered with UNKNOWN_ROLE, a second
//! request on a connection that does not multiplex with CANT_MPX_CONN, a
//! request over `max_reqs` with OVERLOADED (§5.5), and oversized params or
//! bodies with a `Status: 431`/`413` response.
//!
//! [`blocking`] drives it over std sockets with a thread per request.

pub mod blocking;

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use crate::nv::{self, PairDecoder};
use crate::record::{
    self, Body, Decoder, ProtocolStatus, Record, RecordType, Role, KEEP_CONN, MAX_CONNS, MAX_REQS,
    MPXS_CONNS, NULL_REQUEST_ID,
};
use crate::Error;

/// What the application offers and accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// FCGI_MAX_CONNS as answered; the blocking driver serves at most this
    /// many connections at once (more wait in the listen backlog).
    pub max_conns: u32,
    /// FCGI_MAX_REQS as answered: requests served at once (per connection
    /// in the core, over all connections in the blocking driver). A request
    /// beyond it is answered OVERLOADED.
    pub max_reqs: u32,
    /// FCGI_MPXS_CONNS: serve several requests on one connection at once.
    /// Without it a second request gets CANT_MPX_CONN.
    pub multiplex: bool,
    /// The roles offered; a request for another gets UNKNOWN_ROLE.
    pub roles: Vec<Role>,
    /// Largest FCGI_PARAMS stream, in bytes (431 beyond).
    pub max_params: usize,
    /// Largest FCGI_STDIN, and largest FCGI_DATA, in bytes (413 beyond).
    pub max_stdin: usize,
    /// FCGI_WEB_SERVER_ADDRS (§3.2): the only peers accepted on a TCP
    /// listener; `None` accepts any. Not used for Unix sockets.
    pub web_server_addrs: Option<Vec<IpAddr>>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_conns: 16,
            max_reqs: 64,
            multiplex: true,
            roles: vec![Role::Responder],
            max_params: 1 << 20,
            max_stdin: 64 << 20,
            web_server_addrs: None,
        }
    }
}

impl Settings {
    /// Reads FCGI_WEB_SERVER_ADDRS, a comma-separated list of IP addresses
    /// (§3.2), into `web_server_addrs` if it is set; entries that are not
    /// addresses are skipped.
    pub fn with_env(mut self) -> Settings {
        if let Some(v) = std::env::var_os("FCGI_WEB_SERVER_ADDRS") {
            let list = v
                .to_string_lossy()
                .split(',')
                .filter_map(|s| s.trim().parse().ok())
                .collect();
            self.web_server_addrs = Some(list);
        }
        self
    }

    fn value_of(&self, name: &[u8]) -> Option<String> {
        if name == MAX_CONNS.as_bytes() {
            Some(self.max_conns.to_string())
        } else if name == MAX_REQS.as_bytes() {
            Some(self.max_reqs.to_string())
        } else if name == MPXS_CONNS.as_bytes() {
            Some(if self.multiplex { "1" } else { "0" }.to_owned())
        } else {
            None
        }
    }
}

/// A complete request, ready for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: u16,
    pub role: Role,
    /// FCGI_KEEP_CONN: the web server keeps the connection after it.
    pub keep_conn: bool,
    /// The FCGI_PARAMS pairs in arrival order (the CGI/1.1 environment).
    pub params: Vec<(Vec<u8>, Vec<u8>)>,
    /// The whole FCGI_STDIN (the request body); empty for an Authorizer.
    pub stdin: Vec<u8>,
    /// The whole FCGI_DATA (the file a Filter filters); empty otherwise.
    pub data: Vec<u8>,
}

impl Request {
    /// The first param named `name`.
    pub fn param_bytes(&self, name: &str) -> Option<&[u8]> {
        self.params
            .iter()
            .find(|(n, _)| n == name.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    /// The first param named `name`, if it is UTF-8.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.param_bytes(name)
            .and_then(|v| std::str::from_utf8(v).ok())
    }
}

/// What the core asks of the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppEvent {
    /// A request to run; answer it with output records and
    /// [`Connection::end_request`].
    Request(Request),
    /// FCGI_ABORT_REQUEST for a request already handed out (§5.4): stop
    /// early, then end it as usual.
    Abort(u16),
}

#[derive(Debug)]
enum Req {
    Receiving(Box<Incoming>),
    /// Handed to the application, not yet ended.
    Running {
        keep_conn: bool,
    },
}

#[derive(Debug)]
struct Incoming {
    role: Role,
    keep_conn: bool,
    params: PairDecoder,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    params_done: bool,
    stdin: Vec<u8>,
    stdin_done: bool,
    data: Vec<u8>,
    data_done: bool,
}

impl Incoming {
    fn ready(&self) -> bool {
        self.params_done
            && match self.role {
                // §6.3: an Authorizer gets no body; do not wait for one.
                Role::Authorizer => true,
                Role::Filter => self.stdin_done && self.data_done,
                _ => self.stdin_done,
            }
    }
}

/// The application state of one transport connection. See the module docs.
#[derive(Debug)]
pub struct Connection {
    decoder: Decoder,
    st: State,
}

#[derive(Debug)]
struct State {
    settings: Settings,
    requests: HashMap<u16, Req>,
    events: VecDeque<AppEvent>,
    /// A request without FCGI_KEEP_CONN has been answered: close once idle.
    close: bool,
    failed: Option<Error>,
}

impl Connection {
    pub fn new(settings: Settings) -> Connection {
        Connection {
            decoder: Decoder::new(),
            st: State {
                settings,
                requests: HashMap::new(),
                events: VecDeque::new(),
                close: false,
                failed: None,
            },
        }
    }

    /// Takes bytes from the web server. Answers it needs no application
    /// for are appended to `out`. An error means the web server broke the
    /// protocol: close the connection.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        if let Some(e) = self.st.failed {
            return Err(e);
        }
        let mut pos = 0;
        while pos < input.len() {
            let r = match self.decoder.decode(&input[pos..]) {
                Ok((n, rec)) => {
                    pos += n;
                    match rec {
                        Some(rec) => self.st.on_record(rec, out),
                        None => Ok(()),
                    }
                }
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                self.st.failed = Some(e);
                return Err(e);
            }
        }
        Ok(())
    }

    pub fn poll_event(&mut self) -> Option<AppEvent> {
        self.st.events.pop_front()
    }

    /// Ends a request handed out as [`AppEvent::Request`]: the empty
    /// FCGI_STDOUT and FCGI_STDERR records that end those streams, then
    /// FCGI_END_REQUEST with `app_status` (§5.5). Returns
    /// [`Connection::should_close`].
    pub fn end_request(&mut self, id: u16, app_status: u32, out: &mut Vec<u8>) -> bool {
        self.end_request_with(id, app_status, ProtocolStatus::RequestComplete, out)
    }

    /// Ends a request handed out with any protocol status, e.g. OVERLOADED
    /// when the application finds itself out of resources. Nothing is
    /// written for an id that is not running.
    pub fn end_request_with(
        &mut self,
        id: u16,
        app_status: u32,
        protocol_status: ProtocolStatus,
        out: &mut Vec<u8>,
    ) -> bool {
        if let Some(Req::Running { keep_conn }) = self.st.requests.get(&id) {
            let keep_conn = *keep_conn;
            self.st.requests.remove(&id);
            if protocol_status == ProtocolStatus::RequestComplete {
                record::push_stream_end(out, RecordType::Stdout, id);
                record::push_stream_end(out, RecordType::Stderr, id);
            }
            record::push_end_request(out, id, app_status, protocol_status);
            self.st.answered(keep_conn);
        }
        self.should_close()
    }

    /// True when the application should close the connection now: a request
    /// without FCGI_KEEP_CONN was answered and none is left (§3.5), or the
    /// web server broke the protocol.
    pub fn should_close(&self) -> bool {
        self.st.failed.is_some() || (self.st.close && self.st.requests.is_empty())
    }

    /// Requests begun and not yet ended.
    pub fn active(&self) -> usize {
        self.st.requests.len()
    }
}

impl State {
    fn answered(&mut self, keep_conn: bool) {
        if !keep_conn {
            self.close = true;
        }
    }

    fn on_record(&mut self, rec: Record<'_>, out: &mut Vec<u8>) -> Result<(), Error> {
        let id = rec.request_id;
        if id == NULL_REQUEST_ID {
            match rec.body {
                Body::GetValues(content) => {
                    // §4.1: answer the variables known, skip the others.
                    let mut answer = Vec::new();
                    for pair in nv::pairs(content) {
                        let (name, _) = pair?;
                        if let Some(v) = self.settings.value_of(name) {
                            answer.push((name.to_vec(), v));
                        }
                    }
                    record::push_get_values_result(out, answer)?;
                }
                // Answers, not questions: nothing to say back.
                Body::GetValuesResult(_) | Body::UnknownType(_) => {}
                other => record::push_unknown_type(out, other.record_type().as_u8()),
            }
            return Ok(());
        }
        match rec.body {
            Body::BeginRequest { role, flags } => self.begin(id, role, flags & KEEP_CONN != 0, out),
            Body::AbortRequest => self.abort(id, out),
            Body::Params(c) => self.params(id, c, out),
            Body::Stdin(c) => self.input(id, c, RecordType::Stdin, out),
            Body::Data(c) => self.input(id, c, RecordType::Data, out),
            // §3.3: other records, and records for requests that are not
            // active, are ignored.
            _ => {}
        }
        Ok(())
    }

    fn begin(&mut self, id: u16, role: Role, keep_conn: bool, out: &mut Vec<u8>) {
        if self.close || self.requests.contains_key(&id) {
            // Closing, or a duplicate BEGIN_REQUEST for an active id.
            return;
        }
        let refusal = if !self.settings.roles.contains(&role) {
            Some(ProtocolStatus::UnknownRole)
        } else if !self.settings.multiplex && !self.requests.is_empty() {
            Some(ProtocolStatus::CantMpxConn)
        } else if self.requests.len() >= self.settings.max_reqs as usize {
            Some(ProtocolStatus::Overloaded)
        } else {
            None
        };
        if let Some(status) = refusal {
            record::push_end_request(out, id, 0, status);
            self.answered(keep_conn);
            return;
        }
        self.requests.insert(
            id,
            Req::Receiving(Box::new(Incoming {
                role,
                keep_conn,
                params: PairDecoder::new(self.settings.max_params),
                pairs: Vec::new(),
                params_done: false,
                stdin: Vec::new(),
                stdin_done: false,
                data: Vec::new(),
                data_done: false,
            })),
        );
    }

    fn abort(&mut self, id: u16, out: &mut Vec<u8>) {
        match self.requests.get(&id) {
            Some(Req::Receiving(inc)) => {
                let keep_conn = inc.keep_conn;
                self.requests.remove(&id);
                record::push_end_request(out, id, 0, ProtocolStatus::RequestComplete);
                self.answered(keep_conn);
            }
            Some(Req::Running { .. }) => self.events.push_back(AppEvent::Abort(id)),
            None => {}
        }
    }

    fn params(&mut self, id: u16, content: &[u8], out: &mut Vec<u8>) {
        let Some(Req::Receiving(inc)) = self.requests.get_mut(&id) else {
            return;
        };
        if inc.params_done {
            return;
        }
        let r = if content.is_empty() {
            inc.params_done = true;
            inc.params.finish()
        } else {
            let Incoming { params, pairs, .. } = &mut **inc;
            params.feed(content, |n, v| pairs.push((n.to_vec(), v.to_vec())))
        };
        match r {
            Ok(()) => self.dispatch_if_ready(id),
            Err(Error::TooLarge) => self.refuse(id, "431 Request Header Fields Too Large", out),
            Err(_) => self.refuse(id, "400 Bad Request", out),
        }
    }

    fn input(&mut self, id: u16, content: &[u8], which: RecordType, out: &mut Vec<u8>) {
        let max = self.settings.max_stdin;
        let Some(Req::Receiving(inc)) = self.requests.get_mut(&id) else {
            return;
        };
        let (buf, done) = if which == RecordType::Stdin {
            (&mut inc.stdin, &mut inc.stdin_done)
        } else {
            (&mut inc.data, &mut inc.data_done)
        };
        if *done {
            return;
        }
        if content.is_empty() {
            *done = true;
        } else if buf.len() + content.len() > max {
            return self.refuse(id, "413 Content Too Large", out);
        } else {
            buf.extend_from_slice(content);
        }
        self.dispatch_if_ready(id);
    }

    fn dispatch_if_ready(&mut self, id: u16) {
        let Some(Req::Receiving(inc)) = self.requests.get(&id) else {
            return;
        };
        if !inc.ready() {
            return;
        }
        let keep_conn = inc.keep_conn;
        if let Some(Req::Receiving(inc)) = self.requests.insert(id, Req::Running { keep_conn }) {
            let inc = *inc;
            self.events.push_back(AppEvent::Request(Request {
                id,
                role: inc.role,
                keep_conn,
                params: inc.pairs,
                stdin: inc.stdin,
                data: inc.data,
            }));
        }
    }

    /// Answers a request the core will not hand out with a CGI response of
    /// `status` (§6.2) and a line on FCGI_STDERR.
    fn refuse(&mut self, id: u16, status: &str, out: &mut Vec<u8>) {
        let keep_conn = match self.requests.remove(&id) {
            Some(Req::Receiving(inc)) => inc.keep_conn,
            Some(Req::Running { keep_conn }) => keep_conn,
            None => return,
        };
        let body = format!("Status: {status}\r\nContent-Type: text/plain\r\n\r\n{status}\n");
        record::push_stream(out, RecordType::Stdout, id, body.as_bytes());
        record::push_stream_end(out, RecordType::Stdout, id);
        let msg = format!("FastCGI request {id} refused: {status}\n");
        record::push_stream(out, RecordType::Stderr, id, msg.as_bytes());
        record::push_stream_end(out, RecordType::Stderr, id);
        record::push_end_request(out, id, 1, ProtocolStatus::RequestComplete);
        self.answered(keep_conn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::{self, Event};

    fn settings() -> Settings {
        Settings {
            max_conns: 3,
            max_reqs: 5,
            multiplex: true,
            roles: vec![Role::Responder, Role::Authorizer, Filter],
            max_params: 4096,
            max_stdin: 100,
            web_server_addrs: None,
        }
    }
    use Role::Filter;

    /// Runs gateway output through the core and the answers back through
    /// the gateway, handling requests with `f`.
    fn exchange(
        g: &mut gateway::Connection,
        a: &mut Connection,
        wire: &[u8],
        f: impl Fn(&Request) -> (Vec<u8>, u32),
    ) -> Vec<Event> {
        let mut back = Vec::new();
        a.feed(wire, &mut back).unwrap();
        while let Some(ev) = a.poll_event() {
            if let AppEvent::Request(r) = ev {
                let (body, status) = f(&r);
                record::push_stream(&mut back, RecordType::Stdout, r.id, &body);
                a.end_request(r.id, status, &mut back);
            }
        }
        g.feed(&back).unwrap();
        std::iter::from_fn(|| g.poll_event()).collect()
    }

    #[test]
    fn a_responder_gets_params_and_the_whole_stdin_spec_6_2() {
        let mut g = gateway::Connection::new();
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        let id = g
            .start_request(
                Role::Responder,
                true,
                [("REQUEST_METHOD", "POST"), ("CONTENT_LENGTH", "4")],
                &mut wire,
            )
            .unwrap();
        g.stdin(id, b"ab", &mut wire).unwrap();
        g.stdin(id, b"cd", &mut wire).unwrap();
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        assert_eq!(a.poll_event(), None, "not before the end of stdin");
        wire.clear();
        g.end_stdin(id, &mut wire).unwrap();
        a.feed(&wire, &mut back).unwrap();
        let Some(AppEvent::Request(r)) = a.poll_event() else {
            panic!()
        };
        assert_eq!(r.param("REQUEST_METHOD"), Some("POST"));
        assert_eq!(r.stdin, b"abcd");
        assert!(r.keep_conn);
        assert!(back.is_empty());
        assert!(!a.end_request(id, 7, &mut back));
        g.feed(&back).unwrap();
        assert_eq!(
            g.poll_event(),
            Some(Event::End {
                id,
                app_status: 7,
                protocol_status: ProtocolStatus::RequestComplete
            })
        );
    }

    #[test]
    fn an_authorizer_is_run_without_waiting_for_stdin_spec_6_3() {
        let mut g = gateway::Connection::new();
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        g.start_request(Role::Authorizer, true, [("REMOTE_USER", "bob")], &mut wire)
            .unwrap();
        let evs = exchange(&mut g, &mut a, &wire, |r| {
            assert_eq!(r.role, Role::Authorizer);
            (b"Status: 200\r\nVariable-USER: bob\r\n\r\n".to_vec(), 0)
        });
        assert!(matches!(evs.last(), Some(Event::End { .. })));
    }

    #[test]
    fn a_filter_gets_stdin_and_data_spec_6_4() {
        let mut g = gateway::Connection::new();
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        let id = g
            .start_request(Filter, true, [("FCGI_DATA_LENGTH", "4")], &mut wire)
            .unwrap();
        g.end_stdin(id, &mut wire).unwrap();
        g.data(id, b"file", &mut wire).unwrap();
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        assert_eq!(a.poll_event(), None, "not before the end of data");
        wire.clear();
        g.end_data(id, &mut wire).unwrap();
        a.feed(&wire, &mut back).unwrap();
        let Some(AppEvent::Request(r)) = a.poll_event() else {
            panic!()
        };
        assert_eq!(r.data, b"file");
    }

    #[test]
    fn get_values_is_answered_with_the_configured_values_spec_4_1() {
        let mut g = gateway::Connection::new();
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        g.query_values(&mut wire);
        // And a name the application does not know: skipped.
        record::push_get_values(&mut wire, ["FCGI_OTHER", MPXS_CONNS]).unwrap();
        let evs = exchange(&mut g, &mut a, &wire, |_| unreachable!());
        let v = record::Values {
            max_conns: Some(3),
            max_reqs: Some(5),
            mpxs_conns: Some(true),
        };
        assert_eq!(
            evs,
            vec![
                Event::Values(v),
                Event::Values(record::Values {
                    mpxs_conns: Some(true),
                    ..Default::default()
                })
            ]
        );
    }

    #[test]
    fn unknown_management_types_are_answered_with_unknown_type_spec_4_2() {
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        record::push_record(&mut wire, RecordType::Other(77), 0, b"?").unwrap();
        record::push_begin_request(&mut wire, 0, Role::Responder, true);
        // An unknown type on a request id is ignored (§3.3).
        record::push_record(&mut wire, RecordType::Other(77), 3, b"?").unwrap();
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        let mut want = Vec::new();
        record::push_unknown_type(&mut want, 77);
        record::push_unknown_type(&mut want, 1);
        assert_eq!(back, want);
    }

    #[test]
    fn a_role_not_offered_gets_unknown_role_spec_5_5() {
        let mut a = Connection::new(Settings::default());
        let mut wire = Vec::new();
        record::push_begin_request(&mut wire, 1, Role::Filter, true);
        record::push_begin_request(&mut wire, 2, Role::Other(9), true);
        nv::push_params(&mut wire, 1, [("A", "b")]).unwrap();
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        let mut want = Vec::new();
        record::push_end_request(&mut want, 1, 0, ProtocolStatus::UnknownRole);
        record::push_end_request(&mut want, 2, 0, ProtocolStatus::UnknownRole);
        assert_eq!(back, want);
        assert_eq!(a.active(), 0);
    }

    #[test]
    fn a_second_request_without_multiplexing_gets_cant_mpx_conn_spec_5_5() {
        let mut a = Connection::new(Settings {
            multiplex: false,
            ..settings()
        });
        let mut wire = Vec::new();
        record::push_begin_request(&mut wire, 1, Role::Responder, true);
        record::push_begin_request(&mut wire, 2, Role::Responder, true);
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        let mut want = Vec::new();
        record::push_end_request(&mut want, 2, 0, ProtocolStatus::CantMpxConn);
        assert_eq!(back, want);
        assert_eq!(a.active(), 1);
    }

    #[test]
    fn requests_beyond_max_reqs_are_overloaded_spec_5_5() {
        let mut a = Connection::new(Settings {
            max_reqs: 1,
            ..settings()
        });
        let mut wire = Vec::new();
        record::push_begin_request(&mut wire, 1, Role::Responder, true);
        record::push_begin_request(&mut wire, 2, Role::Responder, true);
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        let mut want = Vec::new();
        record::push_end_request(&mut want, 2, 0, ProtocolStatus::Overloaded);
        assert_eq!(back, want);
    }

    #[test]
    fn without_keep_conn_the_application_closes_after_the_request_spec_3_5() {
        let mut g = gateway::Connection::new();
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        let id = g
            .start_request(Role::Responder, false, [("A", "b")], &mut wire)
            .unwrap();
        g.end_stdin(id, &mut wire).unwrap();
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        assert!(matches!(a.poll_event(), Some(AppEvent::Request(_))));
        assert!(!a.should_close());
        assert!(a.end_request(id, 0, &mut back));
    }

    #[test]
    fn an_abort_ends_a_request_still_arriving_or_is_passed_on_spec_5_4() {
        let mut g = gateway::Connection::new();
        g.set_max_concurrent(2);
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        let one = g
            .start_request(Role::Responder, true, [("A", "b")], &mut wire)
            .unwrap();
        let two = g
            .start_request(Role::Responder, true, [("A", "b")], &mut wire)
            .unwrap();
        g.end_stdin(two, &mut wire).unwrap();
        g.abort(one, &mut wire).unwrap();
        g.abort(two, &mut wire).unwrap();
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        assert!(matches!(a.poll_event(), Some(AppEvent::Request(r)) if r.id == two));
        assert_eq!(a.poll_event(), Some(AppEvent::Abort(two)));
        g.feed(&back).unwrap();
        assert!(matches!(g.poll_event(), Some(Event::End { id, .. }) if id == one));
    }

    #[test]
    fn oversized_params_or_stdin_are_refused_with_a_status() {
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        record::push_begin_request(&mut wire, 1, Role::Responder, true);
        nv::push_params(&mut wire, 1, [("A", "b")]).unwrap();
        record::push_stream(&mut wire, RecordType::Stdin, 1, &[b'x'; 101]);
        record::push_begin_request(&mut wire, 2, Role::Responder, true);
        nv::push_params(&mut wire, 2, [("A", vec![b'v'; 5000])]).unwrap();
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        let mut g = gateway::Connection::new();
        g.set_max_concurrent(2);
        let mut sink = Vec::new();
        let p: [(&str, &str); 0] = [];
        g.start_request(Role::Responder, true, p, &mut sink)
            .unwrap();
        g.start_request(Role::Responder, true, p, &mut sink)
            .unwrap();
        g.feed(&back).unwrap();
        let evs: Vec<Event> = std::iter::from_fn(|| g.poll_event()).collect();
        let starts: Vec<&[u8]> = evs
            .iter()
            .filter_map(|e| match e {
                Event::Stdout { data, .. } => Some(&data[..11]),
                _ => None,
            })
            .collect();
        assert_eq!(starts, [&b"Status: 413"[..], b"Status: 431"]);
        assert_eq!(a.active(), 0);
    }

    #[test]
    fn malformed_params_are_a_bad_request_and_bad_records_fail_the_connection() {
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        record::push_begin_request(&mut wire, 1, Role::Responder, true);
        record::push_stream(&mut wire, RecordType::Params, 1, b"\x05\x01ab");
        record::push_stream_end(&mut wire, RecordType::Params, 1);
        let mut back = Vec::new();
        a.feed(&wire, &mut back).unwrap();
        assert!(back.windows(15).any(|w| w == b"400 Bad Request"));
        assert_eq!(
            a.feed(&[1, 1, 0, 1, 0, 3, 0, 0], &mut back),
            Err(Error::BodyLength {
                record_type: 1,
                length: 3
            })
        );
        assert!(a.should_close());
        // GET_VALUES whose pair runs past its record.
        let mut a = Connection::new(settings());
        let mut wire = Vec::new();
        record::push_record(&mut wire, RecordType::GetValues, 0, b"\x0e\x00FCGI").unwrap();
        assert_eq!(a.feed(&wire, &mut back), Err(Error::BadPairs));
    }
}
