//! The one life of a request at an upstream, whatever the protocol:
//! lease a server, connect or reuse a parked connection, send, receive,
//! park or close; and when a try fails, one loop decides from a typed
//! [`Fail`] whether the request goes again (pingora's `RetryType`;
//! lighttpd's `gw_backend.c`, whose protocols supply callbacks).
//!
//! Each protocol (FastCGI, HTTP/1, HTTP/2) supplies its [`Steps`]; the
//! loop here owns the lease, the choice of server, the retry decision,
//! the log line of a failure and the answer when no try is left.
//!
//! The retry rule, once:
//! - a try that put a response byte on its way to the client is never
//!   repeated (the protocol then returns `Ok`);
//! - [`Retry::Unsent`]: the application cannot have acted on the request
//!   (the connection was refused, reset with the request unread, or the
//!   application refused it with a status of its own): any request may go
//!   again;
//! - [`Retry::MaybeSent`]: the application may have acted on it (a clean
//!   close or a death before the response head, a timeout, a 5xx the route
//!   retries on): only an idempotent request (RFC 9110 §9.2.2, or one with
//!   an `Idempotency-Key`), or any with `retries.non_idempotent`;
//! - a body partly taken from the client (streamed) never goes again;
//! - a connection that was parked and failed before any response byte met
//!   the keep-alive race: the request goes again on a new connection
//!   (twice at most) whatever `retries.on` says, since the reuse failed
//!   and not the server (nginx does not count such a failure against
//!   `proxy_next_upstream_tries` either); to the same HTTP server, or to
//!   another FastCGI process ([`Steps::RACE_ELSEWHERE`]);
//! - a server that failed a new connection is held off (out of rotation
//!   for [`HOLD_OFF`] when the pool has another) and the next try goes to
//!   another server; with none left the client gets the failure's status
//!   at once (nginx: 502 in milliseconds, not a wait in the queue for a
//!   server that will not be tried again). Only a protocol whose server
//!   comes back on the same socket ([`Steps::SAME_SERVER_PAUSE`]: a
//!   FastCGI process restarted or reloaded behind its listening socket)
//!   tries the same server again, after that pause.

use crate::exchange::Exchange;
use crate::gateway::{self, Input};
use crate::upstream::{Lease, Pool, Proc};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server that refused a connection or died mid-request is left out of
/// rotation this long (when the pool has others): nginx's `fail_timeout`
/// with `max_fails=1`.
pub(crate) const HOLD_OFF: Duration = Duration::from_secs(2);

/// Resends after a kept-alive connection failed before any response byte
/// (the keep-alive race), per request; and tries of the same server after
/// a pause ([`Steps::SAME_SERVER_PAUSE`]).
const RACE_RESENDS: u8 = 2;

/// Sends of one request, whatever `retries.tries` says: a bound on a
/// request's time at failing servers.
const MAX_SENDS: u32 = 8;

/// Whether a failed try may be repeated, as far as the request is
/// concerned (see the module's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// The application cannot have acted on the request.
    Unsent,
    /// It may have: only idempotent requests go again.
    MaybeSent,
    /// Never (the client was answered, or Stoa itself failed).
    Never,
}

/// What went wrong, as `retries.on` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Connecting failed, or the connection broke before a response head
    /// (`error`).
    Error,
    /// Connecting, sending or the response head took too long (`timeout`).
    Timeout,
    /// The application answered with this status (`http_502`, ...); the
    /// response was not passed on.
    Status(u16),
    /// The application refused the request before reading it (FastCGI
    /// OVERLOADED, CANT_MPX_CONN): counted as `error`.
    Refused,
    /// Stoa's own failure (a request it cannot encode): never retried.
    Local,
}

/// A try that failed before any byte of a response reached the client.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) cause: Cause,
    pub(crate) retry: Retry,
    /// The connection had been parked (the keep-alive race is possible).
    pub(crate) reused: bool,
    /// The same server may take the next try (FastCGI CANT_MPX_CONN: the
    /// process is fine, only not multiplexing).
    pub(crate) same_server: bool,
    /// What the client gets when no try is left.
    pub(crate) status: u16,
    /// Say `Retry-After: 1` with it (the application is overloaded).
    pub(crate) retry_after: bool,
    /// For the log line: what happened.
    pub(crate) what: String,
}

impl Fail {
    /// A failure before any response head: `Unsent` when the connection
    /// was reset with the request unread on a reused connection.
    pub(crate) fn closed(reused: bool, retry: Retry, what: impl Into<String>) -> Fail {
        Fail {
            cause: Cause::Error,
            retry,
            reused,
            same_server: false,
            status: 502,
            retry_after: false,
            what: what.into(),
        }
    }

    /// A connection that could not be made: nothing was sent, so any
    /// request may go to another server.
    pub(crate) fn connect(e: &std::io::Error) -> Fail {
        let mut f = Fail::closed(false, Retry::Unsent, format!("connect: {e}"));
        if e.kind() == std::io::ErrorKind::TimedOut {
            f.cause = Cause::Timeout;
        }
        f
    }

    pub(crate) fn timeout(reused: bool, what: impl Into<String>) -> Fail {
        Fail {
            cause: Cause::Timeout,
            retry: Retry::MaybeSent,
            reused,
            same_server: false,
            status: 504,
            retry_after: false,
            what: what.into(),
        }
    }

    pub(crate) fn local(status: u16, what: impl Into<String>) -> Fail {
        Fail {
            cause: Cause::Local,
            retry: Retry::Never,
            reused: false,
            same_server: false,
            status,
            retry_after: false,
            what: what.into(),
        }
    }

    /// A response the route's `retries.on` names (`http_502` ...), not
    /// passed on.
    pub(crate) fn status(reused: bool, status: u16) -> Fail {
        Fail {
            cause: Cause::Status(status),
            retry: Retry::MaybeSent,
            reused,
            same_server: false,
            status,
            retry_after: false,
            what: format!("answered {status}"),
        }
    }

    /// The keep-alive race: a parked connection that failed before any
    /// response byte, for a reason other than the server's answer.
    fn is_race(&self) -> bool {
        self.reused && matches!(self.cause, Cause::Error)
    }
}

/// `retries = { on = [...], tries = N, within = "10s", non_idempotent }`
/// of a `proxy = {}` or `fastcgi = {}` route (nginx `proxy_next_upstream`,
/// `_tries`, `_timeout`; Caddy `lb_try_duration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Retries {
    pub(crate) on_error: bool,
    pub(crate) on_timeout: bool,
    /// Statuses (502, 503, 504) whose responses are not passed on while
    /// a try is left.
    pub(crate) on_status: Vec<u16>,
    /// Most sends of one request (the first included); 0: no limit but
    /// the pool's servers.
    pub(crate) tries: u32,
    /// No new try after this long since the first.
    pub(crate) within: Option<Duration>,
    /// Requests that are not idempotent go again too after a failure that
    /// may have reached the application.
    pub(crate) non_idempotent: bool,
}

impl Default for Retries {
    /// nginx's default `proxy_next_upstream error timeout`.
    fn default() -> Retries {
        Retries {
            on_error: true,
            on_timeout: true,
            on_status: Vec::new(),
            tries: 0,
            within: None,
            non_idempotent: false,
        }
    }
}

/// `retries = {...}` as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetriesConfig {
    pub on: Option<Vec<String>>,
    pub tries: Option<u32>,
    pub within: Option<crate::units::Dur>,
    pub non_idempotent: Option<bool>,
}

impl RetriesConfig {
    pub(crate) fn validate(&self) -> Result<Retries, String> {
        let mut r = Retries::default();
        if let Some(on) = &self.on {
            r.on_error = false;
            r.on_timeout = false;
            for w in on {
                match w.as_str() {
                    "error" => r.on_error = true,
                    "timeout" => r.on_timeout = true,
                    "http_502" => r.on_status.push(502),
                    "http_503" => r.on_status.push(503),
                    "http_504" => r.on_status.push(504),
                    other => {
                        return Err(format!(
                            "on: `{other}`: \"error\", \"timeout\", \"http_502\", \"http_503\" or \"http_504\""
                        ))
                    }
                }
            }
        }
        r.tries = self.tries.unwrap_or(0);
        r.within = self.within.map(|d| d.0);
        r.non_idempotent = self.non_idempotent.unwrap_or(false);
        Ok(r)
    }
}

/// What one try knows of the loop: whether the connection was parked,
/// and which response statuses it should give back as a [`Fail`] instead
/// of passing them on (empty when the request cannot go again).
pub(crate) struct Try<'r> {
    pub(crate) reused: bool,
    pub(crate) retry_statuses: &'r [u16],
}

/// A protocol's steps. The loop calls `reuse` or `connect`, then
/// `exchange`, which sends the request, passes the response on, and parks
/// or closes the connection (and frees the lease) as the protocol knows
/// best; it returns a [`Fail`] only while nothing reached the client.
pub(crate) trait Steps {
    /// A connection for one try (an own stream, a share of a multiplexed
    /// one).
    type Conn;
    /// What an exchange that ended the request returns.
    type Out;
    /// The pause before the same server takes the next try after a new
    /// connection to it failed; `None`: another server or the answer.
    const SAME_SERVER_PAUSE: Option<Duration>;
    /// After a parked connection failed before any response byte (the
    /// keep-alive race), send the request on to another server when the
    /// pool has one, rather than on a new connection to the same.
    const RACE_ELSEWHERE: bool;
    /// The name of the protocol in log lines ("proxy", "fastcgi").
    const KIND: &'static str;
    /// How its log lines say a request goes to the next server.
    const ANOTHER: &'static str;

    /// A parked connection to the lease's server that still looks usable.
    /// `strict`: the request could not go again after the keep-alive race,
    /// so look before using one (a peek).
    fn reuse(&mut self, lease: &Lease, strict: bool) -> Option<Self::Conn>;

    /// A new connection, or why not (a `Cause::Error` or `Timeout` fail
    /// holds the server off; a `Local` one is answered as it says).
    async fn connect(&mut self, lease: &Lease) -> Result<Self::Conn, Fail>;

    /// Sends, receives, parks or closes.
    async fn exchange(
        &mut self,
        ex: &mut Exchange<'_>,
        lease: Lease,
        conn: Self::Conn,
        input: &mut Input,
        t: &Try<'_>,
    ) -> Result<Self::Out, Fail>;

    /// Answers the client when no try is left (or no server is free) with
    /// `status`: a status page, closing the connection when part of the
    /// body may be gone (`sent`). The HTTP/2 steps answer a gRPC call in
    /// its own terms instead (`grpc-status`).
    async fn answer(&self, ex: &mut Exchange<'_>, status: u16, retry_after: bool, sent: bool) {
        if retry_after {
            gateway::simple(ex, status, &[("Retry-After", b"1")]);
        } else if sent {
            // Part of the body may be gone to the application: answer and
            // close.
            gateway::fail_now(ex, status).await;
        } else {
            gateway::simple(ex, status, &[]);
        }
    }
}

/// What the loop needs of a request besides its steps.
pub(crate) struct Plan<'a> {
    pub(crate) pool: &'a Arc<Pool>,
    pub(crate) retries: &'a Retries,
    /// The body went out as it came (it cannot be sent again).
    pub(crate) streamed: bool,
}

/// The one idempotency rule: RFC 9110 §9.2.2's methods, and a request
/// with an `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header:
/// the application deduplicates it, so sending it twice is safe). FastCGI
/// and HTTP alike.
pub(crate) fn idempotent(ex: &Exchange<'_>) -> bool {
    let head = ex.req();
    head.method.is_idempotent() || head.header("idempotency-key").is_some()
}

/// What the loop knows of a request's tries so far.
#[derive(Debug)]
struct Tally {
    /// Servers in the pool.
    servers: usize,
    /// Servers that failed it (each is tried once).
    failed: usize,
    /// Sends so far (the first included).
    sends: u32,
    races_left: u8,
    pauses_left: u8,
}

impl Tally {
    fn new(servers: usize) -> Tally {
        Tally {
            servers,
            failed: 0,
            sends: 0,
            races_left: RACE_RESENDS,
            pauses_left: RACE_RESENDS,
        }
    }
}

/// How a protocol's servers differ where the rule lets them.
#[derive(Debug, Clone, Copy)]
struct Rules {
    race_elsewhere: bool,
    same_server_pause: Option<Duration>,
}

/// The request as the rule sees it.
#[derive(Debug, Clone, Copy)]
struct Request {
    /// Idempotent (or `retries.non_idempotent`).
    idempotent: bool,
    /// Its body is all in hand (not streamed): it can be sent again.
    resendable: bool,
    /// Time since its first try.
    elapsed: Duration,
}

/// What to do after a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Answer the client with the failure's status; why, for the log.
    GiveUp(&'static str),
    /// The keep-alive race: a new connection, to another server
    /// (`true`) or the same.
    Race(bool),
    /// The same server (it only asked for a different way).
    Same,
    /// Another server; the failed one is held off.
    Another,
    /// The same server after this pause.
    Pause(Duration),
}

/// The retry rule (the module's doc), as a pure function: updates `t`.
fn decide(f: &Fail, t: &mut Tally, pol: &Retries, req: Request, rules: Rules) -> Next {
    let race = f.is_race();
    if !race && !f.same_server && f.cause != Cause::Local {
        t.failed += 1;
    }
    let other = t.failed < t.servers;
    let wanted = match f.cause {
        _ if race => true,
        Cause::Error | Cause::Refused => pol.on_error,
        Cause::Timeout => pol.on_timeout,
        Cause::Status(s) => pol.on_status.contains(&s),
        Cause::Local => false,
    };
    let safe = match f.retry {
        Retry::Unsent => true,
        Retry::MaybeSent => req.idempotent,
        Retry::Never => false,
    } && req.resendable;
    let in_budget = if race {
        t.races_left > 0
    } else {
        (pol.tries == 0 || t.sends < pol.tries)
            && pol.within.is_none_or(|w| req.elapsed < w)
            && t.sends < MAX_SENDS
    };
    // The same server after a pause, where the protocol's servers come
    // back on their socket: only after a broken connection (an overloaded
    // or slow server is not asked again at once).
    let pause = rules
        .same_server_pause
        .filter(|_| f.cause == Cause::Error && t.pauses_left > 0);
    let target_ok = race || f.same_server || other || pause.is_some();
    if !wanted || !safe {
        return Next::GiveUp("not sent again");
    }
    if !in_budget {
        return Next::GiveUp("tried enough");
    }
    if !target_ok {
        return Next::GiveUp("no other server to try");
    }
    if race {
        t.races_left -= 1;
        return Next::Race(rules.race_elsewhere && t.servers > 1);
    }
    if f.same_server {
        return Next::Same;
    }
    if other {
        return Next::Another;
    }
    match pause {
        Some(p) => {
            t.pauses_left -= 1;
            Next::Pause(p)
        }
        None => Next::GiveUp("no other server to try"),
    }
}

/// Runs the request through `steps` until it is answered. `None`: the
/// client was answered here (503 from the queue, or the last failure's
/// status).
pub(crate) async fn run<S: Steps>(
    steps: &mut S,
    plan: &Plan<'_>,
    ex: &mut Exchange<'_>,
    input: &mut Input,
) -> Option<S::Out> {
    let pool = plan.pool;
    let pol = plan.retries;
    let key = gateway::affinity_key(&pool.spec.affinity, ex);
    let idem = idempotent(ex) || pol.non_idempotent;
    let started = Instant::now();
    let rules = Rules {
        race_elsewhere: S::RACE_ELSEWHERE,
        same_server_pause: S::SAME_SERVER_PAUSE,
    };
    let mut tally = Tally::new(pool.procs.len());
    let mut skip = None;
    loop {
        let Some(lease) = gateway::lease_logged(pool, key.as_deref(), skip, ex, S::KIND).await
        else {
            steps.answer(ex, 503, true, false).await;
            return None;
        };
        ex.upstream_began(gateway::target_addr(&lease.proc.target));
        let proc = lease.proc.clone();
        let resendable = !plan.streamed && input.replayable();
        let parked = steps.reuse(&lease, !(idem && resendable));
        let reused = parked.is_some();
        let conn = match parked {
            Some(c) => c,
            None => match steps.connect(&lease).await {
                Ok(c) => c,
                Err(f) => {
                    if f.cause != Cause::Local {
                        pool.hold_off(&proc, HOLD_OFF);
                    }
                    drop(lease);
                    // Nothing was sent: any request may try another server.
                    let req = Request {
                        idempotent: true,
                        resendable: true,
                        elapsed: started.elapsed(),
                    };
                    let next = decide(
                        &f,
                        &mut tally,
                        pol,
                        req,
                        Rules {
                            race_elsewhere: false,
                            same_server_pause: None,
                        },
                    );
                    if next == Next::Another {
                        log_retry(ex, pool, &proc, S::KIND, &f, S::ANOTHER);
                        skip = Some(proc.index);
                        continue;
                    }
                    let why = match next {
                        Next::GiveUp(why) => why,
                        _ => "no other server to try",
                    };
                    give_up(steps, ex, pool, &proc, &f, why, false).await;
                    return None;
                }
            },
        };
        tally.sends += 1;
        let left = (pol.tries == 0 || tally.sends < pol.tries)
            && pol.within.is_none_or(|w| started.elapsed() < w)
            && resendable
            && idem;
        let statuses: &[u16] = if left && tally.failed + 1 < tally.servers {
            &pol.on_status
        } else {
            &[]
        };
        let t = Try {
            reused,
            retry_statuses: statuses,
        };
        let f = match steps.exchange(ex, lease, conn, input, &t).await {
            Ok(out) => return Some(out),
            Err(f) => f,
        };
        let req = Request {
            idempotent: idem,
            resendable,
            elapsed: started.elapsed(),
        };
        let mut next = decide(&f, &mut tally, pol, req, rules);
        if !matches!(next, Next::GiveUp(_)) && !input.rewind() {
            next = Next::GiveUp("not sent again");
        }
        match next {
            Next::GiveUp(why) => {
                give_up(steps, ex, pool, &proc, &f, why, true).await;
                return None;
            }
            Next::Race(elsewhere) => {
                // The server's other parked connections are as suspect:
                // closed, so the next try connects anew.
                proc.retried();
                let what = if elsewhere {
                    S::ANOTHER
                } else {
                    "retrying on a new one"
                };
                log_retry(ex, pool, &proc, S::KIND, &f, what);
                skip = elsewhere.then_some(proc.index);
            }
            Next::Same => {
                log_retry(ex, pool, &proc, S::KIND, &f, "trying again");
                skip = None;
            }
            Next::Another => {
                if matches!(f.cause, Cause::Error | Cause::Timeout) {
                    pool.hold_off(&proc, HOLD_OFF);
                }
                log_retry(ex, pool, &proc, S::KIND, &f, S::ANOTHER);
                skip = Some(proc.index);
            }
            Next::Pause(pause) => {
                proc.retried();
                log_retry(ex, pool, &proc, S::KIND, &f, "retrying on a new one");
                // The process is going away: its successor takes over the
                // socket in a moment.
                tokio::time::sleep(pause).await;
                skip = None;
            }
        }
    }
}

fn log_retry(ex: &Exchange<'_>, pool: &Pool, proc: &Proc, kind: &str, f: &Fail, next: &str) {
    tracing::info!(
        "{kind} pool {}: server #{} ({}) {}{}; {next}; {}",
        pool.spec.name,
        proc.index,
        proc.target,
        f.what,
        if f.reused {
            " on a kept-alive connection"
        } else {
            ""
        },
        ex.who()
    );
}

/// Answers the client with the failure's status and logs why.
async fn give_up<S: Steps>(
    steps: &S,
    ex: &mut Exchange<'_>,
    pool: &Pool,
    proc: &Proc,
    f: &Fail,
    why: &str,
    sent: bool,
) {
    let kind = S::KIND;
    let head = ex.req();
    tracing::error!(
        "{kind} pool {}: server #{} ({}) {}{}; {} ({} {why}); {}",
        pool.spec.name,
        proc.index,
        proc.target,
        f.what,
        if f.reused {
            " on a kept-alive connection"
        } else {
            ""
        },
        f.status,
        head.method.as_str(),
        ex.who()
    );
    steps.answer(ex, f.status, f.retry_after, sent).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTTP: Rules = Rules {
        race_elsewhere: false,
        same_server_pause: None,
    };
    const FASTCGI: Rules = Rules {
        race_elsewhere: true,
        same_server_pause: Some(Duration::from_millis(50)),
    };

    fn req(idempotent: bool) -> Request {
        Request {
            idempotent,
            resendable: true,
            elapsed: Duration::ZERO,
        }
    }

    fn sent(t: &mut Tally) -> &mut Tally {
        t.sends += 1;
        t
    }

    /// nginx: "upstream prematurely closed connection" with one server and
    /// nowhere left to go is a 502 at once, for a GET as for a POST.
    #[test]
    fn a_new_connection_closed_by_the_only_http_server_is_given_up_at_once() {
        let f = Fail::closed(false, Retry::MaybeSent, "closed");
        let pol = Retries::default();
        let mut t = Tally::new(1);
        assert_eq!(
            decide(&f, sent(&mut t), &pol, req(true), HTTP),
            Next::GiveUp("no other server to try")
        );
        let mut t = Tally::new(1);
        assert_eq!(
            decide(&f, sent(&mut t), &pol, req(false), HTTP),
            Next::GiveUp("not sent again")
        );
    }

    /// RFC 9110 §9.2.2: a request the application may have acted on goes
    /// again only when idempotent; one it cannot have (a reset with the
    /// request unread) goes again whatever its method.
    #[test]
    fn only_idempotent_requests_go_again_after_a_failure_that_may_have_reached_the_application() {
        let pol = Retries::default();
        let maybe = Fail::closed(false, Retry::MaybeSent, "closed");
        let mut t = Tally::new(2);
        assert_eq!(
            decide(&maybe, sent(&mut t), &pol, req(true), HTTP),
            Next::Another
        );
        let mut t = Tally::new(2);
        assert_eq!(
            decide(&maybe, sent(&mut t), &pol, req(false), HTTP),
            Next::GiveUp("not sent again")
        );
        let unsent = Fail::connect(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let mut t = Tally::new(2);
        assert_eq!(
            decide(&unsent, &mut t, &pol, req(false), HTTP),
            Next::Another
        );
        // `non_idempotent = true` is the caller's `idempotent`.
        let streamed = Request {
            resendable: false,
            ..req(true)
        };
        let mut t = Tally::new(2);
        assert_eq!(
            decide(&unsent, &mut t, &pol, streamed, HTTP),
            Next::GiveUp("not sent again")
        );
    }

    /// The keep-alive race is the reuse's failure, not the server's: twice
    /// at most, on a new connection to the same HTTP server (another
    /// FastCGI process), even with `retries.on = []`.
    #[test]
    fn the_keep_alive_race_goes_again_twice_whatever_retries_on_says() {
        let pol = Retries {
            on_error: false,
            on_timeout: false,
            ..Retries::default()
        };
        let race = Fail::closed(true, Retry::MaybeSent, "closed");
        let mut t = Tally::new(2);
        assert_eq!(
            decide(&race, sent(&mut t), &pol, req(true), HTTP),
            Next::Race(false)
        );
        assert_eq!(
            decide(&race, sent(&mut t), &pol, req(true), FASTCGI),
            Next::Race(true)
        );
        assert_eq!(
            decide(&race, sent(&mut t), &pol, req(true), HTTP),
            Next::GiveUp("tried enough")
        );
        assert_eq!(t.failed, 0, "a race is not the server's failure");
    }

    /// nginx `proxy_next_upstream` without `timeout`: a slow server's 504
    /// goes to the client; with it, the next server gets the request.
    #[test]
    fn retries_on_names_the_failures_that_go_to_the_next_server() {
        let slow = Fail::timeout(false, "slow");
        let only_errors = RetriesConfig {
            on: Some(vec!["error".into()]),
            ..RetriesConfig::default()
        }
        .validate()
        .expect("valid");
        let mut t = Tally::new(3);
        assert_eq!(
            decide(&slow, sent(&mut t), &only_errors, req(true), HTTP),
            Next::GiveUp("not sent again")
        );
        let mut t = Tally::new(3);
        assert_eq!(
            decide(&slow, sent(&mut t), &Retries::default(), req(true), HTTP),
            Next::Another
        );
        let s503 = Fail::status(false, 503);
        let on503 = RetriesConfig {
            on: Some(vec!["http_503".into()]),
            ..RetriesConfig::default()
        }
        .validate()
        .expect("valid");
        let mut t = Tally::new(3);
        assert_eq!(
            decide(&s503, sent(&mut t), &on503, req(true), HTTP),
            Next::Another
        );
        assert!(RetriesConfig {
            on: Some(vec!["http_500".into()]),
            ..RetriesConfig::default()
        }
        .validate()
        .is_err());
    }

    /// `tries` counts sends, the first included (nginx
    /// `proxy_next_upstream_tries`); `within` bounds the time
    /// (`proxy_next_upstream_timeout`).
    #[test]
    fn tries_and_within_bound_the_retries() {
        let f = Fail::closed(false, Retry::MaybeSent, "closed");
        let pol = Retries {
            tries: 2,
            ..Retries::default()
        };
        let mut t = Tally::new(5);
        assert_eq!(
            decide(&f, sent(&mut t), &pol, req(true), HTTP),
            Next::Another
        );
        assert_eq!(
            decide(&f, sent(&mut t), &pol, req(true), HTTP),
            Next::GiveUp("tried enough")
        );
        let pol = Retries {
            within: Some(Duration::from_secs(1)),
            ..Retries::default()
        };
        let late = Request {
            elapsed: Duration::from_secs(2),
            ..req(true)
        };
        let mut t = Tally::new(5);
        assert_eq!(
            decide(&f, sent(&mut t), &pol, late, HTTP),
            Next::GiveUp("tried enough")
        );
    }

    /// A lone FastCGI process that closed a new connection is on its way
    /// out and its successor takes over its socket: tried again after a
    /// pause, twice at most. An overloaded one is not asked again at once.
    #[test]
    fn a_lone_fastcgi_process_is_tried_again_after_a_pause_only_when_its_connection_broke() {
        let pol = Retries::default();
        let broke = Fail::closed(false, Retry::MaybeSent, "lost");
        let mut t = Tally::new(1);
        let pause = Next::Pause(Duration::from_millis(50));
        assert_eq!(
            decide(&broke, sent(&mut t), &pol, req(true), FASTCGI),
            pause
        );
        assert_eq!(
            decide(&broke, sent(&mut t), &pol, req(true), FASTCGI),
            pause
        );
        assert_eq!(
            decide(&broke, sent(&mut t), &pol, req(true), FASTCGI),
            Next::GiveUp("no other server to try")
        );
        let overloaded = Fail {
            cause: Cause::Refused,
            retry: Retry::Unsent,
            reused: false,
            same_server: false,
            status: 503,
            retry_after: true,
            what: "refused".into(),
        };
        let mut t = Tally::new(1);
        assert_eq!(
            decide(&overloaded, sent(&mut t), &pol, req(false), FASTCGI),
            Next::GiveUp("no other server to try")
        );
    }

    /// The keys as CONFIG.md documents them, on a `proxy = {}` and a
    /// `fastcgi = {}` route; an unknown failure name is refused with its
    /// key named.
    #[test]
    fn routes_take_retries_and_the_proxy_its_send_and_read_timeouts() {
        use crate::config::{from_str, Overrides};
        use crate::handler::Handler;
        let d = std::env::temp_dir().join(format!("stoa-life-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        let text = |on: &str| {
            format!(
                "[[pool]]\nname = \"web\"\nprotocol = \"http\"\naddress = [\"127.0.0.1:9\"]\n\
                 [[pool]]\nname = \"php\"\naddress = [\"127.0.0.1:9\"]\n\
                 [[site]]\nroot = \".\"\n\
                 [[site.route]]\nprefix = \"/p/\"\nproxy = {{ pool = \"web\", send_timeout = \"3s\", read_timeout = \"70s\", \
                 retries = {{ on = [{on}], tries = 3, within = \"10s\", non_idempotent = true }} }}\n\
                 [[site.route]]\nprefix = \"/f/\"\nfastcgi = {{ pool = \"php\", retries = {{ on = [] }} }}\n"
            )
        };
        let rt = from_str(
            &text("\"error\", \"http_503\""),
            "t.toml",
            &d,
            &Overrides::default(),
        )
        .expect("valid");
        let routes = &rt.sites[0].routes;
        let Handler::Proxy(p) = &routes[0].handler else {
            panic!("not a proxy route");
        };
        assert_eq!(p.send_timeout, Some(Duration::from_secs(3)));
        assert_eq!(p.read_timeout, Some(Duration::from_secs(70)));
        assert_eq!(
            p.retries,
            Retries {
                on_error: true,
                on_timeout: false,
                on_status: vec![503],
                tries: 3,
                within: Some(Duration::from_secs(10)),
                non_idempotent: true,
            }
        );
        let Handler::FastCgi(f) = &routes[1].handler else {
            panic!("not a fastcgi route");
        };
        assert!(!f.retries.on_error && !f.retries.on_timeout);
        let e = from_str(&text("\"http_500\""), "t.toml", &d, &Overrides::default())
            .expect_err("http_500 is not a retry condition");
        assert!(e.to_string().contains("proxy.retries"), "{e}");
        assert!(e.to_string().contains("http_500"), "{e}");
    }
}
