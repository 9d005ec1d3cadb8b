//! Text reports: ApacheBench's layout (the default) and wrk's (with `-d`).

use super::{PhaseMs, Summary};
use std::fmt::Write as _;

fn phase_row(out: &mut String, label: &str, p: &PhaseMs) {
    let _ = writeln!(
        out,
        "{label:<12}{:>8.3} {:>8.3} {:>7.2} {:>8.3} {:>9.3}",
        p.min, p.mean, p.stddev, p.median, p.max
    );
}

/// The ab-style report. Times are milliseconds with three decimals where
/// ab prints whole milliseconds (useless on loopback); the lines and their
/// order are ab's, so scripts that read ab's output read this too.
pub fn ab(s: &Summary) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Server Software:        {}",
        s.server_software.as_deref().unwrap_or("")
    );
    let _ = writeln!(o, "Server Hostname:        {}", s.host);
    let _ = writeln!(o, "Server Port:            {}", s.port);
    if let Some(t) = &s.tls {
        // ab's line ("SSL/TLS Protocol: TLSv1.2,ECDHE-RSA-AES256-GCM-SHA384,
        // 2048,256"), with what ab does not say: ALPN and resumption.
        let _ = writeln!(
            o,
            "SSL/TLS Protocol:       {},{}",
            t.version.as_deref().unwrap_or("(no handshake)"),
            t.cipher.as_deref().unwrap_or("-")
        );
        let _ = writeln!(
            o,
            "TLS handshakes:         {} ({} resumed; {:.2} per second){}",
            t.handshakes,
            t.resumed,
            t.handshakes_per_second,
            t.alpn
                .as_deref()
                .map(|a| format!(", ALPN {a}"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Document Path:          {}", s.path);
    match s.document_length {
        Some(n) => {
            let _ = writeln!(o, "Document Length:        {n} bytes");
        }
        None => {
            let _ = writeln!(o, "Document Length:        (no response)");
        }
    }
    let _ = writeln!(o);
    if s.settings.varying_clients {
        // A ramp, stages, quotas or think time: the configured maximum
        // says nothing of what ran; say what did.
        let _ = writeln!(
            o,
            "Concurrency Level:      {} (peak clients; mean {:.2})",
            s.active_peak, s.active_mean
        );
    } else {
        let _ = writeln!(o, "Concurrency Level:      {}", s.settings.concurrency);
    }
    let _ = writeln!(o, "Time taken for tests:   {:.3} seconds", s.duration_s);
    let _ = writeln!(o, "Complete requests:      {}", s.requests);
    let _ = writeln!(o, "Failed requests:        {}", s.failed);
    let e = &s.errors;
    if s.failed > 0 {
        let _ = writeln!(
            o,
            "   (Connect: {}, Receive: {}, Length: {}, Exceptions: {})",
            e.connect_refused + e.connect,
            e.reset + e.closed + e.timeout,
            e.length_mismatch + e.short_body,
            e.malformed + e.tls
        );
        let _ = writeln!(
            o,
            "   (refused: {}, connect: {}, reset: {}, closed: {}, timeout: {}, short body: {}, malformed: {}, tls: {}, length differs: {})",
            e.connect_refused, e.connect, e.reset, e.closed, e.timeout, e.short_body, e.malformed, e.tls, e.length_mismatch
        );
        if e.length_mismatch == s.failed {
            // ab's check, kept for parity, reads as an outage on a page
            // that changes per request (a counter, a date): say so.
            let _ = writeln!(
                o,
                "   (every failure is a whole response whose length differs from the first one's: \
                 a page that changes per request? -l / variable_length = true accepts any length)"
            );
        }
    }
    if s.non_2xx > 0 {
        let _ = writeln!(o, "Non-2xx responses:      {}", s.non_2xx);
    }
    if s.settings.keep_alive {
        let _ = writeln!(o, "Keep-Alive requests:    {}", s.keep_alive_requests);
    }
    if s.in_flight_at_end > 0 {
        let _ = writeln!(o, "In flight at end:       {}", s.in_flight_at_end);
    }
    if s.not_sent > 0 {
        let _ = writeln!(o, "Not sent (behind rate): {}", s.not_sent);
    }
    let _ = writeln!(o, "Total transferred:      {} bytes", s.bytes.received);
    if s.bytes.body_sent > 0 {
        let _ = writeln!(o, "Total body sent:        {}", s.bytes.body_sent);
    }
    let _ = writeln!(o, "HTML transferred:       {} bytes", s.bytes.body);
    tls_line(&mut o, s, "TLS:                    ");
    streams_line(&mut o, s, "");
    let t = s.duration_s;
    if t > 0.0 && s.requests > 0 {
        let n = s.requests as f64;
        let _ = writeln!(
            o,
            "Requests per second:    {:.2} [#/sec] (mean)",
            s.requests_per_second
        );
        if s.failed > 0 {
            let _ = writeln!(
                o,
                "Failures per second:    {:.2} [#/sec] (mean)",
                s.failures_per_second
            );
        }
        if s.settings.varying_clients || s.settings.open_loop {
            // ab's concurrency * time / requests assumes every client is
            // always waiting for a response: give the measured mean.
            let _ = writeln!(
                o,
                "Time per request:       {} [ms] (mean latency)",
                s.time_per_request_ms
                    .map_or("-".to_string(), |t| format!("{t:.3}"))
            );
        } else {
            let _ = writeln!(
                o,
                "Time per request:       {:.3} [ms] (mean)",
                s.settings.concurrency as f64 * t * 1000.0 / n
            );
        }
        let _ = writeln!(
            o,
            "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
            t * 1000.0 / n
        );
        let _ = writeln!(
            o,
            "Transfer rate:          {:.2} [Kbytes/sec] received",
            s.bytes.received as f64 / 1024.0 / t
        );
        if s.bytes.body_sent > 0 {
            let _ = writeln!(
                o,
                "                        {:.2} kb/s sent",
                s.bytes.sent as f64 / 1024.0 / t
            );
            let _ = writeln!(
                o,
                "                        {:.2} kb/s total",
                (s.bytes.received + s.bytes.sent) as f64 / 1024.0 / t
            );
        }
    }
    if let Some(l) = &s.latency_ms {
        let _ = writeln!(
            o,
            "Latency percentiles:    {} [ms]",
            headline_percentiles(l, "", fmt_ms3)
        );
    }
    if let (Some(c), Some(l)) = (&s.connection_times_ms, &s.latency_ms) {
        let _ = writeln!(o);
        let _ = writeln!(o, "Connection Times (ms)");
        let _ = writeln!(
            o,
            "                 min     mean [+/-sd]   median       max"
        );
        phase_row(&mut o, "Connect:", &c.connect);
        phase_row(&mut o, "Processing:", &c.processing);
        phase_row(&mut o, "Waiting:", &c.waiting);
        phase_row(&mut o, "Total:", &c.total);
        if s.phases_ms.is_some() {
            let _ = writeln!(o);
            let _ = writeln!(o, "Request phases (ms)");
            phases(&mut o, s, fmt_ms3, "", "");
        }
        let _ = writeln!(o);
        if s.settings.open_loop {
            let _ = writeln!(
                o,
                "Percentage of the requests served within a certain time (ms, from the intended send time)"
            );
        } else {
            let _ = writeln!(
                o,
                "Percentage of the requests served within a certain time (ms, from each request's actual send time)"
            );
        }
        for p in [50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0] {
            let v = interpolate(&s.percentiles_ms, p, l.max);
            let _ = writeln!(o, "  {p:.0}% {v:>9.3}");
        }
        let _ = writeln!(o, " 100% {:>9.3} (longest request)", l.max);
        if let Some(c) = &s.corrected_latency_ms {
            let _ = writeln!(o);
            let _ = writeln!(
                o,
                "Percentage of the requests served within a certain time (ms, corrected for coordinated omission)"
            );
            for p in [50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0] {
                let v = interpolate(&s.corrected_percentiles_ms, p, c.max);
                let _ = writeln!(o, "  {p:.0}% {v:>9.3}");
            }
            let _ = writeln!(o, " 100% {:>9.3} (longest request)", c.max);
        }
    }
    tail(&mut o, s);
    o
}

fn fmt_ms3(v: f64) -> String {
    format!("{v:.3}")
}

/// The headline percentiles, `p50 X  p90 X  p95 X  p99 X  p99.9 X`: the
/// figures a service-level objective is written in (k6's and h2load's
/// summaries print p90 and p95; p99.9 shows the tail a mean hides).
pub fn headline_percentiles(l: &super::LatencyMs, sep: &str, f: fn(f64) -> String) -> String {
    [
        ("p50", l.p50),
        ("p90", l.p90),
        ("p95", l.p95),
        ("p99", l.p99),
        ("p99.9", l.p999),
    ]
    .iter()
    .map(|(k, v)| format!("{k}{sep} {}", f(*v)))
    .collect::<Vec<_>>()
    .join("  ")
}

/// Where the requests' time went (`phases_ms`), one row per phase the
/// run has (no `tls` over plain TCP): `connect` and `tls` over the
/// requests that opened a connection, `first byte` and `transfer` over the
/// complete responses. The layout of curl's `-w` timings, as percentiles.
fn phases(o: &mut String, s: &Summary, f: fn(f64) -> String, indent: &str, head: &str) {
    let Some(p) = &s.phases_ms else {
        return;
    };
    let rows = [
        ("connect", &p.connect),
        ("tls", &p.tls),
        ("first byte", &p.first_byte),
        ("transfer", &p.transfer),
        // h2load's three spans, under the names it prints them with.
        ("request", &p.request),
        ("conn setup", &p.connection),
        ("conn 1st byte", &p.connection_first_byte),
    ];
    if rows.iter().all(|(_, r)| r.is_none()) {
        return;
    }
    let _ = writeln!(
        o,
        "{indent}{:<14}{:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
        head, "n", "mean", "p50", "p90", "p99", "max"
    );
    for (name, r) in rows {
        if let Some(r) = r {
            let _ = writeln!(
                o,
                "{indent}{name:<14}{:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
                r.n,
                f(r.mean),
                f(r.p50),
                f(r.p90),
                f(r.p99),
                f(r.max)
            );
        }
    }
}

/// A note when the server's SETTINGS_MAX_CONCURRENT_STREAMS cut the
/// streams asked for per connection.
fn streams_line(o: &mut String, s: &Summary, indent: &str) {
    if let Some(m) = s.streams_limited_to {
        let _ = writeln!(
            o,
            "{indent}Note: the server allows {m} concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS), fewer than the {} asked for: the rest waited",
            s.settings.streams
        );
    }
}

/// The TLS line of an `https://` run: what the first handshake
/// negotiated, and how many handshakes (resumed ones apart) at what rate.
fn tls_line(o: &mut String, s: &Summary, label: &str) {
    let Some(t) = &s.tls else {
        return;
    };
    let neg: Vec<&str> = [&t.version, &t.cipher, &t.alpn]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let _ = writeln!(
        o,
        "{label}{}{}, {} handshakes ({} resumed), {:.1}/s",
        if neg.is_empty() {
            "-".into()
        } else {
            neg.join(" ")
        },
        if t.insecure {
            " (certificate not checked)"
        } else {
            ""
        },
        t.handshakes,
        t.resumed,
        t.handshakes_per_second
    );
    if let Some(e) = &t.error {
        let _ = writeln!(o, "{label}first failure: {e}");
    }
}

/// The value at percentile `p` of a spectrum, `max` past its end.
fn interpolate(sp: &[(f64, f64)], p: f64, max: f64) -> f64 {
    // The spectrum holds fixed points; ab's table asks for 66 and 98 too,
    // so interpolate between the neighbours (both are real values).
    match sp.iter().position(|&(q, _)| q >= p) {
        Some(0) => sp[0].1,
        Some(i) if sp[i].0 == p => sp[i].1,
        Some(i) => {
            let (q0, v0) = sp[i - 1];
            let (q1, v1) = sp[i];
            v0 + (v1 - v0) * (p - q0) / (q1 - q0)
        }
        None => max,
    }
}

/// The per-level table (BENCH2's mean time against clients), printed when
/// the clients vary over the run; the JSON always has it.
fn levels(o: &mut String, s: &Summary) {
    if !(s.settings.varying_clients && s.levels.len() > 1) {
        return;
    }
    let _ = writeln!(
        o,
        "\nPer concurrency level (requests by the clients running when each started; ms)"
    );
    let _ = writeln!(
        o,
        "{:>8} {:>9} {:>9} {:>7} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "clients",
        "time s",
        "requests",
        "failed",
        "req/s",
        "mean",
        "sd",
        "median",
        "p90",
        "p99",
        "max"
    );
    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
    for l in &s.levels {
        let _ = writeln!(
            o,
            "{:>8} {:>9} {:>9} {:>7} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10}",
            l.active,
            f(l.time_s, 2),
            l.requests,
            l.errors,
            f(l.rps, 1),
            f(l.mean_ms, 3),
            f(l.stddev_ms, 3),
            f(l.p50_ms, 3),
            f(l.p90_ms, 3),
            f(l.p99_ms, 3),
            f(l.max_ms, 3)
        );
    }
}

/// The per-URL breakdown (a mix or a tree).
fn urls(o: &mut String, s: &Summary) {
    if s.urls.is_empty() {
        return;
    }
    let w = s
        .urls
        .iter()
        .map(|u| u.name.len())
        .max()
        .unwrap_or(0)
        .max(3);
    let _ = writeln!(o, "\nPer URL (ms)");
    let _ = writeln!(
        o,
        "{:<w$} {:>9} {:>7} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "URL", "requests", "failed", "mean", "sd", "median", "p90", "p95", "p99", "p99.9", "max"
    );
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for u in &s.urls {
        let _ = writeln!(
            o,
            "{:<w$} {:>9} {:>7} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            u.name,
            u.requests,
            u.errors,
            f(u.mean_ms),
            f(u.stddev_ms),
            f(u.p50_ms),
            f(u.p90_ms),
            f(u.p95_ms),
            f(u.p99_ms),
            f(u.p999_ms),
            f(u.max_ms)
        );
    }
    url_phases(o, s, w);
}

/// The per-URL phases: p50/p90/p99 of each phase a URL's requests had.
fn url_phases(o: &mut String, s: &Summary, w: usize) {
    if s.urls.iter().all(|u| u.phases_ms.is_none()) {
        return;
    }
    let _ = writeln!(o, "\nPer URL phases (ms, p50/p90/p99)");
    let cols = ["connect", "tls", "first byte", "transfer", "request"];
    let _ = write!(o, "{:<w$}", "URL");
    for c in cols {
        let _ = write!(o, " {c:>23}");
    }
    o.push('\n');
    for u in &s.urls {
        let _ = write!(o, "{:<w$}", u.name);
        let p = u.phases_ms.unwrap_or_default();
        for r in [p.connect, p.tls, p.first_byte, p.transfer, p.request] {
            let cell = r.map_or("-".to_string(), |r| {
                format!("{:.3}/{:.3}/{:.3}", r.p50, r.p90, r.p99)
            });
            let _ = write!(o, " {cell:>23}");
        }
        o.push('\n');
    }
}

fn tail(o: &mut String, s: &Summary) {
    levels(o, s);
    urls(o, s);
    o.push_str(&crate::threshold::table(&s.thresholds));
    if !s.settings.open_loop && s.responses > 0 {
        let _ = writeln!(
            o,
            "\nClosed loop: latency counts from each request's actual send time. A stall also delays the requests the clients have not sent yet, which this view does not count (it shows in the maximum); {}",
            if s.corrected_latency_ms.is_some() {
                "the corrected view adds them, at each client's observed rate."
            } else {
                "--corrected adds them, at each client's observed rate."
            }
        );
    }
    if s.settings.open_loop {
        let _ = writeln!(
            o,
            "\nOpen loop at {:.1} requests/s: latency counts from each request's intended send time.",
            s.settings.rate.unwrap_or(0.0)
        );
    }
    if let Some(a) = &s.abort {
        let _ = writeln!(
            o,
            "\nStopped at {:.3} s: {}; {} clients were being served.",
            a.at_s, a.reason, a.active_clients
        );
    }
    if s.interrupted {
        let _ = writeln!(
            o,
            "\nInterrupted (Ctrl-C) after {:.3} s: the figures cover the run up to then.",
            s.duration_s
        );
    }
}

/// A latency in wrk's units; "-" when there is no sample.
fn fmt_opt_ms(ms: Option<f64>) -> String {
    ms.map_or("-".to_string(), fmt_time_ms)
}

fn fmt_time_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.2}us", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.2}ms")
    } else if ms < 60_000.0 {
        format!("{:.2}s", ms / 1000.0)
    } else {
        format!("{:.2}m", ms / 60_000.0)
    }
}

fn fmt_metric(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.2}k", x / 1e3)
    } else {
        format!("{x:.2}")
    }
}

fn fmt_binary(x: f64) -> String {
    if x >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}GB", x / 1024.0 / 1024.0 / 1024.0)
    } else if x >= 1024.0 * 1024.0 {
        format!("{:.2}MB", x / 1024.0 / 1024.0)
    } else if x >= 1024.0 {
        format!("{:.2}KB", x / 1024.0)
    } else {
        format!("{x:.2}B")
    }
}

/// The wrk-style report (`-d`); `latency` adds the distribution (`--latency`).
pub fn wrk(s: &Summary, latency: bool) -> String {
    let mut o = String::new();
    let d = s.settings.duration_s.unwrap_or(s.duration_s);
    let d = if d < 1.0 {
        format!("{:.0}ms", d * 1000.0)
    } else if d.fract() == 0.0 {
        format!("{d:.0}s")
    } else {
        format!("{d:.1}s")
    };
    let _ = writeln!(o, "Running {d} test @ {}", s.url);
    if s.settings.varying_clients {
        let _ = writeln!(
            o,
            "  {} threads and {} connections (peak clients; mean {:.2})",
            s.settings.threads, s.active_peak, s.active_mean
        );
    } else {
        let _ = writeln!(
            o,
            "  {} threads and {} connections",
            s.settings.threads, s.settings.concurrency
        );
    }
    let _ = writeln!(o, "  Thread Stats   Avg      Stdev     Max   +/- Stdev");
    let l = s.latency_ms.as_ref();
    let _ = writeln!(
        o,
        "    Latency   {:>8} {:>10} {:>9} {:>9}",
        fmt_opt_ms(l.map(|l| l.mean)),
        fmt_opt_ms(l.map(|l| l.stddev)),
        fmt_opt_ms(l.map(|l| l.max)),
        s.latency_within_stddev_pct
            .map_or("-".to_string(), |p| format!("{p:.2}%"))
    );
    if let Some(c) = &s.corrected_latency_ms {
        let _ = writeln!(
            o,
            "    Corrected {:>8} {:>10} {:>9}   (corrected for coordinated omission)",
            fmt_time_ms(c.mean),
            fmt_time_ms(c.stddev),
            fmt_time_ms(c.max),
        );
    }
    let r = &s.thread_rps;
    let _ = writeln!(
        o,
        "    Req/Sec   {:>8} {:>10} {:>9} {:>8.2}%",
        fmt_metric(r.mean),
        fmt_metric(r.stddev),
        fmt_metric(r.max),
        r.within_stddev_pct
    );
    if let Some(l) = l {
        let _ = writeln!(
            o,
            "  Latency Percentiles  {}",
            headline_percentiles(l, "", fmt_time_ms)
        );
    }
    if latency {
        let _ = writeln!(o, "  Latency Distribution");
        for (p, v) in [
            (50.0, l.map(|l| l.p50)),
            (75.0, l.map(|l| interpolate(&s.percentiles_ms, 75.0, l.max))),
            (90.0, l.map(|l| l.p90)),
            (99.0, l.map(|l| l.p99)),
        ] {
            let _ = writeln!(o, "     {p:.0}% {:>9}", fmt_opt_ms(v));
        }
        if let Some(c) = &s.corrected_latency_ms {
            let _ = writeln!(o, "  Corrected Latency Distribution");
            for (p, v) in [
                (50.0, c.p50),
                (75.0, interpolate(&s.corrected_percentiles_ms, 75.0, c.max)),
                (90.0, c.p90),
                (99.0, c.p99),
            ] {
                let _ = writeln!(o, "     {p:.0}% {:>9}", fmt_time_ms(v));
            }
        }
    }
    phases(&mut o, s, fmt_time_ms, "  ", "Phases");
    tls_line(&mut o, s, "  TLS: ");
    streams_line(&mut o, s, "  ");
    let _ = writeln!(
        o,
        "  {} requests in {:.2}s, {} read",
        s.responses,
        s.duration_s,
        fmt_binary(s.bytes.received as f64)
    );
    let e = &s.errors;
    if s.failed > e.length_mismatch || s.in_flight_at_end > 0 {
        let _ = writeln!(
            o,
            "  Socket errors: connect {}, read {}, write 0, timeout {}",
            e.connect_refused + e.connect + e.tls,
            e.reset + e.closed + e.short_body + e.malformed,
            e.timeout
        );
    }
    if s.in_flight_at_end > 0 {
        let _ = writeln!(o, "  In flight at end: {}", s.in_flight_at_end);
    }
    if s.not_sent > 0 {
        let _ = writeln!(o, "  Not sent (behind rate): {}", s.not_sent);
    }
    let non_2xx_3xx: u64 = s
        .status
        .iter()
        .filter(|(k, _)| !(k.starts_with('2') || k.starts_with('3')) || k.len() != 3)
        .map(|(_, v)| v)
        .sum();
    if non_2xx_3xx > 0 {
        let _ = writeln!(o, "  Non-2xx or 3xx responses: {non_2xx_3xx}");
    }
    let t = s.duration_s.max(1e-9);
    let _ = writeln!(o, "Requests/sec: {:>10.2}", s.requests_per_second);
    if s.failed > 0 {
        let _ = writeln!(o, "Failures/sec: {:>10.2}", s.failures_per_second);
    }
    let _ = writeln!(
        o,
        "Transfer/sec: {:>10}",
        fmt_binary(s.bytes.received as f64 / t)
    );
    tail(&mut o, s);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_https_runs_phases_and_handshakes_are_in_both_layouts() {
        use crate::report::{PhaseStats, RequestPhases, TlsStats};
        let ph = |n, p50| {
            Some(PhaseStats {
                n,
                mean: p50,
                p50,
                p90: p50,
                p99: p50,
                max: p50,
            })
        };
        let s = Summary {
            phases_ms: Some(RequestPhases {
                connect: ph(10, 0.1),
                tls: ph(10, 1.25),
                first_byte: ph(100, 0.5),
                transfer: ph(100, 0.01),
                ..RequestPhases::default()
            }),
            tls: Some(TlsStats {
                version: Some("TLSv1.3".into()),
                cipher: Some("TLS13_AES_128_GCM_SHA256".into()),
                alpn: None,
                handshakes: 10,
                resumed: 4,
                handshakes_per_second: 5.0,
                ..TlsStats::default()
            }),
            ..Summary::default()
        };
        let mut o = String::new();
        phases(&mut o, &s, fmt_ms3, "", "");
        let tls = o.lines().find(|l| l.starts_with("tls")).expect("tls row");
        assert_eq!(
            tls.split_whitespace().collect::<Vec<_>>(),
            ["tls", "10", "1.250", "1.250", "1.250", "1.250", "1.250"]
        );
        assert_eq!(o.lines().count(), 5, "{o}");
        let w = wrk(&s, false);
        assert!(w.contains("  tls                  10     1.25ms"), "{w}");
        assert!(
            w.contains("TLS: TLSv1.3 TLS13_AES_128_GCM_SHA256, 10 handshakes (4 resumed), 5.0/s"),
            "{w}"
        );
    }

    #[test]
    fn the_per_url_table_is_followed_by_each_urls_phases_and_a_stream_limit_note() {
        use crate::report::{PhaseStats, RequestPhases, UrlStats};
        let ph = |p50: f64| {
            Some(PhaseStats {
                n: 5,
                mean: p50,
                p50,
                p90: p50 * 2.0,
                p99: p50 * 3.0,
                max: p50 * 3.0,
            })
        };
        let url = |name: &str, phases: Option<RequestPhases>| UrlStats {
            name: name.into(),
            requests: 5,
            responses: 5,
            phases_ms: phases,
            ..UrlStats::default()
        };
        let mut s = Summary {
            urls: vec![
                url(
                    "GET /a",
                    Some(RequestPhases {
                        first_byte: ph(0.1),
                        request: ph(0.25),
                        ..RequestPhases::default()
                    }),
                ),
                url("GET /b", None),
            ],
            streams_limited_to: Some(10),
            ..Summary::default()
        };
        s.settings.streams = 100;
        let mut o = String::new();
        urls(&mut o, &s);
        let a = o
            .lines()
            .skip_while(|l| !l.starts_with("Per URL phases"))
            .find(|l| l.starts_with("GET /a"))
            .expect("a phases row");
        assert_eq!(
            a.split_whitespace().collect::<Vec<_>>(),
            [
                "GET",
                "/a",
                "-",
                "-",
                "0.100/0.200/0.300",
                "-",
                "0.250/0.500/0.750"
            ]
        );
        let mut o = String::new();
        streams_line(&mut o, &s, "");
        assert!(o.contains("allows 10 concurrent streams"), "{o}");
        assert!(o.contains("fewer than the 100 asked for"), "{o}");
    }

    #[test]
    fn wrk_units_match_wrk() {
        assert_eq!(fmt_time_ms(0.135), "135.00us");
        assert_eq!(fmt_time_ms(2.19), "2.19ms");
        assert_eq!(fmt_time_ms(1500.0), "1.50s");
        assert_eq!(fmt_metric(36390.0), "36.39k");
        assert_eq!(fmt_binary(1.14 * 1024.0 * 1024.0 * 1024.0), "1.14GB");
    }
}
