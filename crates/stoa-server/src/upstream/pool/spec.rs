//! A pool as configured: what its table says, validated.

use crate::upstream::target::Target;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where requests are sent within a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Affinity {
    None,
    Cookie(String),
    Header(String),
    Query(String),
    ClientIp,
}

impl Affinity {
    pub fn parse(s: &str) -> Result<Affinity, String> {
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        let need = |a: &str| {
            if a.is_empty() {
                Err(format!("`{s}` needs a name after the colon"))
            } else {
                Ok(a.to_owned())
            }
        };
        match kind {
            "none" => Ok(Affinity::None),
            "cookie" => need(arg).map(Affinity::Cookie),
            "header" => need(arg).map(Affinity::Header),
            "query" => need(arg).map(Affinity::Query),
            "client-ip" => Ok(Affinity::ClientIp),
            _ => Err(format!(
                "`{s}`: affinity is \"cookie:NAME\", \"header:NAME\", \"query:NAME\", \"client-ip\" or \"none\""
            )),
        }
    }
}

/// Least-busy or round-robin, when no affinity key applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    LeastBusy,
    RoundRobin,
    /// Power of two choices on peak-EWMA latency (Finagle, Linkerd): two
    /// servers drawn at random, the one with the lower latency estimate
    /// times (requests in flight + 1) gets the request.
    P2cEwma,
}

/// A pool as configured. Two specs that compare equal describe the same
/// pool, which a reload keeps running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    pub kind: PoolKind,
    pub max_requests: u64,
    pub affinity: Affinity,
    pub balance: Balance,
    pub queue: usize,
    pub queue_timeout: Duration,
    /// Time allowed for a response head, then between pieces of output.
    pub timeout: Duration,
    /// Requests a spawned process takes at once when it does not say
    /// (FCGI_MAX_CONNS); for addresses, the same for each address.
    pub default_capacity: usize,
    /// `capacity` from the config: what the operator says a process (or
    /// address) serves at once. It makes kept-alive connections safe
    /// without FCGI_GET_VALUES (php-fpm: `pm.max_children`); a smaller
    /// FCGI_MAX_CONNS / MAX_REQS answer still lowers it.
    pub stated_capacity: Option<usize>,
    /// How long a kept-alive connection may wait parked before it is
    /// closed: to a process-per-connection server (php-fpm) a parked
    /// connection pins a whole child that its other clients then lack.
    pub keepalive_timeout: Duration,
    /// What its processes speak (the upstream layer only records it: each
    /// protocol's handler speaks it).
    pub protocol: Protocol,
    /// Active health checks (HTTP pools).
    pub health: Option<Health>,
    /// Spawned processes also get their listening socket as fd 3 with
    /// LISTEN_FDS=1 and LISTEN_PID (systemd socket activation), besides
    /// fd 0.
    pub socket_activation: bool,
    /// Its addresses were written `h2c://host:port`: the servers speak
    /// HTTP/2 with prior knowledge (RFC 9113 §3.3), whatever the route says.
    pub h2c: bool,
}

/// What a pool's processes speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    FastCgi,
    Http,
}

/// `health = {...}`: an HTTP GET of `path` every `interval`; `fails`
/// failures in a row take a process out of rotation, `passes` successes
/// put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub fails: u32,
    pub passes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolKind {
    /// Processes Stoa spawns and supervises.
    Spawn {
        command: Vec<String>,
        /// Working directory (the config file's directory).
        cwd: PathBuf,
        env: Vec<(String, String)>,
        min: usize,
        max: usize,
        idle_timeout: Duration,
        /// Run as this account instead of Stoa's own (Stoa must keep root).
        user: Option<crate::privileges::Account>,
    },
    /// Processes someone else runs.
    Remote { addresses: Vec<Target> },
}

/// A `[[pool]]` table as the configuration gives it, by name (not by
/// position): [`SpecTable::build`] validates it into a [`PoolSpec`].
/// Start from [`SpecTable::new`] and set what the table says.
#[derive(Debug, Clone)]
pub(crate) struct SpecTable<'a> {
    pub(crate) name: &'a str,
    pub(crate) command: Option<Vec<String>>,
    pub(crate) address: Option<Vec<String>>,
    pub(crate) processes: Option<usize>,
    pub(crate) min_processes: Option<usize>,
    pub(crate) max_processes: Option<usize>,
    pub(crate) max_requests: Option<u64>,
    pub(crate) affinity: Option<&'a str>,
    pub(crate) balance: Option<&'a str>,
    pub(crate) queue: Option<usize>,
    pub(crate) queue_timeout: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) capacity: Option<usize>,
    pub(crate) keepalive_timeout: Option<Duration>,
    pub(crate) user: Option<crate::privileges::Account>,
    /// The config file's directory: relative paths are taken from it.
    pub(crate) base: &'a Path,
}

impl<'a> SpecTable<'a> {
    /// A table with only a name: every other key at its default.
    pub(crate) fn new(name: &'a str, base: &'a Path) -> SpecTable<'a> {
        SpecTable {
            name,
            command: None,
            address: None,
            processes: None,
            min_processes: None,
            max_processes: None,
            max_requests: None,
            affinity: None,
            balance: None,
            queue: None,
            queue_timeout: None,
            timeout: None,
            env: Vec::new(),
            idle_timeout: None,
            capacity: None,
            keepalive_timeout: None,
            user: None,
            base,
        }
    }

    /// The pool spec, or what is wrong with the table.
    pub(crate) fn build(self) -> Result<PoolSpec, String> {
        let SpecTable {
            name,
            command,
            address,
            processes,
            min_processes,
            max_processes,
            max_requests,
            affinity,
            balance,
            queue,
            queue_timeout,
            timeout,
            env,
            idle_timeout,
            capacity,
            keepalive_timeout,
            user,
            base,
        } = self;

        if capacity.is_some_and(|c| c == 0 || c > 1024) {
            return Err("`capacity` must be 1..=1024".into());
        }
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "pool name `{name}`: use letters, digits, '-' and '_'"
            ));
        }
        let mut h2c = false;
        let kind = match (command, address) {
            (Some(cmd), None) => {
                if cmd.is_empty() {
                    return Err("`command` is empty".into());
                }
                let mut cmd = cmd;
                let prog = Path::new(&cmd[0]);
                if prog.components().count() > 1 && !prog.is_absolute() {
                    cmd[0] = base.join(prog).display().to_string();
                }
                let (min, max) = match (processes, min_processes, max_processes) {
                    (Some(n), None, None) => (n, n),
                    (None, min, Some(max)) => (min.unwrap_or(1), max),
                    (None, None, None) => (1, 1),
                    _ => {
                        return Err(
                            "give `processes`, or `min_processes` and `max_processes`".into()
                        )
                    }
                };
                if max == 0 || min > max || max > 1024 {
                    return Err(format!(
                        "processes {min}..{max}: need 1 <= max <= 1024 and min <= max"
                    ));
                }
                PoolKind::Spawn {
                    command: cmd,
                    cwd: base.to_path_buf(),
                    env,
                    min,
                    max,
                    idle_timeout: idle_timeout.unwrap_or(Duration::from_secs(10)),
                    user,
                }
            }
            (None, Some(addrs)) => {
                if user.is_some() {
                    return Err("`user` is for spawned pools (`command`)".into());
                }
                if addrs.is_empty() {
                    return Err("`address` is empty".into());
                }
                // `h2c://` is all or nothing: one pool, one protocol.
                let h2 = addrs.iter().filter(|a| a.starts_with("h2c://")).count();
                if h2 != 0 && h2 != addrs.len() {
                    return Err("write every address `h2c://`, or none".into());
                }
                h2c = h2 != 0;
                let addresses = addrs
                    .iter()
                    .map(|a| Target::parse(a.strip_prefix("h2c://").unwrap_or(a), base))
                    .collect::<Result<Vec<_>, _>>()?;
                PoolKind::Remote { addresses }
            }
            _ => return Err("give exactly one of `command` or `address`".into()),
        };
        let remote = matches!(kind, PoolKind::Remote { .. });
        Ok(PoolSpec {
            name: name.to_owned(),
            kind,
            max_requests: max_requests.unwrap_or(0),
            affinity: Affinity::parse(affinity.unwrap_or("none"))?,
            balance: match balance.unwrap_or("least-busy") {
                "least-busy" => Balance::LeastBusy,
                "round-robin" => Balance::RoundRobin,
                "p2c-ewma" => Balance::P2cEwma,
                other => {
                    return Err(format!(
                        "balance `{other}`: \"least-busy\", \"round-robin\" or \"p2c-ewma\""
                    ))
                }
            },
            queue: queue.unwrap_or(1024),
            queue_timeout: queue_timeout.unwrap_or(Duration::from_secs(10)),
            timeout: timeout.unwrap_or(Duration::from_secs(60)),
            // An external pool (php-fpm) usually runs several workers behind
            // one address; a spawned process is assumed single-threaded.
            default_capacity: if remote { 16 } else { 1 },
            stated_capacity: capacity,
            keepalive_timeout: keepalive_timeout.unwrap_or(Duration::from_secs(2)),
            protocol: Protocol::FastCgi,
            health: None,
            socket_activation: false,
            h2c,
        })
    }
}
