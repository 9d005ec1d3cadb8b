//! The access phase: what a request must pass before its route's handler
//! runs (nginx's preaccess and access phases; h2o's access handlers). A
//! route's checks run in one fixed order, each with its configuration in
//! its own module beside its code:
//!
//! 1. `address_rules` ([`address`]): the client's address, 403;
//! 2. `require_client_cert`: a verified TLS client certificate
//!    (`[[tls]] client_auth`), 403 without one, 421 when the request
//!    names another host than the one the certificate was verified for;
//! 3. `basic_auth` ([`basic`], over [`htpasswd`]): 401 with a challenge;
//! 4. `limit_requests` ([`limit`]): 429 with `Retry-After`, or a delay;
//! 5. `limit_connections` ([`limit`]): 503;
//! 6. the FastCGI Authorizer (`authorizer = "pool"`, FastCGI §6.3);
//! 7. the Lua `access` script.
//!
//! Cheap refusals come first (an address rule costs a compare, so a
//! denied client never costs a bcrypt or an Authorizer round trip), and
//! the limits follow authentication so that `key = "user"` has a user.
//! Each check either lets the request go on, adding to what the handler
//! gets (variables for CGI/FastCGI/SSI/Lua, the authenticated user for
//! `REMOTE_USER`, `AUTH_TYPE` and the log), or answers it.
//!
//! The phase runs synchronously as far as it can ([`Access::start`]): an
//! address rule, a limit without delay, a password in apr1 or `{SHA}` or
//! already verified need no future. Only a delay, a bcrypt verification
//! not remembered, an Authorizer or a Lua script continue in
//! [`Access::finish`].
//!
//! Subrequests (SSI includes, Lua subrequests) skip checks 1-4, as
//! nginx runs no access phase for subrequests: the including request
//! passed them. A local redirect (a CGI or FastCGI `Location: /path`) is
//! checked again but not counted again by the limits, as nginx counts
//! `limit_req` and `limit_conn` once per main request.

pub(crate) mod address;
pub(crate) mod basic;
pub(crate) mod htpasswd;
pub(crate) mod limit;

use crate::exchange::{Exchange, Include};
use crate::handler::lua::LuaConfig;
use crate::handler::{fastcgi, lua, Authz, Handler};
use crate::upstream::Pool;
use address::AddressRules;
use basic::{BasicAuth, BasicAuthKey, Checked, SlowCheck};
use limit::{ConnLimit, ConnSlot, LimitKey, LimitRequestsTable, Rate, RateLimit};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One check of the phase.
#[derive(Debug)]
enum Check {
    Address(AddressRules),
    ClientCert,
    Basic(Arc<BasicAuth>),
    Requests(Arc<RateLimit>),
    Connections(Arc<ConnLimit>),
    /// A FastCGI Authorizer: the pool's index.
    Authorizer(usize),
    Lua(Arc<LuaConfig>),
}

/// A route's access phase: its checks, in the order they run. Built once
/// per route when the configuration loads (the limits' tables are shared
/// by every worker from here). Empty for nearly every route: routing then
/// pays one branch.
#[derive(Debug, Default)]
pub(crate) struct Access {
    checks: Box<[Check]>,
    /// No check waits and the route's handler answers at once: the phase
    /// and the handler run without a future (the static path behind
    /// address rules and limits).
    sync: bool,
    /// With `sync`, the route's handler when it is a static file handler
    /// or the status page (an `Arc` shared with the route): routing hands
    /// it over as `Pick::Checked` without a second pick, and without
    /// making every `Pick` larger by a second reference.
    checked: Option<Handler>,
}

impl Check {
    /// Where it runs in the phase (see the module's list).
    fn rank(&self) -> u8 {
        match self {
            Check::Address(_) => 0,
            Check::ClientCert => 1,
            Check::Basic(_) => 2,
            Check::Requests(_) => 3,
            Check::Connections(_) => 4,
            Check::Authorizer(_) => 5,
            Check::Lua(_) => 6,
        }
    }

    /// Whether it may have to wait (a bcrypt verification, a delay, an
    /// application).
    fn may_wait(&self) -> bool {
        match self {
            Check::Address(_) | Check::ClientCert | Check::Connections(_) => false,
            Check::Requests(l) => l.delay,
            Check::Basic(_) | Check::Authorizer(_) | Check::Lua(_) => true,
        }
    }
}

/// Builds routes' phases, the limits' tables once per distinct setting,
/// so that a site's `limit_requests` inherited by all its routes is one
/// table (a client's requests to any of them count together, as one
/// nginx zone does) and a site's htpasswd file is read once.
#[derive(Default)]
pub(crate) struct Builder {
    checks: Vec<Check>,
    limits: Vec<(String, Arc<RateLimit>)>,
    conns: Vec<(u32, Arc<ConnLimit>)>,
    basics: Vec<((String, PathBuf), Arc<BasicAuth>)>,
}

impl Builder {
    /// `address_rules`.
    pub(crate) fn address_rules(&mut self, lines: &[String]) -> Result<(), String> {
        self.checks
            .push(Check::Address(AddressRules::parse(lines)?));
        Ok(())
    }

    /// `require_client_cert = true`.
    pub(crate) fn require_client_cert(&mut self) {
        self.checks.push(Check::ClientCert);
    }

    /// `basic_auth`; `false` adds nothing (it lifts the site's).
    pub(crate) fn basic_auth(
        &mut self,
        key: &BasicAuthKey,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<(), String> {
        if let BasicAuthKey::On(t) = key {
            let id = (t.realm.clone(), resolve(&t.users));
            if let Some((_, a)) = self.basics.iter().find(|(k, _)| *k == id) {
                self.checks.push(Check::Basic(Arc::clone(a)));
                return Ok(());
            }
        }
        if let Some(a) = key.build(resolve)? {
            if let BasicAuthKey::On(t) = key {
                self.basics
                    .push(((t.realm.clone(), resolve(&t.users)), Arc::clone(&a)));
            }
            self.checks.push(Check::Basic(a));
        }
        Ok(())
    }

    /// `limit_requests`.
    pub(crate) fn limit_requests(&mut self, t: &LimitRequestsTable) -> Result<(), String> {
        let id = format!("{t:?}");
        let l = match self.limits.iter().find(|(k, _)| *k == id) {
            Some((_, l)) => Arc::clone(l),
            None => {
                let l = t.build()?;
                self.limits.push((id, Arc::clone(&l)));
                l
            }
        };
        self.checks.push(Check::Requests(l));
        Ok(())
    }

    /// `limit_connections`.
    pub(crate) fn limit_connections(&mut self, n: u32) -> Result<(), String> {
        let c = match self.conns.iter().find(|(k, _)| *k == n) {
            Some((_, c)) => Arc::clone(c),
            None => {
                let c = ConnLimit::new(n)?;
                self.conns.push((n, Arc::clone(&c)));
                c
            }
        };
        self.checks.push(Check::Connections(c));
        Ok(())
    }

    /// A FastCGI Authorizer (the pool's index).
    pub(crate) fn authorizer(&mut self, pool: usize) {
        self.checks.push(Check::Authorizer(pool));
    }

    /// A Lua `access` script.
    pub(crate) fn lua(&mut self, cfg: Arc<LuaConfig>) {
        self.checks.push(Check::Lua(cfg));
    }

    /// The phase of the checks added since the last one, in their fixed
    /// order.
    pub(crate) fn finish(&mut self) -> Access {
        let mut checks = std::mem::take(&mut self.checks);
        checks.sort_by_key(Check::rank);
        Access {
            checks: checks.into(),
            sync: false,
            checked: None,
        }
    }
}

impl Access {
    /// No check: the handler runs at once.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// Tells the phase its route's handler (`try_files`: the route has
    /// some). When that always answers at once (a static file handler
    /// that no index script or `try_files` can turn into a script run,
    /// the status page, a deny) and no check waits, the phase runs
    /// without a future.
    pub(crate) fn settle(mut self, handler: Option<&Handler>, try_files: bool) -> Access {
        let at_once = !try_files
            && match handler {
                Some(Handler::Static(c)) => !c.has_scripts(),
                Some(Handler::Status(_) | Handler::Deny) => true,
                _ => false,
            };
        self.sync = at_once && !self.checks.iter().any(Check::may_wait);
        self.checked = match handler {
            Some(Handler::Static(c)) if self.sync => Some(Handler::Static(Arc::clone(c))),
            Some(Handler::Status(c)) if self.sync => Some(Handler::Status(Arc::clone(c))),
            _ => None,
        };
        self
    }

    /// The handler routing may hand over with the checks (see `checked`).
    #[inline]
    pub(crate) fn checked_handler(&self) -> Option<&Handler> {
        self.checked.as_ref()
    }

    /// Whether routing must run the phase (and the handler) as a future.
    #[inline]
    pub(crate) fn runs_async(&self) -> bool {
        !self.sync
    }
}

/// What passing the phase gave the request: variables for the handler,
/// the authenticated user, and its place under `limit_connections`
/// (held until the request is done: drop it then).
#[derive(Default)]
pub(crate) struct Granted {
    /// Environment variables for CGI, FastCGI and SSI (`req.vars` in
    /// Lua): an Authorizer's `Variable-*`, `REMOTE_USER` and `AUTH_TYPE`.
    pub(crate) vars: Vec<(String, Vec<u8>)>,
    user: Option<String>,
    slots: Vec<ConnSlot>,
}

impl Granted {
    fn authenticated(&mut self, user: String, ex: &mut Exchange<'_>) {
        ex.set_user(&user);
        self.vars
            .push(("REMOTE_USER".into(), user.as_bytes().to_vec()));
        self.vars.push(("AUTH_TYPE".into(), b"Basic".to_vec()));
        self.user = Some(user);
    }
}

/// How far [`Access::start`] got.
pub(crate) enum Start {
    /// Every check passed.
    Granted(Granted),
    /// A check answered (the response is written and finished).
    Answered,
    /// A check must wait: go on with [`Access::finish`].
    Pending(Pending),
}

/// A phase halfway: the check at `at` and what it waits for.
pub(crate) struct Pending {
    at: usize,
    wait: Wait,
    granted: Granted,
}

enum Wait {
    Delay(Duration),
    Bcrypt(SlowCheck),
    Authorizer(usize),
    Lua,
}

/// One check's step.
enum Step {
    Next,
    Answered,
    Wait(Wait),
}

/// `require_client_cert`: the connection's client sent a certificate that
/// its `[[tls]]` block's `client_auth` verified (403 otherwise: Apache's
/// `Require ssl-verify-client`, nginx's `if ($ssl_client_verify !=
/// SUCCESS) { return 403; }`). The block was chosen by the SNI name, and
/// a client may send requests for other names on the connection (HTTP/2
/// coalescing, or by hand): one whose host is not that name gets 421
/// (RFC 9110 §15.5.20), as nginx answers when `ssl_verify_client` is on,
/// so that a certificate verified for one site's CAs never opens
/// another's.
fn client_cert(ex: &Exchange<'_>) -> Result<(), u16> {
    let Some(c) = ex.client_cert() else {
        return Err(403);
    };
    if let Some(sni) = &c.sni {
        let host = crate::http::host_name(ex.req().host());
        if !host.trim_end_matches('.').eq_ignore_ascii_case(sni) {
            return Err(421);
        }
    }
    Ok(())
}

/// Answers a refusal and finishes the exchange.
fn answer(ex: &mut Exchange<'_>, status: u16, headers: &[(&str, &[u8])]) -> Step {
    ex.error(status, headers);
    ex.finish();
    Step::Answered
}

impl Access {
    /// The body bytes kept from one subrequest of the Lua `access`
    /// script (its `max_subrequest`; 0 without one).
    pub(crate) fn lua_max_subrequest(&self) -> usize {
        self.checks
            .iter()
            .find_map(|c| match c {
                Check::Lua(l) => Some(l.max_subrequest),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// Runs the checks that need no waiting, in order, stopping at the
    /// first that answers or must wait.
    pub(crate) fn start(&self, ex: &mut Exchange<'_>) -> Start {
        let mut g = Granted::default();
        for (i, c) in self.checks.iter().enumerate() {
            match self.step(c, ex, &mut g) {
                Step::Next => {}
                Step::Answered => return Start::Answered,
                Step::Wait(wait) => {
                    return Start::Pending(Pending {
                        at: i,
                        wait,
                        granted: g,
                    })
                }
            }
        }
        Start::Granted(g)
    }

    /// One check, as far as it goes without waiting.
    fn step(&self, c: &Check, ex: &mut Exchange<'_>, g: &mut Granted) -> Step {
        let sub = ex.is_sub();
        match c {
            Check::Address(_)
            | Check::ClientCert
            | Check::Basic(_)
            | Check::Requests(_)
            | Check::Connections(_)
                if sub =>
            {
                Step::Next
            }
            // A local redirect's request was counted (and holds its slot)
            // as the first one: counting it again would refuse a CGI
            // redirect under `limit_connections = 1`.
            Check::Requests(_) | Check::Connections(_) if ex.is_redirected() => Step::Next,
            Check::Address(r) => {
                if r.allows(ex.peer().ip()) {
                    Step::Next
                } else {
                    answer(ex, 403, &[])
                }
            }
            Check::ClientCert => match client_cert(ex) {
                Ok(()) => Step::Next,
                Err(status) => answer(ex, status, &[]),
            },
            Check::Basic(b) => match b.check(ex.req().header("authorization")) {
                Checked::User(u) => {
                    g.authenticated(u, ex);
                    Step::Next
                }
                Checked::Refused => answer(ex, 401, &[("WWW-Authenticate", b.challenge())]),
                Checked::Slow(job) => Step::Wait(Wait::Bcrypt(job)),
            },
            Check::Requests(l) => {
                let verdict = match &l.key {
                    LimitKey::ClientIp => l.check_ip(ex.peer().ip()),
                    LimitKey::Header(name) => match ex.req().header(name) {
                        Some(v) if !v.is_empty() => l.check(v),
                        _ => Rate::Pass,
                    },
                    LimitKey::User => match &g.user {
                        Some(u) => l.check(u.as_str()),
                        None => Rate::Pass,
                    },
                };
                match verdict {
                    Rate::Pass => Step::Next,
                    Rate::Wait(d) => Step::Wait(Wait::Delay(d)),
                    Rate::Over(d) => {
                        let mut secs = Vec::with_capacity(4);
                        stoa_h1::push_u64(&mut secs, limit::retry_after(d));
                        answer(ex, 429, &[("Retry-After", &secs)])
                    }
                }
            }
            Check::Connections(c) => match c.acquire(ex.peer().ip()) {
                Some(slot) => {
                    g.slots.push(slot);
                    Step::Next
                }
                None => answer(ex, 503, &[]),
            },
            Check::Authorizer(pool) => Step::Wait(Wait::Authorizer(*pool)),
            Check::Lua(_) => Step::Wait(Wait::Lua),
        }
    }

    /// Finishes a phase [`Access::start`] left pending: waits, then runs
    /// the remaining checks. `pools` are the runtime's (the Authorizer's);
    /// `inc` runs the Lua script's subrequests.
    pub(crate) async fn finish(
        &self,
        p: Pending,
        ex: &mut Exchange<'_>,
        pools: &[Arc<Pool>],
        inc: &impl Include,
    ) -> Option<Granted> {
        let Pending {
            mut at,
            wait,
            granted: mut g,
        } = p;
        let mut wait = Some(wait);
        loop {
            if let Some(w) = wait.take() {
                match w {
                    Wait::Delay(d) => tokio::time::sleep(d).await,
                    Wait::Bcrypt(job) => {
                        let Check::Basic(b) = &self.checks[at] else {
                            return None;
                        };
                        match b.verify_slow(job).await {
                            Some(user) => g.authenticated(user, ex),
                            None => {
                                answer(ex, 401, &[("WWW-Authenticate", b.challenge())]);
                                return None;
                            }
                        }
                    }
                    Wait::Authorizer(pool) => match fastcgi::authorize(pool, ex, pools).await {
                        Authz::Allow(v) => g.vars.extend(v),
                        Authz::Answered => return None,
                    },
                    Wait::Lua => {
                        let Check::Lua(cfg) = &self.checks[at] else {
                            return None;
                        };
                        match lua::access(cfg, ex, inc).await {
                            Authz::Allow(v) => g.vars.extend(v),
                            Authz::Answered => return None,
                        }
                    }
                }
            }
            at += 1;
            let Some(c) = self.checks.get(at) else {
                return Some(g);
            };
            match self.step(c, ex, &mut g) {
                Step::Next => {}
                Step::Answered => return None,
                Step::Wait(w) => wait = Some(w),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn sha_file(tag: &str) -> String {
        let path = std::env::temp_dir().join(format!("stoa-access-{tag}-{}", std::process::id()));
        std::fs::write(&path, "a:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\n").expect("write");
        path.display().to_string()
    }

    #[test]
    fn checks_run_in_their_fixed_order_whatever_order_they_were_given() {
        let mut b = Builder::default();
        b.authorizer(0);
        b.limit_connections(1).expect("conns");
        let t: LimitRequestsTable = toml::from_str("rate = \"1/s\"").expect("table");
        b.limit_requests(&t).expect("rate");
        let key: BasicAuthKey = toml::from_str::<toml::Value>(&format!(
            "k = {{ realm = \"r\", users = {:?} }}",
            sha_file("order")
        ))
        .expect("toml")["k"]
            .clone()
            .try_into()
            .expect("key");
        b.basic_auth(&key, &resolve).expect("basic");
        b.address_rules(&["allow all".into()]).expect("rules");
        let a = b.finish();
        assert!(matches!(
            &a.checks[..],
            [
                Check::Address(_),
                Check::Basic(_),
                Check::Requests(_),
                Check::Connections(_),
                Check::Authorizer(0)
            ]
        ));
        // The builder starts again empty for the next route.
        assert!(b.finish().is_empty());
    }

    #[test]
    fn basic_auth_false_adds_no_check_and_true_is_refused() {
        let mut b = Builder::default();
        b.basic_auth(&BasicAuthKey::Off(false), &resolve)
            .expect("false");
        assert!(b.finish().is_empty());
        assert!(b.basic_auth(&BasicAuthKey::Off(true), &resolve).is_err());
    }

    #[test]
    fn routes_with_the_same_limit_share_one_table() {
        let t: LimitRequestsTable = toml::from_str("rate = \"5/s\"\nburst = 2").expect("table");
        let mut b = Builder::default();
        b.limit_requests(&t).expect("one");
        b.limit_connections(4).expect("one");
        let one = b.finish();
        b.limit_requests(&t).expect("two");
        b.limit_connections(4).expect("two");
        let two = b.finish();
        match (&one.checks[0], &two.checks[0]) {
            (Check::Requests(x), Check::Requests(y)) => assert!(Arc::ptr_eq(x, y)),
            _ => panic!("limits first"),
        }
        match (&one.checks[1], &two.checks[1]) {
            (Check::Connections(x), Check::Connections(y)) => assert!(Arc::ptr_eq(x, y)),
            _ => panic!("connections second"),
        }
    }

    fn static_handler() -> Handler {
        let dir = std::env::temp_dir();
        let cfg = crate::handler::static_files::StaticConfig::open(&dir, vec![], false)
            .expect("a static handler");
        Handler::Static(Arc::new(cfg))
    }

    #[test]
    fn only_checks_that_never_wait_before_a_handler_that_answers_at_once_run_without_a_future() {
        let mut b = Builder::default();
        b.address_rules(&["deny 10.0.0.0/8".into()]).expect("rules");
        let t: LimitRequestsTable = toml::from_str("rate = \"5/s\"").expect("table");
        b.limit_requests(&t).expect("rate");
        b.limit_connections(3).expect("conns");
        assert!(!b
            .finish()
            .settle(Some(&static_handler()), false)
            .runs_async());
        b.address_rules(&["allow all".into()]).expect("rules");
        assert!(
            b.finish().settle(None, false).runs_async(),
            "a script route"
        );
        let t: LimitRequestsTable = toml::from_str("rate = \"5/s\"\ndelay = true").expect("table");
        b.limit_requests(&t).expect("rate");
        assert!(
            b.finish()
                .settle(Some(&static_handler()), false)
                .runs_async(),
            "a delay waits"
        );
        b.authorizer(1);
        assert!(
            b.finish()
                .settle(Some(&static_handler()), false)
                .runs_async(),
            "an Authorizer waits"
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let mut b = Builder::default();
        assert!(b.address_rules(&["allow nowhere".into()]).is_err());
        let t: LimitRequestsTable = toml::from_str("rate = \"fast\"").expect("table");
        assert!(b.limit_requests(&t).is_err());
        assert!(b.limit_connections(0).is_err());
        let missing: BasicAuthKey = BasicAuthKey::On(basic::BasicAuthTable {
            realm: "r".into(),
            users: "/nonexistent/htpasswd".into(),
        });
        assert!(b.basic_auth(&missing, &resolve).is_err());
        assert!(toml::from_str::<LimitRequestsTable>("rate = \"1/s\"\nnodelay = true").is_err());
    }
}
