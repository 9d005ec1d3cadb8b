//! Recording: what each worker thread counts and measures, merged at the end.
//!
//! Memory does not grow with the number of requests: latencies go into
//! HdrHistograms (fixed size, 3 significant digits from 1 µs to 1 h) and
//! exact running moments (Welford), and the per-second timeline holds one
//! small entry per second.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency a histogram holds, in microseconds (one hour); larger
/// values are clamped to it (and the exact maximum is kept aside).
pub const HIST_MAX_US: u64 = 3_600_000_000;

/// A fresh latency histogram in microseconds.
pub fn new_hist() -> Histogram<u64> {
    // Fixed, valid bounds: construction cannot fail.
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("valid histogram bounds")
}

/// Exact count, sum, sum of squares, min and max of a series of
/// microsecond values. Integer sums make merging across threads and
/// intervals exact; mean and variance are derived when read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    pub n: u64,
    pub sum: u128,
    pub sumsq: u128,
    pub min: u64,
    pub max: u64,
}

impl Moments {
    #[inline]
    pub fn add(&mut self, x: u64) {
        if self.n == 0 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        self.n += 1;
        let x = u128::from(x);
        self.sum += x;
        self.sumsq += x * x;
    }

    pub fn merge(&mut self, o: &Moments) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.sumsq += o.sumsq;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// Sample standard deviation (n - 1), as ab prints it.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        // n * sumsq - sum^2 is exact in integers (and never negative); past
        // u128 (hour-long latencies times billions of requests) use floats.
        let n = u128::from(self.n);
        let var = match (n.checked_mul(self.sumsq), self.sum.checked_mul(self.sum)) {
            (Some(a), Some(b)) => {
                a.saturating_sub(b) as f64 / (self.n as f64 * (self.n - 1) as f64)
            }
            _ => {
                let (nf, s) = (self.n as f64, self.sum as f64);
                ((self.sumsq as f64 - s * s / nf) / (nf - 1.0)).max(0.0)
            }
        };
        var.sqrt()
    }
}

/// Failed requests by kind. Every request ends in exactly one outcome: a
/// complete response (possibly also counted in `length_mismatch`) or one of
/// the other fields here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Errors {
    /// connect() refused (RST to the SYN: nothing listens).
    pub connect_refused: u64,
    /// Any other connect() failure (unreachable, no ports left ...), and a
    /// connect still pending at the per-request timeout (a dropped SYN).
    pub connect: u64,
    /// Connection reset or broken while sending or receiving.
    pub reset: u64,
    /// Closed by the server before any byte of the response (on a fresh
    /// connection; on a reused one the request is retried once instead).
    pub closed: u64,
    /// No complete response within the per-request timeout.
    pub timeout: u64,
    /// The connection ended before the body the head announced was complete
    /// (wrong Content-Length, truncated chunked body) or inside the head.
    pub short_body: u64,
    /// Not an HTTP/1.x response, bad framing or bad chunk syntax.
    pub malformed: u64,
    /// The TLS handshake failed (a refused certificate, no common
    /// protocol) or a TLS record was bad.
    #[serde(default)]
    pub tls: u64,
    /// A complete response whose body length differs from the first
    /// response's (ApacheBench's "Length" failure; off with `-l`).
    pub length_mismatch: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.connect_refused
            + self.connect
            + self.reset
            + self.closed
            + self.timeout
            + self.short_body
            + self.malformed
            + self.tls
            + self.length_mismatch
    }

    /// Failures that ended a request without a complete response.
    pub fn without_response(&self) -> u64 {
        self.total() - self.length_mismatch
    }

    pub fn merge(&mut self, o: &Errors) {
        self.connect_refused += o.connect_refused;
        self.connect += o.connect;
        self.reset += o.reset;
        self.closed += o.closed;
        self.timeout += o.timeout;
        self.short_body += o.short_body;
        self.malformed += o.malformed;
        self.tls += o.tls;
        self.length_mismatch += o.length_mismatch;
    }
}

/// How a request ended without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    ConnectRefused,
    Connect,
    Reset,
    Closed,
    Timeout,
    ShortBody,
    Malformed,
    Tls,
}

impl Failure {
    /// The name of its `errors.*` count (and its status in the request
    /// log).
    pub fn name(self) -> &'static str {
        match self {
            Failure::ConnectRefused => "connect_refused",
            Failure::Connect => "connect",
            Failure::Reset => "reset",
            Failure::Closed => "closed",
            Failure::Timeout => "timeout",
            Failure::ShortBody => "short_body",
            Failure::Malformed => "malformed",
            Failure::Tls => "tls",
        }
    }
}

/// Counters of one thread (and, merged, of the run).
#[derive(Debug, Clone)]
pub struct Counters {
    /// Complete responses (any status).
    pub responses: u64,
    /// Responses by status code; index 0 holds codes outside 100..=599.
    pub status: Vec<u64>,
    pub errors: Errors,
    /// Responses after which the connection was kept for another request.
    pub keep_alive: u64,
    /// Every byte read from the server (heads, bodies, framing).
    pub bytes_read: u64,
    /// Decoded body bytes of complete responses.
    pub body_bytes: u64,
    /// Every byte of request written.
    pub bytes_sent: u64,
    /// Request body bytes written (POST).
    pub body_sent: u64,
    /// TCP connections opened (attempted).
    pub connections: u64,
    /// Requests re-sent once because a kept-alive connection was closed by
    /// the server before any byte of the response (RFC 9112 §9.3.1).
    pub retries: u64,
    /// Requests sent (at least partly) without a complete response when the
    /// run ended.
    pub in_flight_at_end: u64,
    /// Open loop: requests due by the schedule that never went out because
    /// every connection was busy when the run ended.
    pub not_sent: u64,
    /// TLS handshakes completed, and how many of them resumed a session.
    pub tls_handshakes: u64,
    pub tls_resumed: u64,
    /// HTTP/2: the lowest SETTINGS_MAX_CONCURRENT_STREAMS a server
    /// announced when it was below the streams asked for per connection
    /// (`u64::MAX`: never).
    pub server_max_streams: u64,
    /// Time integral of the clients running (closed loop) or requests in
    /// flight (open loop), in client-seconds: divided by the run time, the
    /// mean number active.
    pub active_area: f64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            responses: 0,
            status: vec![0; 600],
            errors: Errors::default(),
            keep_alive: 0,
            bytes_read: 0,
            body_bytes: 0,
            bytes_sent: 0,
            body_sent: 0,
            connections: 0,
            retries: 0,
            in_flight_at_end: 0,
            not_sent: 0,
            tls_handshakes: 0,
            tls_resumed: 0,
            server_max_streams: u64::MAX,
            active_area: 0.0,
        }
    }
}

impl Counters {
    #[inline]
    pub fn count_status(&mut self, status: u16) {
        let i = if (100..600).contains(&status) {
            status as usize
        } else {
            0
        };
        self.status[i] += 1;
    }

    pub fn fail(&mut self, f: Failure) {
        let e = &mut self.errors;
        match f {
            Failure::ConnectRefused => e.connect_refused += 1,
            Failure::Connect => e.connect += 1,
            Failure::Reset => e.reset += 1,
            Failure::Closed => e.closed += 1,
            Failure::Timeout => e.timeout += 1,
            Failure::ShortBody => e.short_body += 1,
            Failure::Malformed => e.malformed += 1,
            Failure::Tls => e.tls += 1,
        }
    }

    /// Requests that ended (responses plus failures without a response).
    pub fn finished(&self) -> u64 {
        self.responses + self.errors.without_response()
    }

    /// Complete responses with a status outside 200..=299.
    pub fn non_2xx(&self) -> u64 {
        self.responses - self.status[200..300].iter().sum::<u64>()
    }

    pub fn merge(&mut self, o: &Counters) {
        self.responses += o.responses;
        for (a, b) in self.status.iter_mut().zip(&o.status) {
            *a += b;
        }
        self.errors.merge(&o.errors);
        self.keep_alive += o.keep_alive;
        self.bytes_read += o.bytes_read;
        self.body_bytes += o.body_bytes;
        self.bytes_sent += o.bytes_sent;
        self.body_sent += o.body_sent;
        self.connections += o.connections;
        self.retries += o.retries;
        self.in_flight_at_end += o.in_flight_at_end;
        self.not_sent += o.not_sent;
        self.tls_handshakes += o.tls_handshakes;
        self.tls_resumed += o.tls_resumed;
        self.server_max_streams = self.server_max_streams.min(o.server_max_streams);
        self.active_area += o.active_area;
    }
}

/// ApacheBench's four phases of a request, in microseconds.
#[derive(Debug, Clone)]
pub struct Phases {
    pub hist: Histogram<u64>,
    pub m: Moments,
}

impl Default for Phases {
    fn default() -> Self {
        Phases {
            hist: new_hist(),
            m: Moments::default(),
        }
    }
}

impl Phases {
    #[inline]
    pub fn add(&mut self, us: u64) {
        self.hist.saturating_record(us.max(1));
        self.m.add(us);
    }

    pub fn merge(&mut self, o: &Phases) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.hist.add(&o.hist);
        self.m.merge(&o.m);
    }

    /// Value at percentile `p` (0..=100), kept inside the exact [min, max]
    /// so that a report never shows a median outside its own range.
    pub fn at(&self, p: f64) -> u64 {
        if self.m.n == 0 {
            return 0;
        }
        if p >= 100.0 {
            return self.m.max;
        }
        self.hist
            .value_at_percentile(p)
            .clamp(self.m.min, self.m.max)
    }
}

/// The requests of one slice of a run (one level of active clients, one
/// URL of the mix): their latencies and how many failed.
///
/// Its histogram has 2 significant digits and grows with the largest
/// value recorded (an auto-resizing HdrHistogram starts at a few KB), so a
/// run with hundreds of levels or URLs stays small; the mean, deviation,
/// minimum and maximum are exact.
#[derive(Debug, Clone)]
pub struct Group {
    pub lat: Phases,
    /// Failed requests (no complete response).
    pub errors: u64,
    /// Bytes received for the complete responses.
    pub bytes: u64,
}

impl Default for Group {
    fn default() -> Self {
        Group {
            lat: Phases {
                hist: Histogram::new(2).expect("valid histogram precision"),
                m: Moments::default(),
            },
            errors: 0,
            bytes: 0,
        }
    }
}

impl Group {
    #[inline]
    pub fn add(&mut self, us: u64, bytes: u64) {
        // `record`, not `saturating_record`: the latter never resizes, so
        // an auto-resizing histogram (which starts at 255 us) put every
        // slower response at its top and p50 = p90 = p99 = the minimum.
        // Clamped first: the histogram grows to any value it is given.
        let v = us.clamp(1, HIST_MAX_US);
        if self.lat.hist.record(v).is_err() {
            // Growing failed (a counts array past usize): keep the count.
            self.lat.hist.saturating_record(v);
        }
        self.lat.m.add(us);
        self.bytes += bytes;
    }

    pub fn merge(&mut self, o: &Group) {
        let _ = self.lat.hist.add(&o.lat.hist);
        self.lat.m.merge(&o.lat.m);
        self.errors += o.errors;
        self.bytes += o.bytes;
    }

    pub fn requests(&self) -> u64 {
        self.lat.m.n + self.errors
    }
}

/// Groups indexed by a small number (an active level, a URL's group),
/// grown on demand.
#[derive(Debug, Clone, Default)]
pub struct Groups(pub Vec<Group>);

impl Groups {
    #[inline]
    pub fn at(&mut self, i: usize) -> &mut Group {
        if i >= self.0.len() {
            self.0.resize_with(i + 1, Group::default);
        }
        &mut self.0[i]
    }

    pub fn merge(&mut self, o: &Groups) {
        for (i, g) in o.0.iter().enumerate() {
            if g.requests() > 0 {
                self.at(i).merge(g);
            }
        }
    }
}

/// The phases of one URL's requests (`urls[].phases_ms`), in the small
/// auto-resizing histograms of [`Group`] (a mix may have hundreds of
/// URLs): the same spans as the run's [`Record`] fields of those names.
#[derive(Debug, Clone, Default)]
pub struct UrlPhases {
    pub connect: Group,
    pub tls: Group,
    pub first_byte: Group,
    pub transfer: Group,
    pub request: Group,
}

impl UrlPhases {
    pub fn merge(&mut self, o: &UrlPhases) {
        self.connect.merge(&o.connect);
        self.tls.merge(&o.tls);
        self.first_byte.merge(&o.first_byte);
        self.transfer.merge(&o.transfer);
        self.request.merge(&o.request);
    }
}

/// Everything one worker thread measured.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub counters: Counters,
    /// Latency of complete responses: from the request's start (closed
    /// loop) or its intended send time (open loop) to the last byte.
    pub latency: Phases,
    /// ab's "Connect": connection start to established (0 when reused).
    pub connect: Phases,
    /// ab's "Processing": connection established to the last byte.
    pub processing: Phases,
    /// ab's "Waiting": request written to the first byte of the response.
    pub waiting: Phases,
    /// ab's "Total": request start to the last byte. In the closed loop it
    /// equals `latency` and is not recorded twice.
    pub total: Option<Phases>,
    /// The phases of a request (`phases_ms`): the TCP connect and the TLS
    /// handshake of the requests that opened a connection (a reused one
    /// has neither), and for complete responses the transfer, first byte
    /// to last (the first byte is `waiting`).
    pub tcp_connect: Phases,
    pub tls: Phases,
    pub transfer: Phases,
    /// The spans h2load reports (its `h2load.cc`): `request`, the request
    /// written (HTTP/2: its HEADERS frame queued for the socket) to the
    /// last byte of the response, h2load's "time for request";
    /// `connection`, connect() to the connection ready for requests (TCP,
    /// and the TLS handshake over TLS), its "time for connect"; and
    /// `connection_first_byte`, connect() to the first byte of the first
    /// response on the connection, its "time to 1st byte". The last two
    /// are over the requests that opened a connection.
    pub request: Phases,
    pub connection: Phases,
    pub connection_first_byte: Phases,
    /// `--corrected` (closed loop): every latency, plus the latencies of
    /// the requests each client would have sent during a slow response at
    /// its observed rate (HdrHistogram's "expected interval" correction).
    pub corrected: Option<Phases>,
    /// Requests by the number of clients running when each started, this
    /// one included (closed loop, when the clients vary).
    pub levels: Groups,
    /// Requests by group of the mix (a `[[mix]]` entry, a `[tree]` size
    /// class), when there is more than one.
    pub urls: Groups,
    /// The phases by group of the mix (as `urls`).
    pub url_phases: Vec<UrlPhases>,
}

impl Record {
    /// The phases of group `i` of the mix.
    #[inline]
    pub fn url_phases(&mut self, i: usize) -> &mut UrlPhases {
        if i >= self.url_phases.len() {
            self.url_phases.resize_with(i + 1, UrlPhases::default);
        }
        &mut self.url_phases[i]
    }

    pub fn merge(&mut self, o: &Record) {
        self.counters.merge(&o.counters);
        self.levels.merge(&o.levels);
        self.urls.merge(&o.urls);
        self.latency.merge(&o.latency);
        self.connect.merge(&o.connect);
        self.processing.merge(&o.processing);
        self.waiting.merge(&o.waiting);
        self.tcp_connect.merge(&o.tcp_connect);
        self.tls.merge(&o.tls);
        self.transfer.merge(&o.transfer);
        self.request.merge(&o.request);
        self.connection.merge(&o.connection);
        self.connection_first_byte.merge(&o.connection_first_byte);
        for (i, p) in o.url_phases.iter().enumerate() {
            self.url_phases(i).merge(p);
        }
        match (&mut self.total, &o.total) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.total = Some(b.clone()),
            _ => {}
        }
        match (&mut self.corrected, &o.corrected) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.corrected = Some(b.clone()),
            _ => {}
        }
    }

    pub fn total(&self) -> &Phases {
        self.total.as_ref().unwrap_or(&self.latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_moments_equal_moments_of_the_whole_series() {
        let mut m = Moments::default();
        for x in [2, 4, 4, 4, 5, 5, 7, 9] {
            m.add(x);
        }
        assert_eq!(m.mean(), 5.0);
        assert!((m.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let xs: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1013 + 3).collect();
        let mut all = Moments::default();
        xs.iter().for_each(|&x| all.add(x));
        let (mut a, mut b) = (Moments::default(), Moments::default());
        xs[..377].iter().for_each(|&x| a.add(x));
        xs[377..].iter().for_each(|&x| b.add(x));
        a.merge(&b);
        assert_eq!(a.n, all.n);
        assert_eq!((a.min, a.max), (all.min, all.max));
        assert_eq!(a, all);
        assert!((a.mean() - 510.0).abs() < 20.0);
        assert!((a.stddev() - all.stddev()).abs() < 1e-9);
    }

    #[test]
    fn a_group_of_slow_responses_has_the_percentiles_of_its_values_not_its_minimum() {
        // 1.013 ms to 4.6 ms: all above the 255 us a fresh auto-resizing
        // histogram covers. Exact rank ceil(q * n) of the sorted values,
        // within the 2-digit histogram's 1 %.
        let xs: Vec<u64> = (0..1000).map(|i| 1013 + (i * 7919) % 3600).collect();
        let mut g = Group::default();
        for &x in &xs {
            g.add(x, 10);
        }
        let mut sorted = xs.clone();
        sorted.sort_unstable();
        for q in [50.0, 90.0, 95.0, 99.0, 99.9] {
            let exact = sorted[((q / 100.0 * 1000.0_f64).ceil() as usize).max(1) - 1];
            let got = g.lat.at(q);
            assert!(
                got >= exact && got <= exact + exact / 100 + 1,
                "p{q}: {got} us, exact {exact} us"
            );
        }
        assert_ne!(g.lat.at(50.0), g.lat.at(99.0));
        // The same after merging two threads' groups.
        let (mut a, mut b) = (Group::default(), Group::default());
        xs[..300].iter().for_each(|&x| a.add(x, 10));
        xs[300..].iter().for_each(|&x| b.add(x, 10));
        let mut gs = Groups::default();
        gs.merge(&Groups(vec![a]));
        gs.merge(&Groups(vec![b]));
        for q in [50.0, 90.0, 99.0] {
            assert_eq!(gs.0[0].lat.at(q), g.lat.at(q), "p{q}");
        }
    }

    #[test]
    fn percentiles_stay_inside_the_exact_range() {
        let mut p = Phases::default();
        for x in [1001, 1002, 1003, 1004] {
            p.add(x);
        }
        for q in [0.0, 50.0, 99.0, 99.9, 100.0] {
            let v = p.at(q);
            assert!((1001..=1004).contains(&v), "{q}: {v}");
        }
        assert_eq!(p.at(100.0), 1004);
    }
}
