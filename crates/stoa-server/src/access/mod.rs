//! The access phase: what a request must pass before its route's handler
//! runs (nginx's preaccess and access phases; h2o's access handlers). A
//! route's checks run in one fixed order, each with its configuration in
//! its own module beside its code:
//!
//! 1. `address_rules` ([`address`]): the client's address, 403;
//! 2. `basic_auth` ([`basic`], over [`htpasswd`]): 401 with a challenge;
//! 3. `limit_requests` ([`limit`]): 429 with `Retry-After`, or a delay;
//! 4. `limit_connections` ([`limit`]): 503;
//! 5. the FastCGI Authorizer (`authorizer = "pool"`, FastCGI §6.3);
//! 6. the Lua `access` script.
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
//! passed them.

pub(crate) mod address;
pub mod basic;
pub(crate) mod htpasswd;
pub mod limit;

use crate::exchange::{Exchange, Include};
use crate::handler::lua::LuaConfig;
use crate::handler::{fastcgi, lua, Authz};
use crate::upstream::Pool;
use address::AddressRules;
use basic::{BasicAuth, BasicAuthKey, Checked, SlowCheck};
use limit::{ConnLimit, ConnSlot, LimitKey, LimitRequestsTable, Rate, RateLimit};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The access keys of a `[[site]]` or a `[[site.route]]`, as written.
/// A route's key replaces the site's whole.
#[derive(Debug, Default, Deserialize, Clone)]
pub struct AccessKeys {
    /// `["allow 10.0.0.0/8", "deny all"]`.
    pub address_rules: Option<Vec<String>>,
    /// `{ realm, users }`, or `false` to lift the site's.
    pub basic_auth: Option<BasicAuthKey>,
    /// `{ rate, burst, key, delay }`.
    pub limit_requests: Option<LimitRequestsTable>,
    /// Requests in flight per client address.
    pub limit_connections: Option<u32>,
}

impl AccessKeys {
    /// The route's value of each key over the site's.
    pub fn over(&self, site: &AccessKeys) -> AccessKeys {
        AccessKeys {
            address_rules: self
                .address_rules
                .clone()
                .or_else(|| site.address_rules.clone()),
            basic_auth: self.basic_auth.clone().or_else(|| site.basic_auth.clone()),
            limit_requests: self
                .limit_requests
                .clone()
                .or_else(|| site.limit_requests.clone()),
            limit_connections: self.limit_connections.or(site.limit_connections),
        }
    }

    /// Whether any key is set.
    pub fn is_empty(&self) -> bool {
        self.address_rules.is_none()
            && self.basic_auth.is_none()
            && self.limit_requests.is_none()
            && self.limit_connections.is_none()
    }
}

/// One check of the phase.
#[derive(Debug)]
enum Check {
    Address(AddressRules),
    Basic(Arc<BasicAuth>),
    Requests(Arc<RateLimit>),
    Connections(Arc<ConnLimit>),
    /// A FastCGI Authorizer: the pool's index.
    Authorizer(usize),
    Lua(Arc<LuaConfig>),
}

/// A route's access phase: its checks, in the order they run. Built once
/// per route when the configuration loads (the limits' tables are shared
/// by every worker from here).
#[derive(Debug)]
pub struct Access {
    checks: Box<[Check]>,
}

/// Builds the limits' tables once per distinct setting, so that a site's
/// `limit_requests` inherited by all its routes is one table (a client's
/// requests to any of them count together, as one nginx zone).
#[derive(Default)]
pub struct Builder {
    limits: Vec<(String, Arc<RateLimit>)>,
    conns: Vec<(u32, Arc<ConnLimit>)>,
    basics: Vec<((String, PathBuf), Arc<BasicAuth>)>,
}

impl Builder {
    /// The phase of one route: `keys` (the route's over the site's, see
    /// [`AccessKeys::over`]), then the route's Authorizer and Lua
    /// `access` script. None when there is nothing to check (then the
    /// route costs nothing more). Errors name the key.
    pub fn build(
        &mut self,
        keys: &AccessKeys,
        authorizer: Option<usize>,
        lua: Option<Arc<LuaConfig>>,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Option<Access>, (&'static str, String)> {
        let mut checks = Vec::new();
        if let Some(lines) = &keys.address_rules {
            let r = AddressRules::parse(lines).map_err(|e| ("address_rules", e))?;
            checks.push(Check::Address(r));
        }
        if let Some(b) = &keys.basic_auth {
            if let BasicAuthKey::On(t) = b {
                let id = (t.realm.clone(), resolve(&t.users));
                if let Some((_, a)) = self.basics.iter().find(|(k, _)| *k == id) {
                    checks.push(Check::Basic(Arc::clone(a)));
                } else if let Some(a) = b.build(resolve).map_err(|e| ("basic_auth", e))? {
                    self.basics.push((id, Arc::clone(&a)));
                    checks.push(Check::Basic(a));
                }
            } else {
                b.build(resolve).map_err(|e| ("basic_auth", e))?;
            }
        }
        if let Some(t) = &keys.limit_requests {
            let id = format!("{t:?}");
            let l = match self.limits.iter().find(|(k, _)| *k == id) {
                Some((_, l)) => Arc::clone(l),
                None => {
                    let l = t.build().map_err(|e| ("limit_requests", e))?;
                    self.limits.push((id, Arc::clone(&l)));
                    l
                }
            };
            checks.push(Check::Requests(l));
        }
        if let Some(n) = keys.limit_connections {
            let c = match self.conns.iter().find(|(k, _)| *k == n) {
                Some((_, c)) => Arc::clone(c),
                None => {
                    let c = ConnLimit::new(n).map_err(|e| ("limit_connections", e))?;
                    self.conns.push((n, Arc::clone(&c)));
                    c
                }
            };
            checks.push(Check::Connections(c));
        }
        if let Some(pool) = authorizer {
            checks.push(Check::Authorizer(pool));
        }
        if let Some(l) = lua {
            checks.push(Check::Lua(l));
        }
        Ok((!checks.is_empty()).then(|| Access {
            checks: checks.into(),
        }))
    }
}

/// What passing the phase gave the request: variables for the handler,
/// the authenticated user, and its place under `limit_connections`
/// (held until the request is done: drop it then).
#[derive(Default)]
pub struct Granted {
    /// Environment variables for CGI, FastCGI and SSI (`req.vars` in
    /// Lua): an Authorizer's `Variable-*`, `REMOTE_USER` and `AUTH_TYPE`.
    pub vars: Vec<(String, Vec<u8>)>,
    user: Option<String>,
    slots: Vec<ConnSlot>,
}

impl Granted {
    /// Nothing but a pass: no variables for the handler.
    pub fn is_plain(&self) -> bool {
        self.vars.is_empty()
    }

    fn authenticated(&mut self, user: String, ex: &mut Exchange<'_>) {
        ex.set_user(&user);
        self.vars.push(("REMOTE_USER".into(), user.as_bytes().to_vec()));
        self.vars.push(("AUTH_TYPE".into(), b"Basic".to_vec()));
        self.user = Some(user);
    }
}

/// How far [`Access::start`] got.
pub enum Start {
    /// Every check passed.
    Granted(Granted),
    /// A check answered (the response is written and finished).
    Answered,
    /// A check must wait: go on with [`Access::finish`].
    Pending(Pending),
}

/// A phase halfway: the check at `at` and what it waits for.
pub struct Pending {
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

/// Answers a refusal and finishes the exchange.
fn answer(ex: &mut Exchange<'_>, status: u16, headers: &[(&str, &[u8])]) -> Step {
    ex.error(status, headers);
    ex.finish();
    Step::Answered
}

impl Access {
    /// The body bytes kept from one subrequest of the Lua `access`
    /// script (its `max_subrequest`; 0 without one).
    pub fn lua_max_subrequest(&self) -> usize {
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
    pub fn start(&self, ex: &mut Exchange<'_>) -> Start {
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
            Check::Address(_) | Check::Basic(_) | Check::Requests(_) | Check::Connections(_)
                if sub =>
            {
                Step::Next
            }
            Check::Address(r) => {
                if r.allows(ex.peer().ip()) {
                    Step::Next
                } else {
                    answer(ex, 403, &[])
                }
            }
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
                    LimitKey::ClientIp => l.check(limit::canonical(ex.peer().ip())),
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
    pub async fn finish(
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

    fn keys(toml_text: &str) -> AccessKeys {
        toml::from_str(toml_text).expect("keys")
    }

    #[test]
    fn a_routes_key_replaces_the_sites_and_false_lifts_basic_auth() {
        let site = keys(
            "address_rules = [\"deny all\"]\nbasic_auth = { realm = \"r\", users = \"u\" }\n\
             limit_connections = 3\n",
        );
        let route = keys("address_rules = [\"allow all\"]\nbasic_auth = false\n");
        let k = route.over(&site);
        assert_eq!(k.address_rules, Some(vec!["allow all".to_string()]));
        assert!(matches!(k.basic_auth, Some(BasicAuthKey::Off(false))));
        assert_eq!(k.limit_connections, Some(3));
        let mut b = Builder::default();
        let resolve = |s: &str| PathBuf::from(s);
        let a = b
            .build(&k, None, None, &resolve)
            .expect("builds")
            .expect("checks");
        assert!(matches!(
            &a.checks[..],
            [Check::Address(_), Check::Connections(_)]
        ));
        assert!(b
            .build(&AccessKeys::default(), None, None, &resolve)
            .expect("builds")
            .is_none());
    }

    #[test]
    fn checks_run_in_their_fixed_order_whatever_the_key_order() {
        let path = std::env::temp_dir().join(format!("stoa-access-order-{}", std::process::id()));
        std::fs::write(&path, "a:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\n").expect("write");
        let text = format!(
            "limit_connections = 1\nlimit_requests = {{ rate = \"1/s\" }}\n\
             basic_auth = {{ realm = \"r\", users = {:?} }}\naddress_rules = [\"allow all\"]\n",
            path.display()
        );
        let mut b = Builder::default();
        let a = b
            .build(&keys(&text), Some(0), None, &|s: &str| PathBuf::from(s))
            .expect("builds")
            .expect("checks");
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
    }

    #[test]
    fn routes_with_the_same_limit_share_one_table() {
        let k = keys("limit_requests = { rate = \"5/s\", burst = 2 }\nlimit_connections = 4\n");
        let mut b = Builder::default();
        let r = |s: &str| PathBuf::from(s);
        let one = b.build(&k, None, None, &r).expect("ok").expect("some");
        let two = b.build(&k, None, None, &r).expect("ok").expect("some");
        match (&one.checks[0], &two.checks[0]) {
            (Check::Requests(x), Check::Requests(y)) => assert!(Arc::ptr_eq(x, y)),
            _ => panic!("limits first"),
        }
        match (&one.checks[1], &two.checks[1]) {
            (Check::Connections(x), Check::Connections(y)) => assert!(Arc::ptr_eq(x, y)),
            _ => panic!("connections second"),
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        let r = |s: &str| PathBuf::from(s);
        let mut b = Builder::default();
        let err = |t: &str| {
            Builder::default()
                .build(&keys(t), None, None, &r)
                .err()
                .map(|e| e.0)
        };
        assert_eq!(err("address_rules = [\"allow nowhere\"]"), Some("address_rules"));
        assert_eq!(err("limit_requests = { rate = \"fast\" }"), Some("limit_requests"));
        assert_eq!(err("limit_connections = 0"), Some("limit_connections"));
        assert_eq!(err("basic_auth = true"), Some("basic_auth"));
        assert_eq!(
            err("basic_auth = { realm = \"r\", users = \"/nonexistent/htpasswd\" }"),
            Some("basic_auth")
        );
        assert!(toml::from_str::<AccessKeys>("limit_requests = { rate = \"1/s\", nodelay = true }")
            .is_err());
        let _ = &mut b;
    }
}
