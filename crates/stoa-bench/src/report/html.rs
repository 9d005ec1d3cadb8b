//! The HTML report: one self-contained page (no scripts, no external files)
//! with SVG plots of one run or of several side by side.

use super::Summary;
use std::fmt::Write as _;

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Series {
    name: String,
    color: &'static str,
    dashed: bool,
    /// Drawn as dots (a scatter), not a line.
    dots: bool,
    points: Vec<(f64, f64)>,
}

#[derive(Clone, Copy, PartialEq)]
enum XAxis {
    Linear,
    /// Percentiles on the 1/(1-p) log scale of HdrHistogram plots.
    Percentile,
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) for `range`.
fn nice_step(range: f64, ticks: f64) -> f64 {
    if range.is_nan() || range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / ticks;
    let p = 10f64.powf(raw.log10().floor());
    let f = raw / p;
    p * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v.abs() >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Position of percentile `p` on the log axis: log10(1 / (1 - p/100)).
fn pct_x(p: f64) -> f64 {
    let q = (1.0 - p / 100.0).max(1e-6);
    (1.0 / q).log10()
}

fn chart(title: &str, xlabel: &str, ylabel: &str, series: &[Series], xaxis: XAxis) -> String {
    let (w, mut h) = (560.0, 300.0);
    // The legend sits above the plot, in rows of two.
    let rows = series.len().div_ceil(2) as f64;
    h += 15.0 * rows;
    let (ml, mr, mt, mb) = (64.0, 30.0, 34.0 + 15.0 * rows, 44.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}"><rect width="{w}" height="{h}" fill="#fff"/><text x="{cx}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{t}</text>"##,
        t = esc(title),
        cx = w / 2.0
    );
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .map(|(x, y)| {
            (
                if xaxis == XAxis::Percentile {
                    pct_x(x)
                } else {
                    x
                },
                y,
            )
        })
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if pts.is_empty() {
        let _ = write!(
            o,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="12" fill="#666">no data</text></svg>"##,
            w / 2.0,
            h / 2.0
        );
        return o;
    }
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let mut y1: f64 = 0.0;
    for &(x, y) in &pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    // Time starts at 0; the percentile axis at 0% and reaches 99%.
    x0 = x0.min(0.0);
    if xaxis == XAxis::Percentile {
        x1 = x1.max(2.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let ystep = nice_step(y1.max(1e-9), 5.0);
    let y1 = (y1 / ystep).ceil().max(1.0) * ystep;
    let sx = |x: f64| ml + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| mt + ph - y / y1 * ph;
    // Grid and y ticks.
    let mut y = 0.0;
    while y <= y1 + ystep / 2.0 {
        let py = sy(y);
        let _ = write!(
            o,
            r##"<line x1="{ml}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
            ml + pw,
            ml - 6.0,
            py + 4.0,
            fmt_tick(y)
        );
        y += ystep;
    }
    // X ticks.
    match xaxis {
        XAxis::Linear => {
            let step = nice_step(x1 - x0, 6.0);
            let mut x = (x0 / step).ceil() * step;
            while x <= x1 + step * 1e-9 {
                let px = sx(x);
                let _ = write!(
                    o,
                    r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="#999"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
                    mt + ph,
                    mt + ph + 4.0,
                    mt + ph + 16.0,
                    fmt_tick(x)
                );
                x += step;
            }
        }
        XAxis::Percentile => {
            for (p, label) in [
                (0.0, "0%"),
                (90.0, "90%"),
                (99.0, "99%"),
                (99.9, "99.9%"),
                (99.99, "99.99%"),
                (99.999, "99.999%"),
            ] {
                let x = pct_x(p);
                if x > x1 + 1e-9 {
                    break;
                }
                let px = sx(x);
                let _ = write!(
                    o,
                    r##"<line x1="{px:.1}" y1="{mt}" x2="{px:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="11">{label}</text>"##,
                    mt + ph,
                    mt + ph + 16.0
                );
            }
        }
    }
    let _ = write!(
        o,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#333"/><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text><text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>"##,
        ml + pw / 2.0,
        h - 8.0,
        esc(xlabel),
        mt + ph / 2.0,
        esc(ylabel)
    );
    for s in series.iter().filter(|s| s.dots) {
        // One path of zero-length round-capped strokes: a dot per point at
        // ~14 bytes each (a circle element would be ~50).
        let mut d = String::new();
        for &(x, y) in &s.points {
            if x.is_finite() && y.is_finite() {
                let _ = write!(d, "M{:.1} {:.1}h0", sx(x), sy(y));
            }
        }
        let _ = write!(
            o,
            r#"<path fill="none" stroke="{}" stroke-opacity="0.55" stroke-width="2.6" stroke-linecap="round" d="{d}"/>"#,
            s.color
        );
    }
    for s in series.iter().filter(|s| !s.dots) {
        let mut d = String::new();
        for &(x, y) in &s.points {
            let x = if xaxis == XAxis::Percentile {
                pct_x(x)
            } else {
                x
            };
            if x.is_finite() && y.is_finite() {
                let _ = write!(d, "{:.1},{:.1} ", sx(x), sy(y));
            }
        }
        let dash = if s.dashed {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = write!(
            o,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{dash} points="{}"/>"#,
            s.color,
            d.trim_end()
        );
        if s.points.len() == 1 {
            let (x, y) = s.points[0];
            let x = if xaxis == XAxis::Percentile {
                pct_x(x)
            } else {
                x
            };
            let _ = write!(
                o,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                sx(x),
                sy(y),
                s.color
            );
        }
    }
    // Legend.
    for (i, s) in series.iter().enumerate() {
        let ly = 34.0 + 15.0 * (i / 2) as f64;
        let lx = ml + 235.0 * (i % 2) as f64;
        let dash = if s.dashed {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = write!(
            o,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            lx + 18.0,
            s.color,
            lx + 22.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
    o.push_str("</svg>");
    o
}

fn label(s: &Summary, i: usize, n: usize) -> String {
    if n == 1 {
        String::new()
    } else {
        let name = s
            .settings
            .scenario
            .clone()
            .unwrap_or_else(|| format!("{}:{}", s.host, s.port));
        format!("run {} ({name}) ", i + 1)
    }
}

fn table_row(o: &mut String, name: &str, vals: &[String]) {
    let _ = write!(o, "<tr><th>{}</th>", esc(name));
    for v in vals {
        let _ = write!(o, "<td>{}</td>", esc(v));
    }
    o.push_str("</tr>\n");
}

/// The report page for one run or several side by side.
pub fn page(runs: &[Summary]) -> String {
    let n = runs.len();
    let mut o = String::new();
    let title = if n == 1 {
        format!("stoa bench: {}", runs[0].url)
    } else {
        format!("stoa bench: {n} runs compared")
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\
body{{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px;color:#222;background:#fafafa}}\
h1{{font-size:20px}} h2{{font-size:16px;margin-top:28px}}\
table{{border-collapse:collapse;margin:8px 0;background:#fff}} th,td{{border:1px solid #ccc;padding:4px 10px;text-align:right;font-size:13px}}\
th{{text-align:left;background:#f0f0f0}} .charts{{display:flex;flex-wrap:wrap;gap:12px}} .charts svg{{border:1px solid #ddd}}\
.note{{color:#555;font-size:13px}} .abort{{color:#b00;font-weight:bold}}\
</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    // Summary table.
    o.push_str("<h2>Summary</h2><table>\n");
    let cols: Vec<String> = (0..n)
        .map(|i| {
            if n == 1 {
                "value".into()
            } else {
                format!("run {}", i + 1)
            }
        })
        .collect();
    table_row(&mut o, "", &cols);
    let row = |o: &mut String, name: &str, f: &dyn Fn(&Summary) -> String| {
        table_row(o, name, &runs.iter().map(f).collect::<Vec<_>>());
    };
    row(&mut o, "URL", &|s| s.url.clone());
    row(&mut o, "scenario", &|s| {
        s.settings.scenario.clone().unwrap_or_else(|| "-".into())
    });
    row(&mut o, "server", &|s| {
        s.server_software.clone().unwrap_or_default()
    });
    row(&mut o, "clients / connections", &|s| {
        if s.settings.varying_clients {
            format!("peak {}, mean {:.2}", s.active_peak, s.active_mean)
        } else {
            s.settings.concurrency.to_string()
        }
    });
    row(&mut o, "threads", &|s| s.settings.threads.to_string());
    row(&mut o, "keep-alive, HTTP", &|s| {
        format!(
            "{}, {}",
            if s.settings.keep_alive { "yes" } else { "no" },
            s.settings.http_version
        )
    });
    row(&mut o, "open loop rate (req/s)", &|s| {
        s.settings.rate.map_or("-".into(), |r| format!("{r:.1}"))
    });
    row(&mut o, "duration (s)", &|s| format!("{:.3}", s.duration_s));
    row(&mut o, "requests", &|s| s.requests.to_string());
    row(&mut o, "successful responses per second", &|s| {
        format!("{:.1}", s.success_rate())
    });
    row(&mut o, "failures per second", &|s| {
        format!("{:.1}", s.failure_rate())
    });
    row(&mut o, "failed", &|s| s.failed.to_string());
    row(&mut o, "non-2xx responses", &|s| s.non_2xx.to_string());
    row(&mut o, "in flight at end", &|s| {
        s.in_flight_at_end.to_string()
    });
    row(&mut o, "latency mean ± sd (ms)", &|s| {
        s.latency_ms
            .map_or("-".into(), |l| format!("{:.3} ± {:.3}", l.mean, l.stddev))
    });
    row(&mut o, "latency p50 / p99 / p99.9 (ms)", &|s| {
        s.latency_ms.map_or("-".into(), |l| {
            format!("{:.3} / {:.3} / {:.3}", l.p50, l.p99, l.p999)
        })
    });
    row(&mut o, "latency min / max (ms)", &|s| {
        s.latency_ms
            .map_or("-".into(), |l| format!("{:.3} / {:.3}", l.min, l.max))
    });
    row(&mut o, "received (bytes)", &|s| {
        s.bytes.received.to_string()
    });
    o.push_str("</table>\n");
    for (i, s) in runs.iter().enumerate() {
        if let Some(a) = &s.abort {
            let _ = writeln!(
                o,
                "<p class=\"abort\">{}stopped at {:.3} s: {}; {} clients were being served.</p>",
                esc(&label(s, i, n)),
                a.at_s,
                esc(&a.reason),
                a.active_clients
            );
        }
        if s.interrupted {
            let _ = writeln!(
                o,
                "<p class=\"abort\">{}interrupted (Ctrl-C) after {:.3} s: the figures cover the run up to then.</p>",
                esc(&label(s, i, n)),
                s.duration_s
            );
        }
    }
    // Charts.
    let color = |i: usize| COLORS[i % COLORS.len()];
    let mut thr = Vec::new();
    let mut lat = Vec::new();
    let mut spec = Vec::new();
    let mut act = Vec::new();
    let mut res = Vec::new();
    for (i, s) in runs.iter().enumerate() {
        let l = label(s, i, n);
        let mid = |x: &super::Second| x.t + x.length_s / 2.0;
        thr.push(Series {
            name: format!("{l}responses/s"),
            color: color(2 * i),
            dashed: false,
            dots: false,
            points: s.timeline.iter().map(|x| (mid(x), x.rps)).collect(),
        });
        if s.timeline.iter().any(|x| x.errors > 0) {
            thr.push(Series {
                name: format!("{l}errors/s"),
                color: color(2 * i + 1),
                dashed: true,
                dots: false,
                points: s
                    .timeline
                    .iter()
                    .map(|x| (mid(x), x.errors as f64 / x.length_s.max(1e-9)))
                    .collect(),
            });
        }
        lat.push(Series {
            name: format!("{l}p50"),
            color: color(2 * i),
            dashed: false,
            dots: false,
            points: s
                .timeline
                .iter()
                .filter(|x| x.responses > 0)
                .map(|x| (mid(x), x.p50_ms))
                .collect(),
        });
        lat.push(Series {
            name: format!("{l}p99"),
            color: color(2 * i + 1),
            dashed: true,
            dots: false,
            points: s
                .timeline
                .iter()
                .filter(|x| x.responses > 0)
                .map(|x| (mid(x), x.p99_ms))
                .collect(),
        });
        spec.push(Series {
            name: format!("{l}latency"),
            color: color(i),
            dashed: false,
            dots: false,
            points: s
                .percentiles_ms
                .iter()
                .filter(|p| p.0 < 100.0)
                .copied()
                .collect(),
        });
        act.push(Series {
            name: format!(
                "{l}{}",
                if s.settings.open_loop {
                    "requests in flight"
                } else {
                    "active clients"
                }
            ),
            color: color(i),
            dashed: false,
            dots: false,
            points: s.timeline.iter().map(|x| (mid(x), x.active)).collect(),
        });
        res.push(Series {
            name: format!("{l}running mean"),
            color: color(2 * i),
            dashed: false,
            dots: false,
            points: s
                .timeline
                .iter()
                .filter(|x| x.running_mean_ms > 0.0)
                .map(|x| (x.t + x.length_s, x.running_mean_ms))
                .collect(),
        });
        res.push(Series {
            name: format!("{l}running std dev"),
            color: color(2 * i + 1),
            dashed: true,
            dots: false,
            points: s
                .timeline
                .iter()
                .filter(|x| x.running_mean_ms > 0.0)
                .map(|x| (x.t + x.length_s, x.running_stddev_ms))
                .collect(),
        });
    }
    o.push_str("<h2>Over time</h2><div class=\"charts\">\n");
    o.push_str(&chart(
        "Throughput",
        "time (s)",
        "per second",
        &thr,
        XAxis::Linear,
    ));
    o.push_str(&chart(
        "Latency per second",
        "time (s)",
        "ms",
        &lat,
        XAxis::Linear,
    ));
    o.push_str(&chart(
        "Active clients",
        "time (s)",
        "clients",
        &act,
        XAxis::Linear,
    ));
    o.push_str(&chart(
        "Resilience: response time so far",
        "time (s)",
        "ms",
        &res,
        XAxis::Linear,
    ));
    if runs.iter().any(|s| !s.running.is_empty()) {
        let mut per = Vec::new();
        for (i, s) in runs.iter().enumerate() {
            let l = label(s, i, n);
            per.push(Series {
                name: format!("{l}running mean"),
                color: color(i),
                dashed: false,
                dots: false,
                points: s.running.iter().map(|p| (p.n as f64, p.mean_ms)).collect(),
            });
            per.push(Series {
                name: format!("{l}running std dev"),
                color: color(i),
                dashed: true,
                dots: false,
                points: s
                    .running
                    .iter()
                    .map(|p| (p.n as f64, p.stddev_ms))
                    .collect(),
            });
        }
        o.push_str(&chart(
            "Resilience: response time per response",
            "responses",
            "ms",
            &per,
            XAxis::Linear,
        ));
    }
    o.push_str("</div>\n<h2>Latency distribution</h2><div class=\"charts\">\n");
    o.push_str(&chart(
        "Latency by percentile",
        "percentile",
        "ms",
        &spec,
        XAxis::Percentile,
    ));
    o.push_str("</div>\n");
    if runs.iter().any(|s| !s.scatter.is_empty()) {
        let mut sc = Vec::new();
        for (i, s) in runs.iter().enumerate() {
            let l = label(s, i, n);
            sc.push(Series {
                name: format!("{l}response"),
                color: color(i),
                dashed: false,
                dots: true,
                points: s
                    .scatter
                    .iter()
                    .filter(|p| !p.2)
                    .map(|p| (p.0, p.1))
                    .collect(),
            });
            if s.scatter.iter().any(|p| p.2) {
                sc.push(Series {
                    name: format!("{l}failure"),
                    color: "#d62728",
                    dashed: false,
                    dots: true,
                    points: s
                        .scatter
                        .iter()
                        .filter(|p| p.2)
                        .map(|p| (p.0, p.1))
                        .collect(),
                });
            }
        }
        let sampled = runs.iter().any(|s| s.requests as usize > SCATTER_MAX);
        let _ = write!(
            o,
            "<h2>Every request</h2><p class=\"note\">From the request log: each request's latency at the time it started{}. Bands of latencies show here.</p><div class=\"charts\">\n",
            if sampled {
                ", every k-th request past 20000, with every failure and every response slower than p99"
            } else {
                ""
            }
        );
        o.push_str(&chart(
            "Latency of every request",
            "start (s)",
            "ms",
            &sc,
            XAxis::Linear,
        ));
        o.push_str("</div>\n");
    }
    // Outcomes.
    o.push_str("<h2>Outcomes</h2><table>\n");
    table_row(&mut o, "", &cols);
    let mut codes: Vec<&String> = runs.iter().flat_map(|s| s.status.keys()).collect();
    codes.sort();
    codes.dedup();
    for c in codes {
        row(&mut o, &format!("status {c}"), &|s| {
            s.status.get(c).copied().unwrap_or(0).to_string()
        });
    }
    row(&mut o, "connect refused", &|s| {
        s.errors.connect_refused.to_string()
    });
    row(&mut o, "connect error", &|s| s.errors.connect.to_string());
    row(&mut o, "reset", &|s| s.errors.reset.to_string());
    row(&mut o, "closed before responding", &|s| {
        s.errors.closed.to_string()
    });
    row(&mut o, "timeout", &|s| s.errors.timeout.to_string());
    row(&mut o, "short body", &|s| s.errors.short_body.to_string());
    row(&mut o, "malformed", &|s| s.errors.malformed.to_string());
    row(&mut o, "length differs from the first", &|s| {
        s.errors.length_mismatch.to_string()
    });
    row(&mut o, "in flight at end", &|s| {
        s.in_flight_at_end.to_string()
    });
    row(&mut o, "not sent (behind the rate)", &|s| {
        s.not_sent.to_string()
    });
    row(&mut o, "keep-alive reuses", &|s| {
        s.keep_alive_requests.to_string()
    });
    row(&mut o, "connections opened", &|s| s.connections.to_string());
    o.push_str("</table>\n");
    let _ = writeln!(
        o,
        "<p class=\"note\">Latency counts from each request's start (closed loop) or its intended send time (open loop) to the last byte of the response. Generated by stoa bench {}.</p>\n</body></html>",
        env!("CARGO_PKG_VERSION")
    );
    o
}

/// Most points a scatter draws: past it, every k-th request of the log
/// is drawn, and every failure and every response slower than the run's
/// p99 (up to as many again), so the outliers stay visible.
pub const SCATTER_MAX: usize = 20_000;

/// Reads the per-request log back for the scatter: (start s, latency ms,
/// failed) per request, sampled past [`SCATTER_MAX`]. A line that does not
/// parse is skipped (the log is the run's own, but a disk may fill up).
pub fn scatter_from_log(path: &std::path::Path, s: &Summary) -> Vec<(f64, f64, bool)> {
    use std::io::BufRead;
    let Ok(f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let stride = (s.requests as usize).div_ceil(SCATTER_MAX).max(1);
    let slow = s.latency_ms.map_or(f64::MAX, |l| l.p99);
    let mut out = Vec::new();
    let mut extra = 0;
    for (i, line) in std::io::BufReader::new(f).lines().skip(1).enumerate() {
        let Ok(line) = line else { break };
        let mut it = line.splitn(4, ',');
        let (Some(t), Some(l), Some(st)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let (Ok(t), Ok(l)) = (t.parse::<f64>(), l.parse::<f64>()) else {
            continue;
        };
        let failed = !st.bytes().all(|b| b.is_ascii_digit());
        if i % stride == 0 {
            out.push((t, l, failed));
        } else if (failed || l > slow) && extra < SCATTER_MAX {
            extra += 1;
            out.push((t, l, failed));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice_numbers() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(0.7, 5.0), 0.2);
        assert_eq!(nice_step(12345.0, 5.0), 5000.0);
        assert_eq!(fmt_tick(25000.0), "25k");
        assert_eq!(fmt_tick(0.25), "0.25");
    }

    #[test]
    fn an_empty_run_still_renders_a_page() {
        let p = page(&[Summary::default()]);
        assert!(p.contains("no data"));
        assert!(p.ends_with("</html>\n"));
    }
}
