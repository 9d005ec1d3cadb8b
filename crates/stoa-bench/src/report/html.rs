//! The HTML report: one self-contained page (no scripts, no external files)
//! with SVG plots of one run or of several side by side.

use super::Summary;
use std::fmt::Write as _;

/// Sixteen colours told apart side by side (Tableau's ten, then darker
/// ones), so that a comparison of up to 16 runs or servers repeats none.
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#000000",
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
    /// Linear, for counts (clients): ticks on whole numbers only.
    Count,
    /// Percentiles on the 1/(1-p) log scale of HdrHistogram plots.
    Percentile,
    /// A log10 scale (the latency histogram's milliseconds).
    Log,
}

/// Where `x` goes on the axis (before scaling to pixels).
fn axis_x(xaxis: XAxis, x: f64) -> f64 {
    match xaxis {
        XAxis::Linear | XAxis::Count => x,
        XAxis::Percentile => pct_x(x),
        XAxis::Log if x > 0.0 => x.log10(),
        XAxis::Log => f64::NAN,
    }
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
        .map(|(x, y)| (axis_x(xaxis, x), y))
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
    // Time starts at 0; the percentile axis at 0% and reaches 99%; a log
    // axis spans whole decades.
    if xaxis == XAxis::Log {
        x0 = x0.floor();
        x1 = x1.ceil();
    } else {
        x0 = x0.min(0.0);
    }
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
        XAxis::Linear | XAxis::Count => {
            let mut step = nice_step(x1 - x0, 6.0);
            if xaxis == XAxis::Count {
                // 1.5 clients means nothing.
                step = step.max(1.0).round();
            }
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
        XAxis::Log => {
            let mut k = x0;
            while k <= x1 + 1e-9 {
                let px = sx(k);
                let _ = write!(
                    o,
                    r##"<line x1="{px:.1}" y1="{mt}" x2="{px:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
                    mt + ph,
                    mt + ph + 16.0,
                    fmt_tick(10f64.powf(k))
                );
                k += 1.0;
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
            let x = axis_x(xaxis, x);
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
            let x = axis_x(xaxis, x);
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
    } else if !s.label.is_empty() {
        format!("{} ", s.label)
    } else {
        let name = s
            .settings
            .scenario
            .clone()
            .unwrap_or_else(|| format!("{}:{}", s.host, s.port));
        format!("run {} ({name}) ", i + 1)
    }
}

/// The figures that matter first: requests, successful rate, error
/// share, p50/p90/p95/p99/p99.9 and bytes per second; tiles for one run, a table for
/// several.
fn headline(o: &mut String, runs: &[Summary]) {
    let figs = |s: &Summary| -> Vec<(&'static str, String)> {
        let l = s.latency_ms;
        let pct = if s.requests > 0 {
            100.0 * s.failed as f64 / s.requests as f64
        } else {
            0.0
        };
        vec![
            ("requests", s.requests.to_string()),
            ("successful / s", format!("{:.1}", s.success_rate())),
            ("errors", format!("{pct:.2} %")),
            ("p50 ms", l.map_or("-".into(), |l| format!("{:.3}", l.p50))),
            ("p90 ms", l.map_or("-".into(), |l| format!("{:.3}", l.p90))),
            ("p95 ms", l.map_or("-".into(), |l| format!("{:.3}", l.p95))),
            ("p99 ms", l.map_or("-".into(), |l| format!("{:.3}", l.p99))),
            (
                "p99.9 ms",
                l.map_or("-".into(), |l| format!("{:.3}", l.p999)),
            ),
            (
                "received / s",
                human_bytes(s.bytes.received as f64 / s.duration_s.max(1e-9)),
            ),
        ]
    };
    if runs.len() == 1 {
        o.push_str("<div class=\"head\">");
        for (k, v) in figs(&runs[0]) {
            let _ = write!(o, "<div><b>{}</b><span>{}</span></div>", esc(&v), esc(k));
        }
        o.push_str("</div>\n");
        return;
    }
    o.push_str("<table>\n");
    let names: Vec<String> = figs(&Summary::default())
        .into_iter()
        .map(|f| f.0.to_string())
        .collect();
    table_row(o, "", &names);
    for (i, s) in runs.iter().enumerate() {
        let vals: Vec<String> = figs(s).into_iter().map(|f| f.1).collect();
        let name = label(s, i, runs.len());
        table_row(o, name.trim_end(), &vals);
    }
    o.push_str("</table>\n");
}

/// Bytes per second in binary units.
fn human_bytes(x: f64) -> String {
    if x >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GiB", x / 1024.0 / 1024.0 / 1024.0)
    } else if x >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", x / 1024.0 / 1024.0)
    } else if x >= 1024.0 {
        format!("{:.1} KiB", x / 1024.0)
    } else {
        format!("{x:.0} B")
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
.fail{{color:#b00;font-weight:bold}} .pass{{color:#070}}\
.head{{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0 4px}} .head div{{background:#fff;border:1px solid #ddd;padding:8px 14px;min-width:110px}}\
.head b{{display:block;font-size:22px}} .head span{{font-size:12px;color:#555}} code{{font-size:12px}}\
</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    headline(&mut o, runs);
    groups_table(&mut o, runs);
    thresholds_tables(&mut o, runs);
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
    if n > 1 {
        row(&mut o, "name", &|s| s.label.clone());
    }
    row(&mut o, "URL", &|s| s.url.clone());
    row(&mut o, "command line", &|s| {
        s.command_line.clone().unwrap_or_else(|| "-".into())
    });
    row(&mut o, "started (UTC)", &|s| {
        s.start_time.clone().unwrap_or_else(|| "-".into())
    });
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
    row(&mut o, "latency p50 / p90 / p95 / p99 / p99.9 (ms)", &|s| {
        s.latency_ms.map_or("-".into(), |l| {
            format!(
                "{:.3} / {:.3} / {:.3} / {:.3} / {:.3}",
                l.p50, l.p90, l.p95, l.p99, l.p999
            )
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
    // A run keeps its colour in every chart of a comparison (its second
    // series dashed); a single run's series get a colour each.
    let color = |i: usize| COLORS[i % COLORS.len()];
    let pick = |i: usize, k: usize| if n == 1 { color(k) } else { color(i) };
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
            color: pick(i, 0),
            dashed: false,
            dots: false,
            points: s.timeline.iter().map(|x| (mid(x), x.rps)).collect(),
        });
        if s.timeline.iter().any(|x| x.errors > 0) {
            thr.push(Series {
                name: format!("{l}errors/s"),
                color: pick(i, 1),
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
            color: pick(i, 0),
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
            color: pick(i, 1),
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
            color: pick(i, 0),
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
            color: pick(i, 1),
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
    let (mut codes, mut bps) = (Vec::new(), Vec::new());
    for (i, s) in runs.iter().enumerate() {
        let l = label(s, i, n);
        let mid = |x: &super::Second| x.t + x.length_s / 2.0;
        let mut keys: Vec<&String> = s.timeline.iter().flat_map(|x| x.status.keys()).collect();
        keys.sort();
        keys.dedup();
        for (k, code) in keys.into_iter().enumerate() {
            codes.push(Series {
                name: format!("{l}{code}"),
                color: pick(i, k),
                dashed: n > 1 && k > 0,
                dots: false,
                points: s
                    .timeline
                    .iter()
                    .map(|x| {
                        let c = x.status.get(code).copied().unwrap_or(0);
                        (mid(x), c as f64 / x.length_s.max(1e-9))
                    })
                    .collect(),
            });
        }
        if s.timeline.iter().any(|x| x.errors > 0) {
            codes.push(Series {
                name: format!("{l}failed"),
                color: if n == 1 { "#d62728" } else { color(i) },
                dashed: true,
                dots: false,
                points: s
                    .timeline
                    .iter()
                    .map(|x| (mid(x), x.errors as f64 / x.length_s.max(1e-9)))
                    .collect(),
            });
        }
        bps.push(Series {
            name: format!("{l}received"),
            color: color(i),
            dashed: false,
            dots: false,
            points: s
                .timeline
                .iter()
                .map(|x| (mid(x), x.bytes as f64 / x.length_s.max(1e-9) / 1048576.0))
                .collect(),
        });
    }
    o.push_str(&chart(
        "Status codes per second",
        "time (s)",
        "responses per second",
        &codes,
        XAxis::Linear,
    ));
    o.push_str(&chart(
        "Bytes received per second",
        "time (s)",
        "MiB/s",
        &bps,
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
    let mut hist = Vec::new();
    for (i, s) in runs.iter().enumerate() {
        // A step outline over the bins, as shares of the responses, so
        // that runs of different sizes compare.
        let total: u64 = s.latency_histogram.iter().map(|b| b.2).sum();
        let mut pts = Vec::new();
        for &(lo, hi, c) in &s.latency_histogram {
            let share = 100.0 * c as f64 / total.max(1) as f64;
            pts.push((lo, share));
            pts.push((hi, share));
        }
        hist.push(Series {
            name: format!("{}responses", label(s, i, n)),
            color: color(i),
            dashed: false,
            dots: false,
            points: pts,
        });
    }
    o.push_str(&chart(
        "Latency histogram",
        "ms (log scale)",
        "% of responses",
        &hist,
        XAxis::Log,
    ));
    o.push_str("</div>\n");
    clients_charts(&mut o, runs);
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
        let _ = writeln!(
            o,
            "<h2>Every request</h2><p class=\"note\">From the request log: each request's latency at the time it started{}. Bands of latencies show here.</p><div class=\"charts\">",
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
    phases_tables(&mut o, runs);
    urls_tables(&mut o, runs);
    let _ = writeln!(
        o,
        "<p class=\"note\">Latency counts from each request's start (closed loop) or its intended send time (open loop) to the last byte of the response. Generated by stoa bench {}.</p>\n</body></html>",
        env!("CARGO_PKG_VERSION")
    );
    o
}

/// Response time and throughput against the number of active clients:
/// each run's per-level table, and, comparing runs, each run as one point
/// at its clients (WebBench's requests/s against clients).
fn clients_charts(o: &mut String, runs: &[Summary]) {
    let n = runs.len();
    let color = |i: usize| COLORS[i % COLORS.len()];
    let pick = |i: usize, k: usize| if n == 1 { color(k) } else { color(i) };
    let mut rt = Vec::new();
    let mut tp = Vec::new();
    for (i, s) in runs.iter().enumerate() {
        // A fixed -c run's levels are its own and the few requests of
        // clients starting and leaving: nothing to plot.
        if s.levels.len() < 2 || !s.settings.varying_clients {
            continue;
        }
        let l = label(s, i, n);
        let pts = |f: &dyn Fn(&super::Level) -> Option<f64>| -> Vec<(f64, f64)> {
            s.levels
                .iter()
                .filter_map(|x| f(x).map(|v| (x.active as f64, v)))
                .collect()
        };
        rt.push(Series {
            name: format!("{l}mean"),
            color: pick(i, 0),
            dashed: false,
            dots: false,
            points: pts(&|x| x.mean_ms),
        });
        rt.push(Series {
            name: format!("{l}p99"),
            color: pick(i, 1),
            dashed: true,
            dots: false,
            points: pts(&|x| x.p99_ms),
        });
        if s.levels.iter().any(|x| x.rps.is_some()) {
            tp.push(Series {
                name: format!("{l}by level"),
                color: color(i),
                dashed: false,
                dots: false,
                points: pts(&|x| x.rps),
            });
        }
    }
    if n > 1 {
        // One line per server, through its runs at their clients (the
        // configured count, or the mean of a varying one); repeated runs
        // at the same clients give their median. Not one line through
        // every run, which zig-zags between servers.
        for (k, (name, pts)) in server_lines(runs).into_iter().enumerate() {
            tp.push(Series {
                name,
                color: COLORS[(tp.len() + k) % COLORS.len()],
                dashed: false,
                dots: pts.len() == 1,
                points: pts,
            });
        }
    }
    if rt.is_empty() && tp.is_empty() {
        return;
    }
    o.push_str("<h2>Against active clients</h2><p class=\"note\">Each request counts at the number of clients running when it started.</p><div class=\"charts\">\n");
    if !rt.is_empty() {
        o.push_str(&chart(
            "Response time against active clients",
            "clients",
            "ms",
            &rt,
            XAxis::Count,
        ));
    }
    if !tp.is_empty() {
        o.push_str(&chart(
            "Throughput against active clients",
            "clients",
            "successful responses per second",
            &tp,
            XAxis::Count,
        ));
    }
    o.push_str("</div>\n");
}

/// The runs of each server (the same `--name`, or the same URL) as one
/// line: (name, (clients, median successful responses per second) sorted
/// by clients), in the order each server's first run came.
fn server_lines(runs: &[Summary]) -> Vec<(String, Vec<(f64, f64)>)> {
    // (server, [(clients, the rates of its runs at that count)]).
    type Line = (String, Vec<(f64, Vec<Option<f64>>)>);
    let mut lines: Vec<Line> = Vec::new();
    for s in runs {
        let key = s.name.clone().unwrap_or_else(|| s.url.clone());
        let i = match lines.iter().position(|l| l.0 == key) {
            Some(i) => i,
            None => {
                lines.push((key, Vec::new()));
                lines.len() - 1
            }
        };
        let c = clients_of(s);
        let at = &mut lines[i].1;
        match at.iter_mut().find(|(x, _)| *x == c) {
            Some((_, v)) => v.push(Some(s.success_rate())),
            None => at.push((c, vec![Some(s.success_rate())])),
        }
    }
    lines
        .into_iter()
        .map(|(name, at)| {
            let mut pts: Vec<(f64, f64)> = at
                .into_iter()
                .filter_map(|(c, v)| super::compare::median_spread(&v).map(|m| (c, m.0)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (name, pts)
        })
        .collect()
}

/// A run's clients for a comparison: the configured count, or the mean
/// of a varying one (open loop: the mean in flight).
pub fn clients_of(s: &Summary) -> f64 {
    if s.settings.varying_clients || s.settings.open_loop {
        s.active_mean
    } else {
        s.settings.concurrency as f64
    }
}

/// Repeated runs of a target (`compare`'s groups), when some target has
/// more than one: a row per group, each figure the median of its runs
/// with their min–max.
fn groups_table(o: &mut String, runs: &[Summary]) {
    use super::compare::{fmt_short, groups, median_spread};
    let gs = groups(runs);
    if runs.len() < 2 || gs.len() == runs.len() {
        return;
    }
    type Figure<'a> = (&'a str, &'a dyn Fn(&Summary) -> Option<f64>);
    let figs: [Figure; 6] = [
        ("successful / s", &|s| Some(s.success_rate())),
        ("failed", &|s| Some(s.failed as f64)),
        ("p50 ms", &|s| s.latency_ms.map(|l| l.p50)),
        ("p90 ms", &|s| s.latency_ms.map(|l| l.p90)),
        ("p99 ms", &|s| s.latency_ms.map(|l| l.p99)),
        ("p99.9 ms", &|s| s.latency_ms.map(|l| l.p999)),
    ];
    o.push_str("<h2>Groups of repeated runs: median (min–max)</h2><table>\n");
    let mut head = vec!["runs".to_string()];
    head.extend(figs.iter().map(|f| f.0.to_string()));
    table_row(o, "", &head);
    for (key, idx) in &gs {
        let name = runs[idx[0]].name.clone().unwrap_or_else(|| key.clone());
        let mut cells = vec![idx
            .iter()
            .map(|&i| runs[i].label.as_str())
            .collect::<Vec<_>>()
            .join(", ")];
        for (_, f) in &figs {
            let vals: Vec<Option<f64>> = idx.iter().map(|&i| f(&runs[i])).collect();
            cells.push(match median_spread(&vals) {
                None => "-".into(),
                Some((m, lo, hi)) if lo == hi => fmt_short(m),
                Some((m, lo, hi)) => {
                    format!("{} ({}–{})", fmt_short(m), fmt_short(lo), fmt_short(hi))
                }
            });
        }
        table_row(o, &name, &cells);
    }
    o.push_str("</table>\n");
}

/// The `--threshold` checks, a table per run that has them; a failed
/// one in red.
fn thresholds_tables(o: &mut String, runs: &[Summary]) {
    let n = runs.len();
    for (i, s) in runs.iter().enumerate() {
        if s.thresholds.is_empty() {
            continue;
        }
        let passed = s.thresholds.iter().filter(|t| t.pass).count();
        let _ = writeln!(
            o,
            "<h2>{}Thresholds: {passed} of {} passed</h2><table>",
            esc(&label(s, i, n)),
            s.thresholds.len()
        );
        table_row(o, "", &["value", "result"].map(String::from));
        for t in &s.thresholds {
            let v = match (t.value, t.unit.as_str()) {
                (None, _) => t.why.clone().unwrap_or_else(|| "-".into()),
                (Some(v), "count") => format!("{v:.0}"),
                (Some(v), "req/s") => format!("{v:.1} /s"),
                (Some(v), u) => format!("{v:.3} {u}"),
            };
            let (cls, res) = if t.pass {
                ("pass", "pass")
            } else {
                ("fail", "FAIL")
            };
            let _ = writeln!(
                o,
                "<tr><th>{}</th><td>{}</td><td class=\"{cls}\">{res}</td></tr>",
                esc(&t.threshold),
                esc(&v)
            );
        }
        o.push_str("</table>\n");
    }
}

/// Where the requests' time went (`phases_ms`: connect, TLS, first
/// byte, transfer), a table per run that has it, with a bar of the mean
/// phases so that a TLS handshake's share shows at a glance.
fn phases_tables(o: &mut String, runs: &[Summary]) {
    let n = runs.len();
    for (i, s) in runs.iter().enumerate() {
        if let Some(m) = s.streams_limited_to {
            let _ = writeln!(
                o,
                "<p class=\"note\">{}The server allowed {m} concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS), fewer than the {} asked for: the rest waited.</p>",
                esc(&label(s, i, n)),
                s.settings.streams
            );
        }
        let Some(p) = &s.phases_ms else { continue };
        let rows = [
            ("connect", &p.connect, "#1f77b4"),
            ("TLS handshake", &p.tls, "#ff7f0e"),
            ("first byte", &p.first_byte, "#2ca02c"),
            ("transfer", &p.transfer, "#9467bd"),
        ];
        // h2load's spans: whole-request figures, not parts of the bar.
        let spans = [
            ("request (written to last byte)", &p.request),
            ("connection setup (connect + TLS)", &p.connection),
            ("connection to 1st byte", &p.connection_first_byte),
        ];
        if rows.iter().all(|r| r.1.is_none()) {
            continue;
        }
        let _ = writeln!(o, "<h2>{}Request phases</h2><table>", esc(&label(s, i, n)));
        table_row(
            o,
            "",
            &[
                "requests", "mean ms", "p50 ms", "p90 ms", "p99 ms", "max ms",
            ]
            .map(String::from),
        );
        for (name, r, _) in &rows {
            if let Some(r) = r {
                table_row(
                    o,
                    name,
                    &[
                        r.n.to_string(),
                        format!("{:.3}", r.mean),
                        format!("{:.3}", r.p50),
                        format!("{:.3}", r.p90),
                        format!("{:.3}", r.p99),
                        format!("{:.3}", r.max),
                    ],
                );
            }
        }
        for (name, r) in &spans {
            if let Some(r) = r {
                table_row(
                    o,
                    name,
                    &[
                        r.n.to_string(),
                        format!("{:.3}", r.mean),
                        format!("{:.3}", r.p50),
                        format!("{:.3}", r.p90),
                        format!("{:.3}", r.p99),
                        format!("{:.3}", r.max),
                    ],
                );
            }
        }
        o.push_str("</table>\n");
        // The mean of each phase, weighted by how many requests had it,
        // as one stacked bar: the time of an average request.
        let parts: Vec<(&str, f64, &str)> = rows
            .iter()
            .filter_map(|(name, r, c)| {
                let r = (*r).as_ref()?;
                let total = s.responses.max(r.n) as f64;
                Some((*name, r.mean * r.n as f64 / total.max(1.0), *c))
            })
            .filter(|p| p.1 > 0.0)
            .collect();
        let sum: f64 = parts.iter().map(|p| p.1).sum();
        if sum > 0.0 {
            let (w, h) = (640.0, 22.0);
            let _ = write!(
                o,
                "<svg width=\"{w}\" height=\"{}\" role=\"img\"><title>mean time per request by phase</title>",
                h + 20.0
            );
            let mut x = 0.0;
            for (name, v, c) in &parts {
                let bw = w * v / sum;
                let _ = write!(
                    o,
                    "<rect x=\"{x:.1}\" y=\"0\" width=\"{bw:.1}\" height=\"{h}\" fill=\"{c}\"><title>{}: {v:.3} ms</title></rect>",
                    esc(name)
                );
                x += bw;
            }
            let mut lx = 0.0;
            for (name, v, c) in &parts {
                let _ = write!(
                    o,
                    "<rect x=\"{lx:.0}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{c}\"/><text x=\"{:.0}\" y=\"{}\" font-size=\"11\">{} {v:.3} ms</text>",
                    h + 6.0,
                    lx + 13.0,
                    h + 15.0,
                    esc(name)
                );
                lx += 160.0;
            }
            o.push_str("</svg>\n<p class=\"note\">Mean time per complete response by phase (connect and TLS only on requests that opened a connection, spread over all).</p>\n");
        }
    }
}

/// The per-URL breakdown, a table per run.
fn urls_tables(o: &mut String, runs: &[Summary]) {
    let n = runs.len();
    for (i, s) in runs.iter().enumerate() {
        if s.urls.is_empty() {
            continue;
        }
        let _ = writeln!(o, "<h2>{}By URL</h2><table>", esc(&label(s, i, n)));
        table_row(
            o,
            "",
            &[
                "requests", "failed", "mean ms", "sd ms", "p50 ms", "p90 ms", "p95 ms", "p99 ms",
                "p99.9 ms", "max ms", "bytes",
            ]
            .map(String::from),
        );
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        for u in &s.urls {
            table_row(
                o,
                &u.name,
                &[
                    u.requests.to_string(),
                    u.errors.to_string(),
                    f(u.mean_ms),
                    f(u.stddev_ms),
                    f(u.p50_ms),
                    f(u.p90_ms),
                    f(u.p95_ms),
                    f(u.p99_ms),
                    f(u.p999_ms),
                    f(u.max_ms),
                    u.bytes.to_string(),
                ],
            );
        }
        o.push_str("</table>\n");
        if s.urls.iter().all(|u| u.phases_ms.is_none()) {
            continue;
        }
        let _ = writeln!(
            o,
            "<h2>{}Phases by URL (ms, p50 / p90 / p99)</h2><table>",
            esc(&label(s, i, n))
        );
        table_row(
            o,
            "",
            &["connect", "TLS", "first byte", "transfer", "request"].map(String::from),
        );
        for u in &s.urls {
            let p = u.phases_ms.unwrap_or_default();
            let cells = [p.connect, p.tls, p.first_byte, p.transfer, p.request].map(|r| {
                r.map_or("-".to_string(), |r| {
                    format!("{:.3} / {:.3} / {:.3}", r.p50, r.p90, r.p99)
                })
            });
            table_row(o, &u.name, &cells);
        }
        o.push_str("</table>\n");
    }
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
