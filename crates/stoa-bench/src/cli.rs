//! The command line: ApacheBench's flags (short ones may be bundled, values
//! attached or separate: `-kc10 -n 1000`), wrk's `-d --threads --latency`,
//! and Stoa's long options. Turns them, and the scenario if any, into a
//! [`Plan`].

use crate::plan::{
    build_request, AbortRules, Load, Plan, RequestOpts, RequestSpec, Target, Think, Url,
};
use crate::scenario::Scenario;
use crate::transport::{TlsSetup, Trust};
use crate::util::{base64, parse_duration};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

/// A usage error (exit status 2) or a run-time one (exit status 1).
#[derive(Debug, PartialEq, Eq)]
pub enum CliError {
    Usage(String),
    Fatal(String),
}

#[derive(Debug, Default, Clone)]
pub struct Options {
    pub requests: Option<u64>,
    pub concurrency: Option<u64>,
    pub keep_alive: bool,
    pub time_limit: Option<Duration>,
    pub timeout: Option<Duration>,
    pub post_file: Option<PathBuf>,
    pub put_file: Option<PathBuf>,
    pub content_type: Option<String>,
    pub headers: Vec<String>,
    pub cookies: Vec<String>,
    pub auth: Option<String>,
    pub head: bool,
    pub http10: bool,
    pub variable_length: bool,
    pub method: Option<String>,
    pub duration: Option<Duration>,
    pub threads: Option<usize>,
    pub latency: bool,
    /// Closed loop: also report latencies corrected for coordinated
    /// omission.
    pub corrected: bool,
    pub rate: Option<f64>,
    /// Closed loop: delay before each client's first request (fixed, or a
    /// seeded uniform draw in a range).
    pub first_delay: Option<(Duration, Duration)>,
    /// A point of the running mean and deviation every N responses.
    pub running_every: Option<u64>,
    pub json: Option<PathBuf>,
    pub html: Option<PathBuf>,
    pub hdr_log: Option<PathBuf>,
    /// The per-request log (CSV).
    pub request_log: Option<PathBuf>,
    pub scenario: Option<PathBuf>,
    pub seed: Option<u64>,
    pub quiet: bool,
    pub help: bool,
    pub version: bool,
    pub url: Option<String>,
    /// `--threshold`: pass/fail checks of the run's figures.
    pub thresholds: Vec<crate::threshold::Threshold>,
    /// `--name`: the run's name (compare groups runs by it).
    pub name: Option<String>,
    /// `--insecure`: the server's certificate is not checked (curl's `-k`;
    /// here `-k` is ab's keep-alive).
    pub insecure: bool,
    /// `--cacert FILE`: the CA certificates (PEM) the server's must chain
    /// to, instead of the system's.
    pub cacert: Option<PathBuf>,
    /// `--tls-resume`: resume TLS sessions on new connections.
    pub tls_resume: bool,
    /// `--http2`: HTTP/2 (ALPN `h2` for https://, prior knowledge for
    /// http://, as h2load does).
    pub http2: bool,
    /// `--max-concurrent-streams N`: HTTP/2 requests in flight per
    /// connection (h2load's `-m`).
    pub streams: Option<u32>,
    /// `--http3`: HTTP/3 over QUIC (ALPN `h3`, https:// URLs).
    pub http3: bool,
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, CliError> {
    v.trim()
        .parse()
        .map_err(|_| CliError::Usage(format!("{flag} {v:?}: not a valid number")))
}

fn duration(flag: &str, v: &str) -> Result<Duration, CliError> {
    parse_duration(v).ok_or_else(|| {
        CliError::Usage(format!(
            "{flag} {v:?}: not a duration (e.g. 10, 10s, 500ms, 2m)"
        ))
    })
}

/// Short flags that take a value.
const SHORT_VALUE: &str = "nctspuTHCAmd";
/// Short flags without a value.
const SHORT_FLAG: &str = "kilrqhV";

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, CliError> {
        let mut o = Options::default();
        let mut i = 0;
        let mut rest_positional = false;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            if rest_positional || a == "-" || !a.starts_with('-') {
                if o.url.is_some() {
                    return Err(CliError::Usage(format!(
                        "unexpected argument {a:?} (one URL only)"
                    )));
                }
                o.url = Some(a.clone());
                continue;
            }
            if a == "--" {
                rest_positional = true;
                continue;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                let takes = matches!(
                    name,
                    "requests"
                        | "concurrency"
                        | "connections"
                        | "timelimit"
                        | "timeout"
                        | "duration"
                        | "threads"
                        | "rate"
                        | "json"
                        | "html"
                        | "hdr-log"
                        | "scenario"
                        | "seed"
                        | "header"
                        | "method"
                        | "cookie"
                        | "auth"
                        | "content-type"
                        | "post-file"
                        | "first-delay"
                        | "log"
                        | "request-log"
                        | "running-every"
                        | "threshold"
                        | "name"
                        | "label"
                        | "cacert"
                        | "max-concurrent-streams"
                        | "streams"
                );
                let mut value = || -> Result<String, CliError> {
                    if let Some(v) = inline.clone() {
                        return Ok(v);
                    }
                    let v = args
                        .get(i)
                        .cloned()
                        .ok_or_else(|| CliError::Usage(format!("--{name} needs a value")))?;
                    i += 1;
                    Ok(v)
                };
                if !takes && inline.is_some() {
                    return Err(CliError::Usage(format!("--{name} takes no value")));
                }
                match name {
                    "requests" => o.requests = Some(num("--requests", &value()?)?),
                    "concurrency" | "connections" => {
                        o.concurrency = Some(num("--concurrency", &value()?)?)
                    }
                    "timelimit" => o.time_limit = Some(duration("--timelimit", &value()?)?),
                    "timeout" => o.timeout = Some(duration("--timeout", &value()?)?),
                    "duration" => o.duration = Some(duration("--duration", &value()?)?),
                    "threads" => o.threads = Some(num("--threads", &value()?)?),
                    "rate" => o.rate = Some(num("--rate", &value()?)?),
                    "json" => o.json = Some(value()?.into()),
                    "html" => o.html = Some(value()?.into()),
                    "hdr-log" => o.hdr_log = Some(value()?.into()),
                    "log" | "request-log" => o.request_log = Some(value()?.into()),
                    "running-every" => o.running_every = Some(num("--running-every", &value()?)?),
                    "threshold" => o.thresholds.push(
                        crate::threshold::parse(&value()?)
                            .map_err(|e| CliError::Usage(format!("--threshold {e}")))?,
                    ),
                    "name" | "label" => {
                        let v = value()?;
                        if v.trim().is_empty() {
                            return Err(CliError::Usage(format!(
                                "--{name} needs a non-empty name"
                            )));
                        }
                        o.name = Some(v);
                    }
                    "scenario" => o.scenario = Some(value()?.into()),
                    "seed" => o.seed = Some(num("--seed", &value()?)?),
                    "header" => o.headers.push(value()?),
                    "cookie" => o.cookies.push(value()?),
                    "auth" => o.auth = Some(value()?),
                    "method" => o.method = Some(value()?),
                    "content-type" => o.content_type = Some(value()?),
                    "post-file" => o.post_file = Some(value()?.into()),
                    "first-delay" => {
                        let v = value()?;
                        let (a, b) = match v.split_once(',') {
                            Some((a, b)) => {
                                (duration("--first-delay", a)?, duration("--first-delay", b)?)
                            }
                            None => {
                                let d = duration("--first-delay", &v)?;
                                (d, d)
                            }
                        };
                        if a > b {
                            return Err(CliError::Usage(format!(
                                "--first-delay {v:?}: the first bound is above the second"
                            )));
                        }
                        o.first_delay = Some((a, b));
                    }
                    "cacert" => o.cacert = Some(value()?.into()),
                    "insecure" => o.insecure = true,
                    "tls-resume" => o.tls_resume = true,
                    "http2" | "h2" => o.http2 = true,
                    "http3" | "h3" => o.http3 = true,
                    "max-concurrent-streams" | "streams" => {
                        o.streams = Some(num("--max-concurrent-streams", &value()?)?)
                    }
                    "keepalive" | "keep-alive" => o.keep_alive = true,
                    "head" => o.head = true,
                    "http1.0" => o.http10 = true,
                    "latency" => o.latency = true,
                    "corrected" => o.corrected = true,
                    "variable-length" => o.variable_length = true,
                    "quiet" | "no-progress" => o.quiet = true,
                    "help" => o.help = true,
                    "version" => o.version = true,
                    _ => return Err(CliError::Usage(format!("unknown option --{name}"))),
                }
                continue;
            }
            // Short flags, possibly bundled: -kc10, -n100, -c 10.
            let chars: Vec<char> = a[1..].chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let f = chars[j];
                j += 1;
                if SHORT_FLAG.contains(f) {
                    match f {
                        'k' => o.keep_alive = true,
                        'i' => o.head = true,
                        'l' => o.variable_length = true,
                        'r' => {} // ab: don't exit on receive errors; always so here
                        'q' => o.quiet = true,
                        'h' => o.help = true,
                        'V' => o.version = true,
                        _ => unreachable!(),
                    }
                    continue;
                }
                if !SHORT_VALUE.contains(f) {
                    return Err(CliError::Usage(format!("unknown option -{f}")));
                }
                let v: String = if j < chars.len() {
                    let v = chars[j..].iter().collect();
                    j = chars.len();
                    v
                } else {
                    let v = args
                        .get(i)
                        .cloned()
                        .ok_or_else(|| CliError::Usage(format!("-{f} needs a value")))?;
                    i += 1;
                    v
                };
                let flag = format!("-{f}");
                match f {
                    'n' => o.requests = Some(num(&flag, &v)?),
                    'c' => o.concurrency = Some(num(&flag, &v)?),
                    't' => o.time_limit = Some(duration(&flag, &v)?),
                    's' => o.timeout = Some(duration(&flag, &v)?),
                    'p' => o.post_file = Some(v.into()),
                    'u' => o.put_file = Some(v.into()),
                    'T' => o.content_type = Some(v),
                    'H' => o.headers.push(v),
                    'C' => o.cookies.push(v),
                    'A' => o.auth = Some(v),
                    'm' => o.method = Some(v),
                    'd' => o.duration = Some(duration(&flag, &v)?),
                    _ => unreachable!(),
                }
            }
        }
        Ok(o)
    }

    /// wrk-style report: asked for with `-d` or `--latency`.
    pub fn wrk_style(&self) -> bool {
        self.duration.is_some() || self.latency
    }

    /// Resolves the options (and the scenario) into a plan.
    pub fn plan(&self) -> Result<Plan, CliError> {
        let sc = match &self.scenario {
            Some(p) => Some(Scenario::load(p).map_err(CliError::Fatal)?),
            None => None,
        };
        let sc_ref = sc.as_ref();
        let url_s = self
            .url
            .clone()
            .or_else(|| sc_ref.and_then(|s| s.url.clone()))
            .ok_or_else(|| CliError::Usage("no URL given".into()))?;
        let url = Url::parse(&url_s).map_err(CliError::Usage)?;
        for h in &self.headers {
            if !h.contains(':') {
                return Err(CliError::Usage(format!(
                    "-H {h:?}: a header is \"Name: value\""
                )));
            }
        }
        if self.concurrency == Some(0) {
            return Err(CliError::Usage("-c must be at least 1".into()));
        }
        if self.requests == Some(0) {
            return Err(CliError::Usage("-n must be at least 1".into()));
        }
        if self.threads == Some(0) {
            return Err(CliError::Usage("--threads must be at least 1".into()));
        }
        if self.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err(CliError::Usage(
                "--rate must be a positive number of requests per second".into(),
            ));
        }
        if self.head as u8 + self.post_file.is_some() as u8 + self.put_file.is_some() as u8 > 1 {
            return Err(CliError::Usage("use only one of -i, -p and -u".into()));
        }
        if self.corrected && (self.rate.is_some() || sc_ref.is_some_and(|s| s.rate.is_some())) {
            return Err(CliError::Usage(
                "--corrected is for the closed loop: with --rate latency already counts from each request's intended send time".into(),
            ));
        }
        if self.time_limit.is_some() && self.duration.is_some() {
            return Err(CliError::Usage("use either -t or -d, not both".into()));
        }
        let addrs: Vec<_> = (url.host.as_str(), url.port)
            .to_socket_addrs()
            .map_err(|e| CliError::Fatal(format!("cannot resolve {}: {e}", url.host)))?
            .collect();
        if addrs.is_empty() {
            return Err(CliError::Fatal(format!(
                "cannot resolve {}: no address",
                url.host
            )));
        }
        let authority = url.authority();
        // The flags win over the scenario's `[run]` keys.
        let http2 = self.http2 || sc_ref.and_then(|s| s.http2).unwrap_or(false);
        let insecure = self.insecure || sc_ref.and_then(|s| s.insecure).unwrap_or(false);
        let tls_resume = self.tls_resume || sc_ref.and_then(|s| s.tls_resume).unwrap_or(false);
        let cacert = self
            .cacert
            .clone()
            .or_else(|| sc_ref.and_then(|s| s.cacert.clone()));
        let http3 = self.http3 || sc_ref.and_then(|s| s.http3).unwrap_or(false);
        if http3 && !url.tls {
            return Err(CliError::Usage(
                "--http3 needs an https:// URL (QUIC is always TLS)".into(),
            ));
        }
        if http3 && http2 {
            return Err(CliError::Usage("use either --http2 or --http3".into()));
        }
        if !url.tls && (insecure || cacert.is_some() || tls_resume) {
            return Err(CliError::Usage(
                "--insecure, --cacert and --tls-resume are for https:// URLs".into(),
            ));
        }
        if insecure && cacert.is_some() {
            return Err(CliError::Usage(
                "use either --insecure or --cacert, not both".into(),
            ));
        }
        let mut suites = Vec::new();
        let tls = if url.tls {
            let trust = match (&cacert, insecure) {
                (Some(p), _) => Trust::CaFile(p),
                (None, true) => Trust::Insecure,
                (None, false) => Trust::System,
            };
            let provider = if http3 {
                let (p, notes) = crate::quic::noted_provider();
                suites = notes;
                p
            } else {
                std::sync::Arc::new(rustls::crypto::ring::default_provider())
            };
            Some(
                TlsSetup::with_provider(
                    &url.host,
                    trust,
                    tls_resume,
                    if http3 {
                        &[b"h3"]
                    } else if http2 {
                        &[b"h2"]
                    } else {
                        &[b"http/1.1"]
                    },
                    provider,
                )
                .map_err(CliError::Fatal)?,
            )
        } else {
            None
        };
        let quic = match (&tls, http3) {
            (Some(t), true) => {
                Some(crate::quic::QuicSetup::new(t, &url.host, suites).map_err(CliError::Fatal)?)
            }
            _ => None,
        };
        let target = Target {
            quic,
            addrs,
            host: url.host.clone(),
            port: url.port,
            authority: authority.clone(),
            tls,
        };

        // HTTP/2 connections are persistent: -k is implied (h2load).
        let keep_alive =
            http2 || http3 || self.keep_alive || sc_ref.and_then(|s| s.keep_alive).unwrap_or(false);
        let http10 = self.http10 || sc_ref.and_then(|s| s.http10).unwrap_or(false);
        if (http2 || http3) && http10 {
            return Err(CliError::Usage("use either --http2 or --http1.0".into()));
        }
        let mut headers: Vec<String> = sc_ref.map(|s| s.headers.clone()).unwrap_or_default();
        headers.extend(self.headers.iter().cloned());
        if !self.cookies.is_empty() {
            headers.push(format!("Cookie: {}", self.cookies.join("; ")));
        }
        if let Some(a) = &self.auth {
            headers.push(format!("Authorization: Basic {}", base64(a.as_bytes())));
        }

        let mut requests = Vec::new();
        let mut groups: Vec<String> = Vec::new();
        let mix = sc_ref.map(|s| s.mix.as_slice()).unwrap_or(&[]);
        if mix.is_empty() || self.url.is_some() && sc_ref.is_some_and(|s| s.mix.is_empty()) {
            let (body, method) = match (&self.post_file, &self.put_file) {
                (Some(p), _) | (_, Some(p)) => {
                    let b = std::fs::read(p)
                        .map_err(|e| CliError::Fatal(format!("{}: {e}", p.display())))?;
                    (
                        Some(b),
                        if self.put_file.is_some() {
                            "PUT"
                        } else {
                            "POST"
                        },
                    )
                }
                _ => (None, if self.head { "HEAD" } else { "GET" }),
            };
            let method = self.method.clone().unwrap_or_else(|| method.to_string());
            let ctype = self
                .content_type
                .clone()
                .unwrap_or_else(|| "text/plain".into());
            let bytes = build_request(&RequestOpts {
                method: &method,
                path: &url.path,
                authority: &authority,
                http10,
                keep_alive,
                headers: &headers,
                body: body.as_deref().map(|b| (b, ctype.as_str())),
            });
            // A -p/-u file is sent as it is; placeholders in the URL and
            // the headers are replaced.
            requests.push(RequestSpec::new(
                bytes,
                body.as_ref().map_or(0, |b| b.len()),
                &method,
                &url.path,
                1,
                false,
            ));
            groups.push(format!("{method} {}", url.path));
        } else {
            for m in mix {
                let mut h = headers.clone();
                h.extend(m.headers.iter().cloned());
                let bytes = build_request(&RequestOpts {
                    method: &m.method,
                    path: &m.path,
                    authority: &authority,
                    http10,
                    keep_alive,
                    headers: &h,
                    body: m.body.as_ref().map(|(b, t)| (b.as_slice(), t.as_str())),
                });
                let mut spec = RequestSpec::new(
                    bytes,
                    m.body.as_ref().map_or(0, |b| b.0.len()),
                    &m.method,
                    &m.path,
                    m.weight,
                    !m.body_is_file,
                );
                let name = m
                    .group
                    .clone()
                    .unwrap_or_else(|| format!("{} {}", m.method, m.path));
                spec.group = match groups.iter().position(|g| *g == name) {
                    Some(i) => i,
                    None => {
                        groups.push(name);
                        groups.len() - 1
                    }
                };
                requests.push(spec);
            }
        }
        if http2 {
            let scheme = if url.tls { "https" } else { "http" };
            for r in &mut requests {
                let h2 = crate::h2::H2Request::from_h1(&r.bytes, r.body_len, scheme)
                    .map_err(CliError::Usage)?;
                r.h2 = Some(Box::new(h2));
            }
        }
        if http3 {
            for r in &mut requests {
                let h3 = crate::h3::H3Request::from_h1(&r.bytes, r.body_len, "https")
                    .map_err(CliError::Usage)?;
                r.h3 = Some(Box::new(h3));
            }
        }
        let mut acc = 0;
        let cumulative = requests
            .iter()
            .map(|r| {
                acc += r.weight;
                acc
            })
            .collect();

        let rate = self.rate.or(sc_ref.and_then(|s| s.rate));
        let sc_load = sc_ref.and_then(|s| s.load.clone());
        let streams = self.streams.unwrap_or(1);
        if streams == 0 {
            return Err(CliError::Usage(
                "--max-concurrent-streams must be at least 1".into(),
            ));
        }
        if streams > 1 && http3 {
            if sc_load.is_some() && rate.is_none() {
                return Err(CliError::Usage(
                    "--max-concurrent-streams needs a fixed -c (no ramp or stages)".into(),
                ));
            }
        } else if streams > 1 {
            if !http2 {
                return Err(CliError::Usage(
                    "--max-concurrent-streams is for --http2 and --http3".into(),
                ));
            }
            if sc_load.is_some() && rate.is_none() {
                return Err(CliError::Usage(
                    "--max-concurrent-streams needs a fixed -c (no ramp or stages)".into(),
                ));
            }
        }
        let concurrency = self
            .concurrency
            .or(sc_ref.and_then(|s| s.connections))
            .unwrap_or(match &sc_load {
                Some(l) if rate.is_none() => l.peak().min(1 << 20),
                _ => 1,
            })
            // h2load: -c connections, each with -m streams.
            .saturating_mul(u64::from(streams));
        let load = match (&sc_load, self.concurrency) {
            (Some(l), None) if rate.is_none() => l.clone(),
            _ => Load::Fixed(concurrency),
        };
        let per_client = sc_ref.and_then(|s| s.per_client);
        let first_delay = self.first_delay.or(sc_ref.and_then(|s| s.first_delay));
        let running_every = self.running_every.or(sc_ref.and_then(|s| s.running_every));
        if running_every == Some(0) {
            return Err(CliError::Usage(
                "--running-every must be at least 1 (responses)".into(),
            ));
        }
        if first_delay.is_some() && rate.is_some() {
            return Err(CliError::Usage(
                "a first-request delay is for the closed loop: with --rate requests go out on the schedule".into(),
            ));
        }
        let duration = self
            .duration
            .or(self.time_limit)
            .or(sc_ref.and_then(|s| s.duration))
            .or(load.stages_end());
        let mut limit = self.requests.or(sc_ref.and_then(|s| s.requests));
        let bounded = duration.is_some()
            || limit.is_some()
            || per_client.is_some() && load.final_total().is_some();
        if !bounded {
            if rate.is_some() || sc_ref.is_some() {
                return Err(CliError::Usage(
                    "this run has no end: give -n, -d/-t, or a duration in the scenario".into(),
                ));
            }
            limit = Some(1); // ab's default
        }
        if let (Some(n), None) = (limit, rate) {
            if matches!(load, Load::Fixed(_)) && n < concurrency {
                return Err(CliError::Usage(format!(
                    "-n {n} is smaller than -c {concurrency}: every client needs at least one request"
                )));
            }
        }
        let threads = self
            .threads
            .or(sc_ref.and_then(|s| s.threads))
            .unwrap_or(1)
            .max(1)
            .min(concurrency.clamp(1, 1024) as usize);
        Ok(Plan {
            target,
            requests,
            cumulative,
            groups,
            concurrency,
            threads,
            keep_alive,
            http10,
            http2,
            streams,
            http3,
            limit,
            duration,
            rate,
            timeout: self
                .timeout
                .or(sc_ref.and_then(|s| s.timeout))
                .unwrap_or(Duration::from_secs(30)),
            think: sc_ref.map_or(Think::None, |s| s.think),
            load,
            per_client,
            first_delay,
            running_every,
            abort: sc_ref.map_or(AbortRules::default(), |s| s.abort.clone()),
            seed: self.seed.or(sc_ref.and_then(|s| s.seed)).unwrap_or(1),
            variable_length: self.variable_length
                || sc_ref.and_then(|s| s.variable_length).unwrap_or(false),
            scenario_name: sc_ref.map(|s| s.name.clone()),
            corrected: self.corrected,
            thresholds: sc_ref
                .map(|s| s.thresholds.clone())
                .unwrap_or_default()
                .into_iter()
                .chain(self.thresholds.iter().cloned())
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> Result<Options, CliError> {
        Options::parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn ab_flags_bundle_and_take_attached_or_separate_values() {
        let o = parse(&[
            "-kc10",
            "-n",
            "1000",
            "-H",
            "X-A: 1",
            "-HX-B: 2",
            "http://h/",
        ])
        .unwrap();
        assert!(o.keep_alive);
        assert_eq!(o.concurrency, Some(10));
        assert_eq!(o.requests, Some(1000));
        assert_eq!(o.headers, vec!["X-A: 1", "X-B: 2"]);
        assert_eq!(o.url.as_deref(), Some("http://h/"));
        let o = parse(&[
            "-d",
            "10s",
            "--threads=2",
            "--latency",
            "-c",
            "60",
            "http://h/",
        ])
        .unwrap();
        assert_eq!(o.duration, Some(Duration::from_secs(10)));
        assert_eq!(o.threads, Some(2));
        assert!(o.wrk_style());
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        assert!(matches!(parse(&["-x"]), Err(CliError::Usage(_))));
        assert!(matches!(parse(&["-n"]), Err(CliError::Usage(_))));
        assert!(matches!(parse(&["-n", "ten"]), Err(CliError::Usage(_))));
        assert!(matches!(parse(&["--nope"]), Err(CliError::Usage(_))));
        assert!(matches!(
            parse(&["http://a/", "http://b/"]),
            Err(CliError::Usage(_))
        ));
    }

    #[test]
    fn fewer_requests_than_clients_is_refused() {
        let o = parse(&["-n", "5", "-c", "10", "http://127.0.0.1:1/"]).unwrap();
        match o.plan() {
            Err(CliError::Usage(m)) => assert!(m.contains("smaller than -c"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tls_flags_need_an_https_url_and_http2_offers_h2_by_alpn_with_keep_alive_implied() {
        // curl refuses nothing here, but a TLS flag on http:// is a typo
        // worth a usage error.
        match parse(&["--insecure", "http://127.0.0.1:1/"])
            .unwrap()
            .plan()
        {
            Err(CliError::Usage(m)) => assert!(m.contains("https://"), "{m}"),
            other => panic!("{other:?}"),
        }
        let p = parse(&["--http2", "--insecure", "https://127.0.0.1:1/x"])
            .unwrap()
            .plan()
            .unwrap();
        let tls = p.target.tls.as_ref().expect("TLS for https://");
        // RFC 9113 §3.2: "h2" by ALPN; h2load sends no http/1.1 fallback.
        assert_eq!(tls.config.alpn_protocols, vec![b"h2".to_vec()]);
        assert!(tls.insecure && !tls.resume);
        assert!(p.http2 && p.keep_alive);
        assert!(p.requests[0].h2.is_some());
        let p = parse(&["https://127.0.0.1:1/"]).unwrap().plan().unwrap();
        let tls = p.target.tls.as_ref().expect("TLS");
        assert_eq!(tls.config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(matches!(
            parse(&["--http2", "--http1.0", "http://127.0.0.1:1/"])
                .unwrap()
                .plan(),
            Err(CliError::Usage(_))
        ));
        assert!(matches!(
            parse(&["--cacert", "/nonexistent.pem", "https://127.0.0.1:1/"])
                .unwrap()
                .plan(),
            Err(CliError::Fatal(_))
        ));
    }

    #[test]
    fn cookies_and_basic_auth_become_headers() {
        let o = parse(&[
            "-C",
            "a=1",
            "-C",
            "b=2",
            "-A",
            "user:pass",
            "http://127.0.0.1:1/x",
        ])
        .unwrap();
        let p = o.plan().unwrap();
        let r = String::from_utf8(p.requests[0].bytes.clone()).unwrap();
        assert!(r.contains("Cookie: a=1; b=2\r\n"), "{r}");
        assert!(r.contains("Authorization: Basic dXNlcjpwYXNz\r\n"), "{r}");
        assert!(r.starts_with("GET /x HTTP/1.1\r\n"));
        assert_eq!(p.limit, Some(1));
    }

    #[test]
    fn http3_needs_an_https_url_offers_h3_by_alpn_and_takes_streams_per_connection() {
        // RFC 9114 §3.1: HTTP/3 is ALPN "h3" over QUIC, always TLS.
        match parse(&["--http3", "http://127.0.0.1:1/"]).unwrap().plan() {
            Err(CliError::Usage(m)) => assert!(m.contains("https://"), "{m}"),
            _ => panic!("--http3 with http:// accepted"),
        }
        match parse(&["--http3", "--http2", "https://127.0.0.1:1/"])
            .unwrap()
            .plan()
        {
            Err(CliError::Usage(m)) => assert!(m.contains("--http3"), "{m}"),
            _ => panic!("--http3 with --http2 accepted"),
        }
        let p = parse(&[
            "--h3",
            "--insecure",
            "-c",
            "2",
            "--streams",
            "10",
            "-n",
            "20",
            "https://127.0.0.1:1/x",
        ])
        .unwrap()
        .plan()
        .unwrap();
        let tls = p.target.tls.as_ref().expect("TLS for https://");
        assert_eq!(tls.config.alpn_protocols, vec![b"h3".to_vec()]);
        assert!(p.target.quic.is_some());
        assert!(p.http3 && p.keep_alive && !p.http2);
        assert_eq!((p.concurrency, p.streams), (20, 10));
        assert!(p.requests[0].h3.is_some());
        assert!(p.requests[0].h2.is_none());
    }
}
