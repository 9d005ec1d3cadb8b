//! The run's summary (what the text, JSON and HTML reports show) and its
//! construction from the merged record and the timeline.

pub mod compare;
pub mod html;
pub mod text;

use crate::record::{Errors, Moments, Phases, Record};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Settings of the run, as given.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Settings {
    pub concurrency: u64,
    pub threads: usize,
    pub keep_alive: bool,
    pub http_version: String,
    pub open_loop: bool,
    pub rate: Option<f64>,
    pub duration_s: Option<f64>,
    pub requests_limit: Option<u64>,
    pub timeout_s: f64,
    pub seed: u64,
    pub scenario: Option<String>,
    /// The number of clients varies over the run (a ramp, stages, request
    /// quotas) or they think between requests: `concurrency` is then only
    /// the configured maximum, and `active_peak`/`active_mean` say what
    /// happened.
    #[serde(default)]
    pub varying_clients: bool,
    /// Closed loop: the delay before each client's first request, `[min,
    /// max]` seconds (equal for a fixed delay); null without one.
    #[serde(default)]
    pub first_delay_s: Option<(f64, f64)>,
    /// HTTP/2: requests in flight per connection (`concurrency` is
    /// connections x streams); 1 otherwise.
    #[serde(default)]
    pub streams: u32,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct Bytes {
    /// Every byte received (heads, bodies, chunk framing).
    pub received: u64,
    /// Decoded body bytes of complete responses.
    pub body: u64,
    /// Every byte of request sent.
    pub sent: u64,
    /// Request body bytes sent.
    pub body_sent: u64,
}

/// Latency of complete responses, milliseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct LatencyMs {
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    /// Absent from files written before it was added (read as 0).
    #[serde(default)]
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// One row of ab's "Connection Times", milliseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct PhaseMs {
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
    pub median: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct ConnectionTimes {
    pub connect: PhaseMs,
    pub processing: PhaseMs,
    pub waiting: PhaseMs,
    pub total: PhaseMs,
}

/// Percentiles of one phase of the requests, milliseconds, over the `n`
/// requests that had it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct PhaseStats {
    pub n: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// Where a request's time went (`phases_ms`): `connect` and `tls` over
/// the requests that opened their own connection (a reused one has
/// neither: h2load's "time for connect" is per connection too);
/// `first_byte` (request written to the first byte of the response) and
/// `transfer` (first byte to last) over the complete responses.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct RequestPhases {
    pub connect: Option<PhaseStats>,
    pub tls: Option<PhaseStats>,
    pub first_byte: Option<PhaseStats>,
    pub transfer: Option<PhaseStats>,
    /// Request written to the last byte (first byte plus transfer of each
    /// request): h2load's "time for request".
    #[serde(default)]
    pub request: Option<PhaseStats>,
    /// connect() to the connection ready (TCP, then TLS): h2load's "time
    /// for connect". Run-wide only.
    #[serde(default)]
    pub connection: Option<PhaseStats>,
    /// connect() to the first byte of the connection's first response:
    /// h2load's "time to 1st byte". Run-wide only.
    #[serde(default)]
    pub connection_first_byte: Option<PhaseStats>,
}

/// The TLS side of an `https://` run.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct TlsStats {
    /// Version, cipher suite and ALPN protocol of the first handshake.
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub alpn: Option<String>,
    /// Handshakes completed, those that resumed a session, and
    /// handshakes per second of the run.
    pub handshakes: u64,
    pub resumed: u64,
    pub handshakes_per_second: f64,
    /// `--insecure`: the certificate was not checked.
    pub insecure: bool,
    /// `--tls-resume`: sessions were offered for resumption.
    pub resumption: bool,
    /// The first handshake failure, if any.
    pub error: Option<String>,
}

fn phase_stats(p: &Phases) -> Option<PhaseStats> {
    (p.m.n > 0).then(|| PhaseStats {
        n: p.m.n,
        mean: ms(p.m.mean()),
        p50: ms(p.at(50.0) as f64),
        p90: ms(p.at(90.0) as f64),
        p99: ms(p.at(99.0) as f64),
        max: ms(p.m.max as f64),
    })
}

/// The request phases of a merged record.
pub fn phases_of(r: &Record) -> Option<RequestPhases> {
    let p = RequestPhases {
        connect: phase_stats(&r.tcp_connect),
        tls: phase_stats(&r.tls),
        first_byte: phase_stats(&r.waiting),
        transfer: phase_stats(&r.transfer),
        request: phase_stats(&r.request),
        connection: phase_stats(&r.connection),
        connection_first_byte: phase_stats(&r.connection_first_byte),
    };
    (p != RequestPhases::default()).then_some(p)
}

/// The phases of one group of the mix.
fn url_phases_of(u: &crate::record::UrlPhases) -> Option<RequestPhases> {
    let p = RequestPhases {
        connect: phase_stats(&u.connect.lat),
        tls: phase_stats(&u.tls.lat),
        first_byte: phase_stats(&u.first_byte.lat),
        transfer: phase_stats(&u.transfer.lat),
        request: phase_stats(&u.request.lat),
        connection: None,
        connection_first_byte: None,
    };
    (p != RequestPhases::default()).then_some(p)
}

/// One second of the run (all threads).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Second {
    /// Start of the second, seconds from the start of the run.
    pub t: f64,
    /// Length (1 but for the last, partial one).
    pub length_s: f64,
    pub responses: u64,
    pub errors: u64,
    pub bytes: u64,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Clients running (closed loop) or requests in flight (open loop),
    /// averaged over the second.
    pub active: f64,
    /// Mean and standard deviation of every response time so far.
    pub running_mean_ms: f64,
    pub running_stddev_ms: f64,
    /// Complete responses in this second by status code.
    #[serde(default)]
    pub status: BTreeMap<String, u64>,
}

/// One group of the mix (a `[[mix]]` entry, a `[tree]` size class).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct UrlStats {
    /// "METHOD /path" of a mix entry, or "/prefix/ class K files".
    pub name: String,
    pub requests: u64,
    pub responses: u64,
    pub errors: u64,
    /// Bytes received for its complete responses.
    pub bytes: u64,
    pub mean_ms: Option<f64>,
    pub stddev_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    #[serde(default)]
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    #[serde(default)]
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Its requests' phases, as the run's `phases_ms` (without the
    /// connection-wide spans).
    #[serde(default)]
    pub phases_ms: Option<RequestPhases>,
}

/// A point of the running mean and deviation per response (BENCH4).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct RunningPoint {
    /// Responses so far (over all threads, in the order they completed).
    pub n: u64,
    /// When the n-th completed, seconds from the start.
    pub t: f64,
    pub mean_ms: f64,
    pub stddev_ms: f64,
}

/// The requests started with `active` clients running, each request's
/// client counting itself (closed loop, when the clients vary).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Level {
    pub active: u64,
    /// Seconds the run spent with exactly `active` clients running.
    pub time_s: Option<f64>,
    /// Requests started at this level that ended (responses + failures).
    pub requests: u64,
    pub responses: u64,
    pub errors: u64,
    /// responses / time_s; null when the run spent no measurable time
    /// (under 1 ms) at the level.
    pub rps: Option<f64>,
    pub mean_ms: Option<f64>,
    pub stddev_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Abort {
    pub reason: String,
    pub at_s: f64,
    pub active_clients: u64,
}

/// Mean, standard deviation, max and share within one deviation of a
/// series (wrk's "Thread Stats" columns).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub stddev: f64,
    pub max: f64,
    pub within_stddev_pct: f64,
}

/// Everything a report shows; also the `--json` document.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Summary {
    pub tool: String,
    pub version: String,
    /// `--name`: the run's name, by which `compare` groups repeated runs;
    /// null without one.
    #[serde(default)]
    pub name: Option<String>,
    pub url: String,
    pub host: String,
    pub port: u16,
    pub path: String,
    pub server_software: Option<String>,
    /// Body length of the first response (ab's Document Length).
    pub document_length: Option<u64>,
    pub settings: Settings,
    /// Requests that ended: complete responses plus failures without one.
    pub requests: u64,
    /// Complete responses (any status).
    pub responses: u64,
    pub duration_s: f64,
    /// Successful responses: complete responses that are not failures (any
    /// status; only a length-differs response is complete and failed).
    #[serde(default)]
    pub successful: u64,
    /// Successful responses per second (failures are not in it).
    pub requests_per_second: f64,
    /// Failed requests (`failed`) per second.
    #[serde(default)]
    pub failures_per_second: f64,
    pub bytes: Bytes,
    /// Complete responses by status code ("other" for codes outside
    /// 100..=599).
    pub status: BTreeMap<String, u64>,
    pub non_2xx: u64,
    /// Failed requests: the sum of `errors`.
    pub failed: u64,
    pub errors: Errors,
    pub in_flight_at_end: u64,
    pub not_sent: u64,
    pub keep_alive_requests: u64,
    pub connections: u64,
    pub retries: u64,
    /// Most clients running at once (closed loop; thinking clients count)
    /// or requests in flight at once (open loop).
    #[serde(default)]
    pub active_peak: u64,
    /// The same, averaged over the run time.
    #[serde(default)]
    pub active_mean: f64,
    /// Mean time per request: the mean latency of complete responses, ms;
    /// null when there is none.
    #[serde(default)]
    pub time_per_request_ms: Option<f64>,
    /// Null when no response completed (there is no sample to show).
    #[serde(default)]
    pub latency_ms: Option<LatencyMs>,
    /// Which latency `latency_ms` and `percentiles_ms` are: "sent" (closed
    /// loop: from each request's actual send time) or "intended" (open
    /// loop: from each request's intended send time).
    #[serde(default)]
    pub latency_view: String,
    /// `--corrected` (closed loop): the latency corrected for coordinated
    /// omission; null otherwise.
    #[serde(default)]
    pub corrected_latency_ms: Option<LatencyMs>,
    /// Its spectrum: (percentile, milliseconds) pairs.
    #[serde(default)]
    pub corrected_percentiles_ms: Vec<(f64, f64)>,
    /// Null when no response completed.
    #[serde(default)]
    pub connection_times_ms: Option<ConnectionTimes>,
    /// The latency spectrum: (percentile, milliseconds) pairs.
    pub percentiles_ms: Vec<(f64, f64)>,
    /// wrk's per-thread requests per second (from the timeline).
    pub thread_rps: Spread,
    /// Share of latencies within one standard deviation of the mean, %;
    /// null when no response completed.
    #[serde(default)]
    pub latency_within_stddev_pct: Option<f64>,
    pub timeline: Vec<Second>,
    /// Latency by level of activity (BENCH2, WebBench): one entry per
    /// number of active clients at which requests started.
    #[serde(default)]
    pub levels: Vec<Level>,
    /// With `running_every` N: the mean and deviation of every response so
    /// far, after every N responses (and after the last); empty otherwise.
    #[serde(default)]
    pub running: Vec<RunningPoint>,
    /// The per-URL breakdown: one entry per group of the mix, when there
    /// is more than one.
    #[serde(default)]
    pub urls: Vec<UrlStats>,
    /// The latency histogram: `[low_ms, high_ms, count]` bins, spaced
    /// evenly on a log scale from the minimum to the maximum.
    #[serde(default)]
    pub latency_histogram: Vec<(f64, f64, u64)>,
    /// The command line, as given (arguments joined, quoted for a shell
    /// where needed); null when unknown.
    #[serde(default)]
    pub command_line: Option<String>,
    /// When the run started, UTC, RFC 3339.
    #[serde(default)]
    pub start_time: Option<String>,
    pub abort: Option<Abort>,
    /// The run was stopped by Ctrl-C (SIGINT): the figures cover it up to
    /// then.
    #[serde(default)]
    pub interrupted: bool,
    /// `--threshold`s, each checked against the run; `[]` without any.
    #[serde(default)]
    pub thresholds: Vec<crate::threshold::Checked>,
    /// The per-request log (`--log`), if written.
    #[serde(default)]
    pub request_log: Option<String>,
    /// Why writing the log failed (the run went on without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_log_error: Option<String>,
    /// HTTP/3: the first stream reset or connection error after the
    /// handshake, with its HTTP/3 or QUIC code (the counts are in
    /// `errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_error: Option<String>,
    /// The phases of the requests (connect, TLS, first byte, transfer);
    /// null when no request had any.
    #[serde(default)]
    pub phases_ms: Option<RequestPhases>,
    /// `https://`: the handshakes and what they negotiated; null over
    /// plain TCP.
    #[serde(default)]
    pub tls: Option<TlsStats>,
    /// HTTP/2: the server's SETTINGS_MAX_CONCURRENT_STREAMS (the lowest it
    /// announced) when it was below the streams asked for per connection:
    /// no more were open at once, the rest waited. Null otherwise.
    #[serde(default)]
    pub streams_limited_to: Option<u64>,
    /// For the HTML report: (start s, latency ms, failed) of every request
    /// of the log, or a sample of them; not in the JSON.
    #[serde(skip)]
    pub scatter: Vec<(f64, f64, bool)>,
    /// The run's name in a comparison (its file's, made distinct); not in
    /// the JSON.
    #[serde(skip)]
    pub label: String,
}

impl Summary {
    /// Successful responses per second, recomputed from the counts (so
    /// that JSON files written before the rate excluded failures compare
    /// right too).
    pub fn success_rate(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.responses.saturating_sub(self.errors.length_mismatch) as f64 / self.duration_s
        } else {
            0.0
        }
    }

    /// Failed requests per second.
    pub fn failure_rate(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.failed as f64 / self.duration_s
        } else {
            0.0
        }
    }
}

pub fn ms(us: f64) -> f64 {
    us / 1000.0
}

fn phase_ms(p: &Phases) -> PhaseMs {
    let m = &p.m;
    PhaseMs {
        min: ms(m.min as f64),
        mean: ms(m.mean()),
        stddev: ms(m.stddev()),
        median: ms(p.at(50.0) as f64),
        max: ms(m.max as f64),
    }
}

/// The percentiles the spectrum plot and the JSON carry.
pub const SPECTRUM: &[f64] = &[
    0.0, 10.0, 20.0, 25.0, 30.0, 40.0, 50.0, 55.0, 60.0, 65.0, 66.0, 70.0, 75.0, 77.5, 80.0, 82.5,
    85.0, 87.5, 88.75, 90.0, 91.25, 92.5, 93.75, 94.375, 95.0, 95.625, 96.25, 96.875, 97.1875,
    97.5, 97.8125, 98.0, 98.125, 98.4375, 98.75, 99.0, 99.2188, 99.375, 99.5, 99.6094, 99.6875,
    99.75, 99.8047, 99.8438, 99.9, 99.9219, 99.95, 99.99, 99.999, 100.0,
];

/// Builds the latency part of a summary from the merged record.
fn latency_of(l: &Phases) -> LatencyMs {
    let m = &l.m;
    LatencyMs {
        min: ms(m.min as f64),
        mean: ms(m.mean()),
        stddev: ms(m.stddev()),
        p50: ms(l.at(50.0) as f64),
        p90: ms(l.at(90.0) as f64),
        p95: ms(l.at(95.0) as f64),
        p99: ms(l.at(99.0) as f64),
        p999: ms(l.at(99.9) as f64),
        max: ms(m.max as f64),
    }
}

fn spectrum_of(l: &Phases) -> Vec<(f64, f64)> {
    if l.m.n == 0 {
        Vec::new()
    } else {
        SPECTRUM.iter().map(|&p| (p, ms(l.at(p) as f64))).collect()
    }
}

pub fn fill_latency(s: &mut Summary, r: &Record) {
    let l = &r.latency;
    let m = &l.m;
    if m.n == 0 {
        // No sample: every latency figure is absent, not zero.
        s.latency_ms = None;
        s.connection_times_ms = None;
        s.latency_within_stddev_pct = None;
        s.percentiles_ms = Vec::new();
    } else {
        s.latency_ms = Some(latency_of(l));
        s.connection_times_ms = Some(ConnectionTimes {
            connect: phase_ms(&r.connect),
            processing: phase_ms(&r.processing),
            waiting: phase_ms(&r.waiting),
            total: phase_ms(r.total()),
        });
        s.percentiles_ms = spectrum_of(l);
        s.latency_within_stddev_pct = Some(within_stddev_pct(l));
    }
    s.latency_histogram = histogram_of(l);
    s.latency_view = if r.total.is_some() {
        "intended"
    } else {
        "sent"
    }
    .into();
    let corrected = r.corrected.as_ref().filter(|c| c.m.n > 0);
    s.corrected_latency_ms = corrected.map(latency_of);
    s.corrected_percentiles_ms = corrected.map(spectrum_of).unwrap_or_default();
}

/// The per-URL breakdown from the merged record (none for a single
/// request).
pub fn urls_of(r: &Record, names: &[String]) -> Vec<UrlStats> {
    if names.len() < 2 {
        return Vec::new();
    }
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let g = r.urls.0.get(i).cloned().unwrap_or_default();
            let m = &g.lat.m;
            let some = |v: f64| (m.n > 0).then_some(v);
            UrlStats {
                name: name.clone(),
                requests: g.requests(),
                responses: m.n,
                errors: g.errors,
                bytes: g.bytes,
                mean_ms: some(ms(m.mean())),
                stddev_ms: some(ms(m.stddev())),
                p50_ms: some(ms(g.lat.at(50.0) as f64)),
                p90_ms: some(ms(g.lat.at(90.0) as f64)),
                p95_ms: some(ms(g.lat.at(95.0) as f64)),
                p99_ms: some(ms(g.lat.at(99.0) as f64)),
                p999_ms: some(ms(g.lat.at(99.9) as f64)),
                max_ms: some(ms(m.max as f64)),
                phases_ms: r.url_phases.get(i).and_then(url_phases_of),
            }
        })
        .collect()
}

/// Bins of the latency histogram.
const HIST_BINS: usize = 40;

/// The latency histogram, `HIST_BINS` bins evenly spaced on a log scale
/// from the minimum to the maximum (one bin when they are within 1%).
fn histogram_of(l: &Phases) -> Vec<(f64, f64, u64)> {
    let m = &l.m;
    if m.n == 0 {
        return Vec::new();
    }
    let (lo, hi) = (m.min.max(1) as f64, m.max.max(1) as f64);
    if hi <= lo * 1.01 {
        return vec![(ms(m.min as f64), ms(m.max as f64), m.n)];
    }
    let span = (hi / lo).ln();
    let mut counts = vec![0u64; HIST_BINS];
    for v in l.hist.iter_recorded() {
        // The bucket's middle value, kept in [min, max].
        let x = (l.hist.median_equivalent(v.value_iterated_to()) as f64).clamp(lo, hi);
        let i = ((x / lo).ln() / span * HIST_BINS as f64) as usize;
        counts[i.min(HIST_BINS - 1)] += v.count_at_value();
    }
    let edge = |i: usize| ms(lo * (span * i as f64 / HIST_BINS as f64).exp());
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| (edge(i), edge(i + 1), c))
        .collect()
}

/// The per-level table from the merged record and, in the closed loop, the
/// time spent at each level.
pub fn levels_of(r: &Record, secs: Option<&[f64]>) -> Vec<Level> {
    let mut out = Vec::new();
    let n = r.levels.0.len().max(secs.map_or(0, |s| s.len()));
    for i in 0..n {
        let g = r.levels.0.get(i);
        let time_s = secs.map(|s| s.get(i).copied().unwrap_or(0.0));
        let requests = g.map_or(0, |g| g.requests());
        // Level 0 is the time before the first client and after the last:
        // no request starts there.
        if requests == 0 {
            continue;
        }
        let Some(g) = g else { continue };
        let m = &g.lat.m;
        let some = |v: f64| (m.n > 0).then_some(v);
        out.push(Level {
            active: i as u64,
            time_s,
            requests,
            responses: m.n,
            errors: g.errors,
            rps: time_s.filter(|&t| t > 1e-3).map(|t| m.n as f64 / t),
            mean_ms: some(ms(m.mean())),
            stddev_ms: some(ms(m.stddev())),
            p50_ms: some(ms(g.lat.at(50.0) as f64)),
            p90_ms: some(ms(g.lat.at(90.0) as f64)),
            p99_ms: some(ms(g.lat.at(99.0) as f64)),
            max_ms: some(ms(m.max as f64)),
        });
    }
    out
}

/// Share of the latencies within one standard deviation of the mean, %.
fn within_stddev_pct(l: &Phases) -> f64 {
    let m = &l.m;
    // The mean and deviation are exact (from the sums); the values
    // themselves are only known to the histogram's resolution (0.1%):
    // a bucket counts when its range of values meets [mean - sd,
    // mean + sd]. (Comparing each bucket's upper end with the bounds
    // would put a constant 10 ms, whose bucket is 10000-10007 us,
    // outside its own zero-width interval.)
    let lo = (m.mean() - m.stddev()).max(0.0).floor() as u64;
    let hi = (m.mean() + m.stddev()).ceil() as u64;
    let within: u64 = l
        .hist
        .iter_recorded()
        .filter(|v| {
            let x = v.value_iterated_to();
            l.hist.lowest_equivalent(x) <= hi && l.hist.highest_equivalent(x) >= lo
        })
        .map(|v| v.count_at_value())
        .sum();
    100.0 * within as f64 / l.hist.len().max(1) as f64
}

/// Mean/deviation/max of a series, with the share within one deviation.
pub fn spread(xs: &[f64]) -> Spread {
    if xs.is_empty() {
        return Spread::default();
    }
    let mut m = Moments::default();
    // Moments counts integers; scale to keep three decimals.
    for &x in xs {
        m.add((x * 1000.0).round() as u64);
    }
    let mean = m.mean() / 1000.0;
    let sd = m.stddev() / 1000.0;
    let within = xs.iter().filter(|&&x| (x - mean).abs() <= sd).count();
    Spread {
        mean,
        stddev: sd,
        max: m.max as f64 / 1000.0,
        within_stddev_pct: 100.0 * within as f64 / xs.len() as f64,
    }
}

/// Status counts keyed by code.
pub fn status_map(counts: &[u64]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (code, &n) in counts.iter().enumerate() {
        if n > 0 {
            let k = if code == 0 {
                "other".to_string()
            } else {
                code.to_string()
            };
            m.insert(k, n);
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_latency_has_every_value_within_one_standard_deviation() {
        for us in [900, 10_000, 123_456, 2_000_000] {
            let mut r = Record::default();
            for _ in 0..50 {
                r.latency.add(us);
            }
            let mut s = Summary::default();
            fill_latency(&mut s, &r);
            assert_eq!(s.latency_within_stddev_pct, Some(100.0), "{us} us");
        }
    }
}
