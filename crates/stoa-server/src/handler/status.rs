//! The status page: what the server, its FastCGI pools and its response
//! cache zones are doing, for people (plain text), programs (JSON) and
//! Prometheus (its text format).
//! A route with `status = {}` serves it; only the addresses in `allow`
//! (loopback by default) may read it.

use crate::cache::store::{self, Stats};
use crate::exchange::Exchange;
use crate::local::{Proto, Shared};
use crate::upstream::{Pool, PoolKind, ProcState};
use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stoa_h1::cidr::Cidr;

/// `status = { allow = [...] }` on a route, validated.
#[derive(Debug)]
pub struct StatusConfig {
    pub allow: Vec<Cidr>,
}

impl StatusConfig {
    pub fn new(allow: Option<&[String]>) -> Result<StatusConfig, String> {
        let allow = match allow {
            Some(list) => list
                .iter()
                .map(|s| s.parse::<Cidr>().map_err(|e| format!("`{s}`: {e}")))
                .collect::<Result<_, _>>()?,
            None => vec![
                "127.0.0.0/8".parse().map_err(|e| format!("{e}"))?,
                "::1".parse().map_err(|e| format!("{e}"))?,
            ],
        };
        Ok(StatusConfig { allow })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Prometheus,
}

/// Answers a request for the status page.
pub fn serve(cfg: &StatusConfig, reply: &mut Exchange<'_>, pools: &[Arc<Pool>]) {
    let head = reply.req();
    let peer = reply.peer().ip();
    if !cfg.allow.iter().any(|c| c.contains(peer)) {
        reply.error(403, &[]);
        return;
    }
    if !matches!(head.method, stoa_h1::Method::Get | stoa_h1::Method::Head) {
        reply.error(head.method.not_allowed_status(), &[("Allow", b"GET, HEAD")]);
        return;
    }
    let format = match head.query().and_then(|q| {
        q.split(|&b| b == b'&')
            .find_map(|kv| kv.strip_prefix(b"format="))
    }) {
        Some(b"json") => Format::Json,
        Some(b"prometheus") => Format::Prometheus,
        _ => Format::Text,
    };
    let snap = Snapshot::take(&reply.worker().shared, pools);
    let (body, ctype): (String, &[u8]) = match format {
        Format::Text => (snap.text(), b"text/plain; charset=utf-8"),
        Format::Json => (snap.json(), b"application/json"),
        Format::Prometheus => (
            snap.prometheus(),
            b"text/plain; version=0.0.4; charset=utf-8",
        ),
    };
    reply.start(200);
    reply.header("Content-Type", ctype);
    reply.header("Cache-Control", b"no-store");
    reply.end_head(Some(body.len() as u64));
    reply.write(body.as_bytes());
}

/// The figures, read once so the three formats agree.
struct Snapshot {
    uptime: u64,
    workers: usize,
    connections: usize,
    responses: [u64; 5],
    /// By protocol, in [`Proto::ALL`] order: connections counted, open.
    by_proto: [(u64, u64); 5],
    /// Streams of HTTP/2 over TLS and cleartext, and of HTTP/3:
    /// accepted, open.
    streams: [(u64, u64); 3],
    /// TLS handshakes: full, resumed, failed.
    handshakes: [u64; 3],
    /// QUIC connection attempts answered with a Retry, and refused.
    h3_attempts: [u64; 2],
    pools: Vec<PoolSnap>,
    /// The response cache's zones: name and counters, by name.
    zones: Vec<(String, Stats)>,
    /// Certificates from ACME: what is served, until when, the renewals.
    certificates: Vec<crate::acme::Report>,
}

/// A zone's figures, as each format names them: the key (JSON, text and
/// the Prometheus name after `stoa_cache_`), the Prometheus type and help.
type ZoneField = (&'static str, &'static str, &'static str, fn(&Stats) -> u64);

const ZONE_FIELDS: [ZoneField; 11] = [
    (
        "hits",
        "counter",
        "Requests answered from a fresh stored response.",
        |z| z.hits,
    ),
    (
        "misses",
        "counter",
        "Requests for which nothing was stored: fetched.",
        |z| z.misses,
    ),
    (
        "expired",
        "counter",
        "Requests whose stored response was stale: fetched again.",
        |z| z.expired,
    ),
    (
        "stale",
        "counter",
        "Stale responses served (stale-while-revalidate, stale-if-error).",
        |z| z.stale,
    ),
    (
        "revalidated",
        "counter",
        "Stale responses made fresh again by a 304.",
        |z| z.revalidated,
    ),
    (
        "bypasses",
        "counter",
        "Requests a bypass rule sent past the cache.",
        |z| z.bypasses,
    ),
    (
        "purges",
        "counter",
        "Objects removed by PURGE and by invalidation after unsafe methods.",
        |z| z.purges,
    ),
    (
        "store_failures",
        "counter",
        "Responses that should have been stored and were not (disk errors, bounds).",
        |z| z.store_failures,
    ),
    ("objects", "gauge", "Objects stored.", |z| z.objects),
    (
        "memory_bytes",
        "gauge",
        "Bytes of objects held in memory.",
        |z| z.memory_bytes,
    ),
    (
        "disk_bytes",
        "gauge",
        "Bytes of objects stored on disk.",
        |z| z.disk_bytes,
    ),
];

struct PoolSnap {
    name: String,
    spawned: bool,
    waiting: usize,
    procs: Vec<ProcSnap>,
}

struct ProcSnap {
    index: usize,
    state: &'static str,
    /// What the slot is: its process (spawned pools) or the address it
    /// names (address pools, whose processes are not Stoa's).
    who: Who,
    busy: usize,
    capacity: usize,
    idle: usize,
    multiplexing: bool,
    served: u64,
    restarts: u32,
    retries: u64,
    /// Passing its health checks (and not held off after a failure).
    healthy: bool,
    /// Refused connections and failed requests.
    failures: u64,
    /// Peak-EWMA response time (HTTP pools), microseconds; 0: none yet.
    latency_us: u64,
}

enum Who {
    Pid(i32),
    Address(String),
}

impl std::fmt::Display for Who {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Who::Pid(p) => write!(f, "pid {p}"),
            Who::Address(a) => write!(f, "address {a}"),
        }
    }
}

/// A time on the status page (HTTP date), or "-".
fn date(t: Option<std::time::SystemTime>) -> String {
    t.map(httpdate::fmt_http_date)
        .unwrap_or_else(|| "-".to_owned())
}

/// An ACME attempt's time and outcome, or "-".
fn attempt(a: &Option<(std::time::SystemTime, Result<(), String>)>) -> String {
    match a {
        None => "-".to_owned(),
        Some((t, Ok(()))) => format!("{} ok", httpdate::fmt_http_date(*t)),
        Some((t, Err(e))) => format!("{} failed: {e}", httpdate::fmt_http_date(*t)),
    }
}

fn state_name(s: ProcState) -> &'static str {
    match s {
        ProcState::Stopped => "stopped",
        ProcState::Starting => "starting",
        ProcState::Running => "running",
        ProcState::Retiring => "retiring",
        ProcState::Dead => "dead",
    }
}

impl Snapshot {
    fn take(shared: &Shared, pools: &[Arc<Pool>]) -> Snapshot {
        Snapshot {
            uptime: shared.started.elapsed().as_secs(),
            workers: shared.stats.len(),
            connections: shared.connections.load(Ordering::Relaxed),
            responses: shared.responses(),
            by_proto: {
                let total = shared.sum(|w| &w.connections);
                let open = shared.sum(|w| &w.connections_open);
                std::array::from_fn(|i| (total[i], open[i]))
            },
            streams: {
                let total = shared.sum(|w| &w.streams);
                let open = shared.sum(|w| &w.streams_open);
                std::array::from_fn(|i| (total[i], open[i]))
            },
            handshakes: shared.sum(|w| &w.handshakes),
            h3_attempts: shared.sum(|w| &w.h3_attempts),
            pools: pools.iter().map(|p| pool_snap(p)).collect(),
            zones: {
                let mut z: Vec<_> = store::zones()
                    .iter()
                    .map(|z| (z.name().to_owned(), z.stats()))
                    .collect();
                z.sort_by(|a, b| a.0.cmp(&b.0));
                z
            },
            certificates: crate::acme::reports(),
        }
    }

    fn text(&self) -> String {
        let mut s = String::new();
        let r = &self.responses;
        let _ = writeln!(
            s,
            "stoa {}\nuptime: {} s\nworkers: {}\nconnections open: {}\nresponses: {} (1xx {}, 2xx {}, 3xx {}, 4xx {}, 5xx {})",
            env!("CARGO_PKG_VERSION"),
            self.uptime,
            self.workers,
            self.connections,
            r.iter().sum::<u64>(),
            r[0],
            r[1],
            r[2],
            r[3],
            r[4]
        );
        for (p, (total, open)) in Proto::ALL.iter().zip(self.by_proto) {
            let _ = write!(s, "{}: {total} connections, {open} open", p.name());
            if let Some((st, so)) = self.h2_streams(*p) {
                let _ = write!(s, "; {st} streams, {so} open");
            }
            s.push('\n');
        }
        let h = &self.handshakes;
        let _ = writeln!(
            s,
            "tls handshakes: {} full, {} resumed, {} failed",
            h[0], h[1], h[2]
        );
        let _ = writeln!(
            s,
            "h3 retries: {}, h3 refused: {}",
            self.h3_attempts[0], self.h3_attempts[1]
        );
        for p in &self.pools {
            let _ = writeln!(
                s,
                "pool {} ({}): waiting {}",
                p.name,
                if p.spawned { "spawned" } else { "address" },
                p.waiting
            );
            for c in &p.procs {
                let _ = writeln!(
                    s,
                    "  #{} {} {} busy {}/{} idle {}{} served {} restarts {} retries {}",
                    c.index,
                    c.state,
                    c.who,
                    c.busy,
                    c.capacity,
                    c.idle,
                    if c.multiplexing { " multiplexing" } else { "" },
                    c.served,
                    c.restarts,
                    c.retries
                );
            }
        }
        for (name, z) in &self.zones {
            let _ = write!(s, "cache zone {name}:");
            for (i, (key, _, _, f)) in ZONE_FIELDS.iter().enumerate() {
                let _ = write!(s, "{} {key} {}", if i == 0 { "" } else { "," }, f(z));
            }
            s.push('\n');
        }
        for c in &self.certificates {
            let _ = writeln!(
                s,
                "acme {} ({}): {} certificate, expires {}, next renewal {}, last renewal {}, last attempt {}",
                c.hosts.join(" "),
                c.directory,
                c.source,
                date(c.not_after),
                date(c.next_renewal),
                date(c.last_renewal),
                attempt(&c.last_attempt),
            );
        }
        s
    }

    /// The stream counts of a protocol that has streams (HTTP/2, HTTP/3).
    fn h2_streams(&self, p: Proto) -> Option<(u64, u64)> {
        match p {
            Proto::H2 => Some(self.streams[0]),
            Proto::H2c => Some(self.streams[1]),
            Proto::H3 => Some(self.streams[2]),
            _ => None,
        }
    }

    fn json(&self) -> String {
        let r = &self.responses;
        let mut protocols = serde_json::Map::new();
        for (p, (total, open)) in Proto::ALL.iter().zip(self.by_proto) {
            let mut o = serde_json::json!({
                "connections_total": total,
                "connections_open": open,
            });
            if let Some((st, so)) = self.h2_streams(*p) {
                o["streams_total"] = st.into();
                o["streams_open"] = so.into();
            }
            protocols.insert(p.name().to_owned(), o);
        }
        let h = &self.handshakes;
        let v = serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_seconds": self.uptime,
            "workers": self.workers,
            "connections_open": self.connections,
            "responses": {
                "total": r.iter().sum::<u64>(),
                "1xx": r[0], "2xx": r[1], "3xx": r[2], "4xx": r[3], "5xx": r[4],
            },
            "protocols": protocols,
            "tls_handshakes": { "full": h[0], "resumed": h[1], "failed": h[2] },
            "h3_attempts": { "retried": self.h3_attempts[0], "refused": self.h3_attempts[1] },
            "pools": self.pools.iter().map(|p| serde_json::json!({
                "name": p.name,
                "kind": if p.spawned { "spawned" } else { "address" },
                "waiting": p.waiting,
                "processes": p.procs.iter().map(|c| {
                    let mut o = serde_json::json!({
                    "index": c.index,
                    "state": c.state,
                    "busy": c.busy,
                    "capacity": c.capacity,
                    "idle_connections": c.idle,
                    "multiplexing": c.multiplexing,
                    "served": c.served,
                    "restarts": c.restarts,
                    "retries": c.retries,
                    "healthy": c.healthy,
                    "failures": c.failures,
                    "latency_ewma_ms": c.latency_us as f64 / 1000.0,
                    });
                    match &c.who {
                        Who::Pid(p) => o["pid"] = (*p).into(),
                        Who::Address(a) => o["address"] = a.as_str().into(),
                    }
                    o
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "cache_zones": self.zones.iter().map(|(name, z)| {
                let mut o = serde_json::Map::new();
                o.insert("name".into(), name.as_str().into());
                for (key, _, _, f) in ZONE_FIELDS {
                    o.insert(key.into(), f(z).into());
                }
                serde_json::Value::Object(o)
            }).collect::<Vec<_>>(),
            "acme": self.certificates.iter().map(|c| serde_json::json!({
                "hosts": c.hosts,
                "directory": c.directory,
                "certificate": c.source,
                "expires": c.not_after.map(httpdate::fmt_http_date),
                "next_renewal": c.next_renewal.map(httpdate::fmt_http_date),
                "last_renewal": c.last_renewal.map(httpdate::fmt_http_date),
                "last_attempt": c.last_attempt.as_ref().map(|(t, _)| httpdate::fmt_http_date(*t)),
                "last_outcome": c.last_attempt.as_ref().map(|(_, r)| match r {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => e.clone(),
                }),
            })).collect::<Vec<_>>(),
        });
        let mut s = v.to_string();
        s.push('\n');
        s
    }

    fn prometheus(&self) -> String {
        let mut s = String::new();
        let metric = |s: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(s, "# HELP stoa_{name} {help}\n# TYPE stoa_{name} {kind}");
        };
        metric(
            &mut s,
            "uptime_seconds",
            "gauge",
            "Seconds since the server started.",
        );
        let _ = writeln!(s, "stoa_uptime_seconds {}", self.uptime);
        metric(
            &mut s,
            "connections_open",
            "gauge",
            "Client connections open.",
        );
        let _ = writeln!(s, "stoa_connections_open {}", self.connections);
        metric(
            &mut s,
            "responses_total",
            "counter",
            "Responses sent, by status class.",
        );
        for (i, n) in self.responses.iter().enumerate() {
            let _ = writeln!(s, "stoa_responses_total{{class=\"{}xx\"}} {n}", i + 1);
        }
        metric(
            &mut s,
            "protocol_connections_total",
            "counter",
            "Connections by protocol (http/1.1, http/1.1+tls, h2, h2c), counted once it is known.",
        );
        for (p, (total, _)) in Proto::ALL.iter().zip(self.by_proto) {
            let _ = writeln!(
                s,
                "stoa_protocol_connections_total{{protocol=\"{}\"}} {total}",
                p.name()
            );
        }
        metric(
            &mut s,
            "protocol_connections_open",
            "gauge",
            "Connections open, by protocol.",
        );
        for (p, (_, open)) in Proto::ALL.iter().zip(self.by_proto) {
            let _ = writeln!(
                s,
                "stoa_protocol_connections_open{{protocol=\"{}\"}} {open}",
                p.name()
            );
        }
        for (name, kind, help, open) in [
            (
                "h2_streams_total",
                "counter",
                "HTTP/2 streams accepted, over TLS (h2) and cleartext (h2c).",
                false,
            ),
            (
                "h2_streams_open",
                "gauge",
                "HTTP/2 streams being served.",
                true,
            ),
        ] {
            metric(&mut s, name, kind, help);
            for p in [Proto::H2, Proto::H2c] {
                if let Some((total, o)) = self.h2_streams(p) {
                    let n = if open { o } else { total };
                    let _ = writeln!(s, "stoa_{name}{{protocol=\"{}\"}} {n}", p.name());
                }
            }
        }
        let (h3_total, h3_open) = self.streams[2];
        metric(
            &mut s,
            "h3_streams_total",
            "counter",
            "HTTP/3 request streams accepted.",
        );
        let _ = writeln!(s, "stoa_h3_streams_total {h3_total}");
        metric(
            &mut s,
            "h3_streams_open",
            "gauge",
            "HTTP/3 request streams being served.",
        );
        let _ = writeln!(s, "stoa_h3_streams_open {h3_open}");
        metric(
            &mut s,
            "h3_attempts_total",
            "counter",
            "QUIC connection attempts answered with a Retry, or refused.",
        );
        for (kind, n) in ["retry", "refused"].iter().zip(self.h3_attempts) {
            let _ = writeln!(s, "stoa_h3_attempts_total{{result=\"{kind}\"}} {n}");
        }
        metric(
            &mut s,
            "tls_handshakes_total",
            "counter",
            "TLS handshakes: full, resumed, failed.",
        );
        for (kind, n) in ["full", "resumed", "failed"].iter().zip(self.handshakes) {
            let _ = writeln!(s, "stoa_tls_handshakes_total{{result=\"{kind}\"}} {n}");
        }
        metric(
            &mut s,
            "pool_waiting",
            "gauge",
            "Requests waiting for a FastCGI process.",
        );
        for p in &self.pools {
            let _ = writeln!(s, "stoa_pool_waiting{{pool=\"{}\"}} {}", p.name, p.waiting);
        }
        type Field = fn(&ProcSnap) -> u64;
        let per_proc: [(&str, &str, &str, Field); 10] = [
            (
                "pool_process_up",
                "gauge",
                "1 while the process is running.",
                |c| u64::from(c.state == "running"),
            ),
            (
                "pool_process_busy",
                "gauge",
                "Requests in flight on the process.",
                |c| c.busy as u64,
            ),
            (
                "pool_process_capacity",
                "gauge",
                "Requests the process takes at once.",
                |c| c.capacity as u64,
            ),
            (
                "pool_process_idle_connections",
                "gauge",
                "Kept-alive connections parked for reuse.",
                |c| c.idle as u64,
            ),
            (
                "pool_process_served_total",
                "counter",
                "Requests the process slot has served.",
                |c| c.served,
            ),
            (
                "pool_process_restarts_total",
                "counter",
                "Restarts of the process slot after an exit.",
                |c| u64::from(c.restarts),
            ),
            (
                "pool_process_retries_total",
                "counter",
                "Requests sent again on a new connection after a kept-alive one closed before answering.",
                |c| c.retries,
            ),
            (
                "pool_process_failures_total",
                "counter",
                "Connections the process (server) refused and requests it failed.",
                |c| c.failures,
            ),
            (
                "pool_process_healthy",
                "gauge",
                "1 while the process passes its health checks and is in rotation.",
                |c| u64::from(c.healthy),
            ),
            (
                "pool_process_latency_ewma_microseconds",
                "gauge",
                "Peak-EWMA response time of the process (HTTP pools).",
                |c| c.latency_us,
            ),
        ];
        for (name, kind, help, f) in per_proc {
            metric(&mut s, name, kind, help);
            for p in &self.pools {
                for c in &p.procs {
                    let _ = writeln!(
                        s,
                        "stoa_{name}{{pool=\"{}\",process=\"{}\"}} {}",
                        p.name,
                        c.index,
                        f(c)
                    );
                }
            }
        }
        for (key, kind, help, f) in ZONE_FIELDS {
            let name = if kind == "counter" {
                format!("cache_{key}_total")
            } else {
                format!("cache_{key}")
            };
            metric(&mut s, &name, kind, help);
            for (zone, z) in &self.zones {
                let _ = writeln!(s, "stoa_{name}{{zone=\"{}\"}} {}", label(zone), f(z));
            }
        }
        if !self.certificates.is_empty() {
            metric(
                &mut s,
                "acme_certificate_expiry_timestamp_seconds",
                "gauge",
                "When each ACME certificate served expires (Unix time; 0: a temporary one).",
            );
            for c in &self.certificates {
                let at = c
                    .not_after
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                let _ = writeln!(
                    s,
                    "stoa_acme_certificate_expiry_timestamp_seconds{{hosts=\"{}\"}} {at}",
                    label(&c.hosts.join(" "))
                );
            }
            metric(
                &mut s,
                "acme_last_attempt_failed",
                "gauge",
                "1 when the last attempt to obtain or renew an ACME certificate failed.",
            );
            for c in &self.certificates {
                let failed = matches!(c.last_attempt, Some((_, Err(_))));
                let _ = writeln!(
                    s,
                    "stoa_acme_last_attempt_failed{{hosts=\"{}\"}} {}",
                    label(&c.hosts.join(" ")),
                    u8::from(failed)
                );
            }
        }
        s
    }
}

/// A Prometheus label value: `\`, `"` and newlines escaped (its text
/// format).
fn label(v: &str) -> Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(v);
    }
    Cow::Owned(
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n"),
    )
}

fn pool_snap(p: &Pool) -> PoolSnap {
    let spawned = matches!(p.spec.kind, PoolKind::Spawn { .. });
    PoolSnap {
        name: p.spec.name.clone(),
        spawned,
        waiting: p.waiting(),
        procs: p
            .procs
            .iter()
            // Slots of a dynamic pool that never started say nothing.
            .filter(|c| {
                !(spawned
                    && c.state() == ProcState::Stopped
                    && c.served_total.load(Ordering::Relaxed) == 0)
            })
            .map(|c| ProcSnap {
                index: c.index,
                state: state_name(c.state()),
                who: if spawned {
                    Who::Pid(c.pid.load(Ordering::Relaxed))
                } else {
                    Who::Address(c.target.to_string())
                },
                busy: c.busy(),
                capacity: c.capacity(),
                idle: c.idle_count(),
                multiplexing: c.multiplexes(),
                served: c.served_total.load(Ordering::Relaxed),
                restarts: c.restarts.load(Ordering::Relaxed),
                retries: c.retries.load(Ordering::Relaxed),
                healthy: c.in_rotation(),
                failures: c.failures.load(Ordering::Relaxed),
                latency_us: c.ewma_us(),
            })
            .collect(),
    }
}

// ---- configuration: `status = {...}` of a route ----

/// `status = {...}`: the status page.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusRouteConfig {
    /// Addresses or blocks that may read it (default: loopback).
    pub allow: Option<Vec<String>>,
}

impl super::configure::Configure for StatusRouteConfig {
    fn configure(
        &self,
        _: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        let cfg = StatusConfig::new(self.allow.as_deref())
            .map_err(super::configure::Fail::at("status.allow"))?;
        Ok(super::Handler::Status(Arc::new(cfg)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_takes_the_spellings_trusted_proxies_takes() {
        // One parser for every address list: `[::1]` and `all` included.
        let cfg = |list: &[&str]| {
            let v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            StatusConfig::new(Some(&v))
        };
        let ip = |s: &str| s.parse::<std::net::IpAddr>().expect(s);
        let c = cfg(&["[::1]", "10.0.0.0/8"]).expect("parses");
        assert!(c.allow.iter().any(|n| n.contains(ip("::1"))));
        assert!(c.allow.iter().any(|n| n.contains(ip("::ffff:10.1.2.3"))));
        assert!(cfg(&["all"]).expect("all").allow[0].contains(ip("2001:db8::1")));
        assert!(cfg(&["10.0.0.0/33"]).is_err());
        assert!(cfg(&["nope"]).is_err());
        let default = StatusConfig::new(None).expect("default");
        assert!(default.allow.iter().any(|n| n.contains(ip("127.0.0.1"))));
        assert!(default.allow.iter().any(|n| n.contains(ip("::1"))));
        assert!(!default.allow.iter().any(|n| n.contains(ip("192.0.2.1"))));
    }

    /// A snapshot with no server figures and two cache zones.
    fn with_zones() -> Snapshot {
        let pages = Stats {
            hits: 40,
            misses: 2,
            expired: 3,
            stale: 4,
            revalidated: 5,
            bypasses: 6,
            purges: 7,
            store_failures: 8,
            objects: 9,
            memory_bytes: 10_240,
            disk_bytes: 20_480,
            ..Stats::default()
        };
        Snapshot {
            uptime: 1,
            workers: 1,
            connections: 0,
            responses: [0; 5],
            by_proto: [(0, 0); 5],
            streams: [(0, 0); 3],
            handshakes: [0; 3],
            h3_attempts: [0; 2],
            certificates: Vec::new(),
            pools: Vec::new(),
            zones: vec![
                ("pages".into(), pages),
                ("we\"ird".into(), Stats::default()),
            ],
        }
    }

    /// Prometheus: one `stoa_cache_*` family per figure with its HELP and
    /// TYPE lines, counters named `_total`, one sample per zone labelled
    /// `zone` (its label value escaped as the text format asks).
    #[test]
    fn prometheus_has_a_family_per_cache_figure_labelled_by_zone() {
        let p = with_zones().prometheus();
        for (name, kind, value) in [
            ("cache_hits_total", "counter", 40),
            ("cache_misses_total", "counter", 2),
            ("cache_expired_total", "counter", 3),
            ("cache_stale_total", "counter", 4),
            ("cache_revalidated_total", "counter", 5),
            ("cache_bypasses_total", "counter", 6),
            ("cache_purges_total", "counter", 7),
            ("cache_store_failures_total", "counter", 8),
            ("cache_objects", "gauge", 9),
            ("cache_memory_bytes", "gauge", 10_240),
            ("cache_disk_bytes", "gauge", 20_480),
        ] {
            assert_eq!(
                p.matches(&format!("# HELP stoa_{name} ")).count(),
                1,
                "{name}: {p}"
            );
            assert!(
                p.contains(&format!("# TYPE stoa_{name} {kind}\n")),
                "{name}: {p}"
            );
            let sample = format!("stoa_{name}{{zone=\"pages\"}} {value}\n");
            assert!(p.contains(&sample), "{sample}: {p}");
            let weird = format!("stoa_{name}{{zone=\"we\\\"ird\"}} 0\n");
            assert!(p.contains(&weird), "{weird}: {p}");
        }
        // Every sample line belongs to a family announced before it.
        let mut typed = std::collections::HashSet::new();
        for l in p.lines() {
            if let Some(t) = l.strip_prefix("# TYPE ") {
                typed.insert(t.split(' ').next().unwrap_or("").to_owned());
            } else if !l.starts_with('#') {
                let family = l.split(['{', ' ']).next().unwrap_or("");
                assert!(typed.contains(family), "{l}");
            }
        }
    }

    /// JSON: `cache_zones`, an array of objects with the zone's name and
    /// every figure; the text page has a line per zone.
    #[test]
    fn json_and_text_list_every_zone_with_its_figures() {
        let snap = with_zones();
        let v: serde_json::Value = serde_json::from_str(&snap.json()).expect("JSON");
        let zones = v["cache_zones"].as_array().expect("cache_zones");
        assert_eq!(zones.len(), 2);
        let z = &zones[0];
        assert_eq!(z["name"], "pages");
        for (k, n) in [
            ("hits", 40),
            ("misses", 2),
            ("expired", 3),
            ("stale", 4),
            ("revalidated", 5),
            ("bypasses", 6),
            ("purges", 7),
            ("store_failures", 8),
            ("objects", 9),
            ("memory_bytes", 10_240),
            ("disk_bytes", 20_480),
        ] {
            assert_eq!(z[k], n, "{k}: {z}");
        }
        assert_eq!(zones[1]["name"], "we\"ird");
        let t = snap.text();
        assert!(
            t.contains(
                "cache zone pages: hits 40, misses 2, expired 3, stale 4, revalidated 5, \
                 bypasses 6, purges 7, store_failures 8, objects 9, memory_bytes 10240, \
                 disk_bytes 20480\n"
            ),
            "{t}"
        );
    }
}
