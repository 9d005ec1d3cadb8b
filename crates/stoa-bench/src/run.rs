//! A run: start the worker threads, collect their intervals (timeline, HDR
//! interval log, live progress, error-ratio abort rule) and merge their
//! records into a [`Summary`].

use crate::engine::{Interval, Msg, Shared, Worker};
use crate::plan::Plan;
use crate::record::{new_hist, Moments, Record};
use crate::report::{
    fill_latency, ms, spread, status_map, Abort, Bytes, Second, Settings, Summary,
};
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

/// Where the per-second results go besides the summary.
pub struct Sinks<'a> {
    /// The HDR interval log, if asked for.
    pub hdr_log: Option<&'a mut dyn Write>,
    /// Live progress (a terminal), if any.
    pub progress: Option<&'a mut dyn Write>,
    /// The per-request log, its header already written.
    pub request_log: Option<std::fs::File>,
}

/// Seconds being assembled from the threads' intervals.
struct Pending {
    hist: Histogram<u64>,
    moments: Moments,
    responses: u64,
    errors: u64,
    bytes: u64,
    active: f64,
    length: Duration,
    reported: Vec<bool>,
    status: BTreeMap<String, u64>,
}

struct Collector<'a> {
    threads: usize,
    pending: BTreeMap<u64, Pending>,
    done: Vec<bool>,
    timeline: Vec<Second>,
    running: Moments,
    /// Per-thread responses per second (wrk's Req/Sec), full seconds only.
    thread_rps: Vec<f64>,
    hdr: Option<(&'a mut dyn Write, V2DeflateSerializer)>,
    progress: Option<&'a mut dyn Write>,
    total_responses: u64,
    total_errors: u64,
}

impl Collector<'_> {
    fn add(&mut self, iv: Interval, sh: &Shared) {
        // wrk's Req/Sec: per thread and second (a last partial second of
        // at least 100 ms counts at its rate).
        if iv.length >= Duration::from_millis(100) {
            self.thread_rps
                .push(iv.responses as f64 / iv.length.as_secs_f64().min(1.0));
        }
        let threads = self.threads;
        let p = self.pending.entry(iv.sec).or_insert_with(|| Pending {
            hist: new_hist(),
            moments: Moments::default(),
            responses: 0,
            errors: 0,
            bytes: 0,
            active: 0.0,
            length: Duration::ZERO,
            reported: vec![false; threads],
            status: BTreeMap::new(),
        });
        for &(code, n) in &iv.status {
            let k = if (100..600).contains(&code) {
                code.to_string()
            } else {
                "other".into()
            };
            *p.status.entry(k).or_insert(0) += n;
        }
        let _ = p.hist.add(&iv.hist);
        p.moments.merge(&iv.moments);
        p.responses += iv.responses;
        p.errors += iv.errors;
        p.bytes += iv.bytes;
        p.active += iv.active;
        p.length = p.length.max(iv.length);
        p.reported[iv.thread] = true;
        self.finalize_ready(sh, false);
    }

    fn finalize_ready(&mut self, sh: &Shared, all: bool) {
        while let Some((&sec, p)) = self.pending.iter().next() {
            let ready = all || p.reported.iter().zip(&self.done).all(|(&r, &d)| r || d);
            if !ready {
                break;
            }
            if let Some(p) = self.pending.remove(&sec) {
                self.finalize(sec, p, sh);
            }
        }
    }

    fn finalize(&mut self, sec: u64, p: Pending, sh: &Shared) {
        self.running.merge(&p.moments);
        self.total_responses += p.responses;
        self.total_errors += p.errors;
        let len = p.length.as_secs_f64().max(1e-9);
        let at = |q: f64| {
            if p.moments.n == 0 {
                0.0
            } else {
                ms(p.hist
                    .value_at_percentile(q)
                    .clamp(p.moments.min, p.moments.max) as f64)
            }
        };
        let s = Second {
            t: sec as f64,
            length_s: p.length.as_secs_f64(),
            responses: p.responses,
            errors: p.errors,
            bytes: p.bytes,
            rps: p.responses as f64 / len,
            p50_ms: at(50.0),
            p99_ms: at(99.0),
            max_ms: ms(p.moments.max as f64),
            mean_ms: ms(p.moments.mean()),
            active: p.active,
            running_mean_ms: ms(self.running.mean()),
            running_stddev_ms: ms(self.running.stddev()),
            status: p.status,
        };
        if let Some((w, ser)) = self.hdr.as_mut() {
            // One line per interval, as HdrHistogram's interval log writer
            // prints it: start, length, max (ms), base64 V2 deflated.
            let mut bytes = Vec::new();
            if ser.serialize(&p.hist, &mut bytes).is_ok() {
                let _ = writeln!(
                    w,
                    "{:.3},{:.3},{:.3},{}",
                    sec as f64,
                    p.length.as_secs_f64(),
                    p.hist.max() as f64 / 1000.0,
                    crate::util::base64(&bytes)
                );
            }
        }
        if let Some(r) = sh.plan.abort.error_ratio_over {
            let n = p.responses + p.errors;
            if n >= 20 && p.errors as f64 / n as f64 > r {
                sh.abort(
                    format!(
                        "{:.1}% of the requests failed in second {} (limit {:.1}%)",
                        100.0 * p.errors as f64 / n as f64,
                        sec + 1,
                        100.0 * r
                    ),
                    Instant::now(),
                );
            }
        }
        if let Some(w) = self.progress.as_mut() {
            let line = progress_line(&Progress {
                elapsed: sh.start.elapsed(),
                sec: sec + 1,
                ended: self.total_responses + self.total_errors,
                errors: self.total_errors,
                rps: s.rps,
                p99_ms: s.p99_ms,
                active: s.active,
                limit: sh.plan.limit,
                duration: sh.plan.duration,
                rate: sh.plan.rate,
                issued: sh.issued.load(Relaxed),
            });
            let _ = write!(w, "\r\x1b[K{line}");
            let _ = w.flush();
        }
        self.timeline.push(s);
    }
}

/// What the live progress line shows, once a second.
pub struct Progress {
    pub elapsed: Duration,
    /// Seconds of the run reported so far.
    pub sec: u64,
    /// Requests ended (responses and failures) and failed.
    pub ended: u64,
    pub errors: u64,
    /// Responses per second, p99 and active level of the last second.
    pub rps: f64,
    pub p99_ms: f64,
    pub active: f64,
    pub limit: Option<u64>,
    pub duration: Option<Duration>,
    /// Open loop: the target rate, and the requests started so far.
    pub rate: Option<f64>,
    pub issued: u64,
}

/// The progress line: the last second's figures, the share done and the
/// time left of a -n or -d run (whichever ends it first), and in the open
/// loop the target rate and how many requests the schedule is behind.
pub fn progress_line(p: &Progress) -> String {
    let t = p.elapsed.as_secs_f64().max(1e-9);
    let mut done: Option<(f64, f64)> = None;
    if let Some(d) = p.duration {
        let d = d.as_secs_f64();
        done = Some(((t / d).min(1.0), (d - t).max(0.0)));
    }
    if let Some(n) = p.limit {
        let share = (p.ended as f64 / n.max(1) as f64).min(1.0);
        // At the rate so far.
        let left = if p.ended > 0 {
            (n.saturating_sub(p.ended)) as f64 * t / p.ended as f64
        } else {
            f64::INFINITY
        };
        if done.is_none_or(|(s, _)| share > s) {
            done = Some((share, left));
        }
    }
    let mut o = format!(
        "{:>5}s {:>11} requests {:>10.0}/s  errors {}  p99 {:.2} ms",
        p.sec, p.ended, p.rps, p.errors, p.p99_ms
    );
    match p.rate {
        Some(r) => {
            // Arrivals due by now that have not gone out: every connection
            // was busy.
            let due = (r * t).floor() as u64;
            let lag = due.saturating_sub(p.issued);
            o.push_str(&format!(
                "  in flight {:.1}  target {r:.0}/s lag {lag} ({:.2} s)",
                p.active,
                lag as f64 / r
            ));
        }
        None => o.push_str(&format!("  clients {:.1}", p.active)),
    }
    if let Some((share, left)) = done {
        let eta = if left.is_finite() {
            format!("{left:.0}s")
        } else {
            "?".into()
        };
        o.push_str(&format!("  {:.0}% ETA {eta}", 100.0 * share));
    }
    o
}

/// Runs the plan to its end and returns the merged record, the timeline
/// and the summary.
pub fn run(plan: Plan, sinks: Sinks) -> Summary {
    let threads = plan.threads.max(1);
    let wall_start = SystemTime::now();
    let mut sh = Shared::new(plan);
    sh.log = sinks.request_log.map(std::sync::Mutex::new);
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut record = Record::default();
    let mut last: Option<Instant> = None;
    let mut hdr = None;
    if let Some(w) = sinks.hdr_log {
        let t = wall_start
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let _ = writeln!(w, "#[Histogram log format version 1.3]");
        let _ = writeln!(
            w,
            "#[Latency in microseconds; Interval_Max in milliseconds]"
        );
        let _ = writeln!(w, "#[MaxValueDivisor: 1000.000]");
        let _ = writeln!(w, "#[StartTime: {t:.3} (seconds since epoch)]");
        let _ = writeln!(
            w,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        );
        hdr = Some((w, V2DeflateSerializer::new()));
    }
    let mut col = Collector {
        threads,
        pending: BTreeMap::new(),
        done: vec![false; threads],
        timeline: Vec::new(),
        running: Moments::default(),
        thread_rps: Vec::new(),
        hdr,
        progress: sinks.progress,
        total_responses: 0,
        total_errors: 0,
    };
    let mut spawn_error = None;
    std::thread::scope(|scope| {
        let mut started = 0;
        for id in 0..threads {
            match Worker::new(id, &sh, tx.clone()) {
                Ok(w) => {
                    let spawned = std::thread::Builder::new()
                        .name(format!("stoa-bench-{id}"))
                        .spawn_scoped(scope, move || w.run());
                    match spawned {
                        Ok(_) => started += 1,
                        Err(e) => spawn_error = Some(e.to_string()),
                    }
                }
                Err(e) => spawn_error = Some(e.to_string()),
            }
            if spawn_error.is_some() {
                sh.abort("could not start the worker threads".into(), Instant::now());
                break;
            }
        }
        for id in started..threads {
            col.done[id] = true;
        }
        drop(tx);
        for msg in rx.iter() {
            match msg {
                Msg::Interval(iv) => col.add(*iv, &sh),
                Msg::Done {
                    thread,
                    record: r,
                    last: l,
                } => {
                    record.merge(&r);
                    last = match (last, l) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    col.done[thread] = true;
                    col.finalize_ready(&sh, false);
                }
            }
        }
        col.finalize_ready(&sh, true);
    });
    let end = Instant::now();
    if let Some(w) = col.progress.as_mut() {
        let _ = write!(w, "\r\x1b[K");
        let _ = w.flush();
    }
    let abort = sh.abort.lock().ok().and_then(|a| a.clone());
    let interrupted = crate::engine::INTERRUPTED.load(Relaxed);
    let stopped_early = abort.is_some() || interrupted;
    // ab's "Time taken for tests" runs to the last response of a -n run; a
    // timed (or stopped) run lasts until it was stopped.
    let elapsed = match (sh.deadline, stopped_early) {
        (Some(d), false) if end >= d => d - sh.start,
        (_, false) if sh.plan.limit.is_some() && sh.plan.duration.is_none() => {
            last.map_or(end, |l| l.max(sh.start)) - sh.start
        }
        _ => end.saturating_duration_since(sh.start),
    };
    let plan = &sh.plan;
    let c = &record.counters;
    let doc = sh.doc_len.load(Relaxed);
    let mut s = Summary {
        tool: "stoa bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        url: format!(
            "{}://{}{}",
            if plan.target.tls.is_some() {
                "https"
            } else {
                "http"
            },
            plan.target.authority,
            plan.requests.first().map_or("/", |r| r.path.as_str())
        ),
        host: plan.target.host.clone(),
        port: plan.target.port,
        path: plan
            .requests
            .first()
            .map(|r| r.path.clone())
            .unwrap_or_default(),
        server_software: sh.server.lock().ok().and_then(|s| s.clone()),
        document_length: (doc != u64::MAX).then_some(doc),
        settings: Settings {
            concurrency: plan.concurrency,
            threads,
            keep_alive: plan.keep_alive,
            http_version: if plan.http3 {
                "3"
            } else if plan.http2 {
                "2"
            } else if plan.http10 {
                "1.0"
            } else {
                "1.1"
            }
            .into(),
            open_loop: plan.open_loop(),
            rate: plan.rate,
            duration_s: plan.duration.map(|d| d.as_secs_f64()),
            requests_limit: plan.limit,
            timeout_s: plan.timeout.as_secs_f64(),
            seed: plan.seed,
            scenario: plan.scenario_name.clone(),
            varying_clients: plan.varying_clients(),
            first_delay_s: plan
                .first_delay
                .map(|(a, b)| (a.as_secs_f64(), b.as_secs_f64())),
            streams: plan.streams,
        },
        requests: c.finished(),
        responses: c.responses,
        duration_s: elapsed.as_secs_f64(),
        requests_per_second: 0.0,
        bytes: Bytes {
            received: c.bytes_read,
            body: c.body_bytes,
            sent: c.bytes_sent,
            body_sent: c.body_sent,
        },
        status: status_map(&c.status),
        non_2xx: c.non_2xx(),
        failed: c.errors.total(),
        errors: c.errors,
        in_flight_at_end: c.in_flight_at_end,
        not_sent: c.not_sent,
        keep_alive_requests: c.keep_alive,
        connections: c.connections,
        retries: c.retries,
        active_peak: sh.peak_active.load(Relaxed),
        // Over the reported run time (to the last response of a -n run).
        active_mean: (c.active_area / elapsed.as_secs_f64().max(1e-9))
            .min(sh.peak_active.load(Relaxed) as f64),
        thread_rps: spread(&col.thread_rps),
        timeline: std::mem::take(&mut col.timeline),
        abort: abort.map(|a| Abort {
            reason: a.reason,
            at_s: a.at.as_secs_f64(),
            active_clients: a.active_clients,
        }),
        interrupted,
        ..Summary::default()
    };
    s.successful = c.responses.saturating_sub(c.errors.length_mismatch);
    s.requests_per_second = s.success_rate();
    s.failures_per_second = s.failure_rate();
    fill_latency(&mut s, &record);
    s.start_time = Some(crate::util::rfc3339(wall_start));
    s.urls = crate::report::urls_of(&record, &plan.groups);
    let secs = if plan.open_loop() {
        None
    } else {
        sh.level_clock.lock().ok().map(|mut c| {
            c.advance(sh.start + elapsed);
            std::mem::take(&mut c.secs)
        })
    };
    s.levels = crate::report::levels_of(&record, secs.as_deref());
    s.request_log_error = sh.log_error.lock().ok().and_then(|e| e.clone());
    s.protocol_error = sh.h3_error.lock().ok().and_then(|e| e.clone());
    if let Some(r) = &sh.running {
        if let Ok(mut r) = r.lock() {
            // The last responses, when they are not a multiple of N.
            let last = last.map_or(elapsed, |l| l.saturating_duration_since(sh.start));
            r.point(last.as_secs_f64());
            s.running = r
                .points
                .iter()
                .map(|&(n, t, mean, sd)| crate::report::RunningPoint {
                    n,
                    t,
                    mean_ms: ms(mean),
                    stddev_ms: ms(sd),
                })
                .collect();
        }
    }
    s.time_per_request_ms = s.latency_ms.map(|l| l.mean);
    s.phases_ms = crate::report::phases_of(&record);
    s.streams_limited_to = (c.server_max_streams != u64::MAX).then_some(c.server_max_streams);
    if let Some(t) = &plan.target.tls {
        let params = sh.tls_params.lock().ok().and_then(|p| p.clone());
        let (version, cipher, alpn) = match params {
            // An empty cipher: not known (QUIC: quinn-proto does not say).
            Some((v, c, a)) => (Some(v), (!c.is_empty()).then_some(c), a),
            None => (None, None, None),
        };
        s.tls = Some(crate::report::TlsStats {
            version,
            cipher,
            alpn,
            handshakes: c.tls_handshakes,
            resumed: c.tls_resumed,
            handshakes_per_second: c.tls_handshakes as f64 / elapsed.as_secs_f64().max(1e-9),
            insecure: t.insecure,
            resumption: t.resume,
            error: sh.tls_error.lock().ok().and_then(|e| e.clone()),
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> Progress {
        Progress {
            elapsed: Duration::from_secs(5),
            sec: 5,
            ended: 1000,
            errors: 0,
            rps: 200.0,
            p99_ms: 1.0,
            active: 4.0,
            limit: None,
            duration: None,
            rate: None,
            issued: 1000,
        }
    }

    #[test]
    fn the_progress_line_gives_the_share_done_and_time_left_of_a_timed_or_counted_run() {
        let d = progress_line(&Progress {
            duration: Some(Duration::from_secs(20)),
            ..p()
        });
        assert!(d.ends_with("clients 4.0  25% ETA 15s"), "{d}");
        // 1000 of 4000 in 5 s: 15 s to go at that rate.
        let n = progress_line(&Progress {
            limit: Some(4000),
            ..p()
        });
        assert!(n.ends_with("25% ETA 15s"), "{n}");
        // Both: whichever ends the run first.
        let b = progress_line(&Progress {
            limit: Some(2000),
            duration: Some(Duration::from_secs(20)),
            ..p()
        });
        assert!(b.ends_with("50% ETA 5s"), "{b}");
        assert!(!progress_line(&p()).contains('%'));
    }

    #[test]
    fn the_open_loop_progress_line_gives_the_target_rate_and_the_lag() {
        // 300/s for 5 s: 1500 due, 1000 sent: 500 behind, 1.67 s.
        let o = progress_line(&Progress {
            rate: Some(300.0),
            duration: Some(Duration::from_secs(10)),
            ..p()
        });
        assert!(
            o.contains("in flight 4.0  target 300/s lag 500 (1.67 s)"),
            "{o}"
        );
        assert!(o.ends_with("50% ETA 5s"), "{o}");
    }
}
