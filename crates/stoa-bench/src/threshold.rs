//! Pass/fail thresholds (`--threshold 'p99<20ms'`), k6's `thresholds` for
//! a CI job: each is checked against the run's summary when it ends, the
//! reports print a pass/fail table, the JSON carries it, and a failed one
//! makes the exit status 3.
//!
//! Syntax: `METRIC[{URL}] OP VALUE[UNIT]`, spaces allowed around the parts.
//!
//! - METRIC: a latency figure `p50`, `p90`, `p95`, `p99`, `p99.9` (or
//!   `p999`), `mean`, `max` (of complete responses, ms); `errors` (failed
//!   requests), `non_2xx` (complete responses outside 2xx, whole run only);
//!   `rps` (successful responses per second).
//! - `{URL}`: the figure of one entry of the per-URL breakdown, named as
//!   the report names it (`GET /cgi-bin/hello.sh`) or by its path alone
//!   (k6 filters a metric by tag in the same braces:
//!   `http_req_duration{url:...}`).
//! - OP: `<`, `<=`, `>`, `>=`.
//! - VALUE: a latency in `us`, `ms` (the default) or `s`; a count of errors,
//!   or with `%` their share of the requests that ended; requests per
//!   second bare or with `/s`.

use crate::report::Summary;
use serde::{Deserialize, Serialize};

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// A latency percentile, ms.
    Percentile(Pct),
    Mean,
    Max,
    /// Failed requests: a count, or a share of the requests (`%`).
    Errors {
        share: bool,
    },
    /// Complete responses outside 200..=299 (whole run only).
    Non2xx {
        share: bool,
    },
    /// Successful responses per second.
    Rps,
}

/// The percentiles the summary and each URL carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pct {
    P50,
    P90,
    P95,
    P99,
    P999,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Lt => value < limit,
            Op::Le => value <= limit,
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// One parsed `--threshold`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// As given.
    pub expr: String,
    pub metric: Metric,
    /// A per-URL threshold: the entry's name or path.
    pub url: Option<String>,
    pub op: Op,
    /// In the metric's unit: ms, a count, %, requests/s.
    pub limit: f64,
}

/// A threshold checked against a run (the JSON's `thresholds`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Checked {
    /// The threshold as given.
    pub threshold: String,
    /// `p99`, `mean`, `errors`, ...
    pub metric: String,
    /// The per-URL entry it was checked on (its name in `urls`); null for
    /// the whole run.
    pub url: Option<String>,
    pub op: String,
    pub limit: f64,
    /// `ms`, `%`, `count` or `req/s`.
    pub unit: String,
    /// The run's figure; null when there is none (no complete response
    /// for a latency, an unknown URL): the threshold then fails.
    pub value: Option<f64>,
    pub pass: bool,
    /// Why there is no value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Parses one threshold; the error quotes it and says what is wrong.
pub fn parse(expr: &str) -> Result<Threshold, String> {
    let bad = |why: &str| format!("{expr:?}: {why}");
    let s = expr.trim();
    let op_at = s
        .find(['<', '>'])
        .ok_or_else(|| bad("no comparison (<, <=, >, >=), e.g. 'p99<20ms'"))?;
    let (lhs, rest) = s.split_at(op_at);
    let (op, rhs) = if let Some(r) = rest.strip_prefix("<=") {
        (Op::Le, r)
    } else if let Some(r) = rest.strip_prefix(">=") {
        (Op::Ge, r)
    } else if let Some(r) = rest.strip_prefix('<') {
        (Op::Lt, r)
    } else if let Some(r) = rest.strip_prefix('>') {
        (Op::Gt, r)
    } else {
        return Err(bad("no comparison"));
    };
    let lhs = lhs.trim();
    let (name, url) = match lhs.split_once('{') {
        Some((n, u)) => {
            let u = u
                .strip_suffix('}')
                .ok_or_else(|| bad("a URL in braces ends with '}': 'p99{/path}<20ms'"))?
                .trim();
            if u.is_empty() {
                return Err(bad("empty URL in braces"));
            }
            (n.trim(), Some(u.to_string()))
        }
        None => (lhs, None),
    };
    let rhs = rhs.trim();
    // The number, then its unit.
    let split = rhs
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+'))
        .unwrap_or(rhs.len());
    let (num, unit) = rhs.split_at(split);
    let value: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| bad("the limit is not a non-negative number"))?;
    let unit = unit.trim();
    let latency = |value: f64| -> Result<f64, String> {
        match unit {
            "" | "ms" => Ok(value),
            "us" | "µs" => Ok(value / 1000.0),
            "s" => Ok(value * 1000.0),
            u => Err(bad(&format!("unit {u:?}: a latency is in us, ms or s"))),
        }
    };
    let (metric, limit) = match name {
        "mean" | "avg" => (Metric::Mean, latency(value)?),
        "max" => (Metric::Max, latency(value)?),
        "errors" | "non_2xx" => {
            let share = match unit {
                "%" => true,
                "" => false,
                u => return Err(bad(&format!("unit {u:?}: a count, or a share with %"))),
            };
            if share && value > 100.0 {
                return Err(bad("a share is at most 100%"));
            }
            if name == "errors" {
                (Metric::Errors { share }, value)
            } else {
                (Metric::Non2xx { share }, value)
            }
        }
        "rps" => {
            if !matches!(unit, "" | "/s") {
                return Err(bad(&format!(
                    "unit {unit:?}: requests per second, bare or /s"
                )));
            }
            (Metric::Rps, value)
        }
        p if p.starts_with('p') => {
            let q = match &p[1..] {
                "50" => Pct::P50,
                "90" => Pct::P90,
                "95" => Pct::P95,
                "99" => Pct::P99,
                "99.9" | "999" => Pct::P999,
                _ => return Err(bad("percentiles are p50, p90, p95, p99 and p99.9")),
            };
            (Metric::Percentile(q), latency(value)?)
        }
        "" => return Err(bad("no metric before the comparison")),
        m => {
            return Err(bad(&format!(
                "unknown metric {m:?} (p50 p90 p95 p99 p99.9 mean max errors non_2xx rps)"
            )))
        }
    };
    if url.is_some() && matches!(metric, Metric::Non2xx { .. }) {
        return Err(bad("non_2xx is counted for the whole run only"));
    }
    Ok(Threshold {
        expr: expr.to_string(),
        metric,
        url,
        op,
        limit,
    })
}

impl Threshold {
    fn metric_name(&self) -> String {
        match self.metric {
            Metric::Percentile(q) => match q {
                Pct::P50 => "p50",
                Pct::P90 => "p90",
                Pct::P95 => "p95",
                Pct::P99 => "p99",
                Pct::P999 => "p99.9",
            }
            .into(),
            Metric::Mean => "mean".into(),
            Metric::Max => "max".into(),
            Metric::Errors { .. } => "errors".into(),
            Metric::Non2xx { .. } => "non_2xx".into(),
            Metric::Rps => "rps".into(),
        }
    }

    fn unit(&self) -> &'static str {
        match self.metric {
            Metric::Percentile(_) | Metric::Mean | Metric::Max => "ms",
            Metric::Errors { share: true } | Metric::Non2xx { share: true } => "%",
            Metric::Errors { share: false } | Metric::Non2xx { share: false } => "count",
            Metric::Rps => "req/s",
        }
    }

    /// The names of `names` (the per-URL breakdown's) this threshold's URL
    /// designates: its name exactly, or its path (the name without the
    /// method).
    pub fn matches(url: &str, name: &str) -> bool {
        name == url || name.split_once(' ').is_some_and(|(_, path)| path == url)
    }

    /// Checks the threshold against a finished run.
    pub fn check(&self, s: &Summary) -> Checked {
        let (url, value, why) = match &self.url {
            None => {
                let v = whole_run(self.metric, s);
                let why = v.is_none().then(|| "no complete response".to_string());
                (None, v, why)
            }
            Some(u) => match s.urls.iter().find(|e| Threshold::matches(u, &e.name)) {
                Some(e) => {
                    let v = per_url(self.metric, e, s.duration_s);
                    let why = v.is_none().then(|| "no complete response".to_string());
                    (Some(e.name.clone()), v, why)
                }
                // A run of one request has no breakdown: its own path is
                // the whole run.
                None if s.urls.is_empty()
                    && (*u == s.path || u.ends_with(&format!(" {}", s.path))) =>
                {
                    let v = whole_run(self.metric, s);
                    let why = v.is_none().then(|| "no complete response".to_string());
                    (Some(u.clone()), v, why)
                }
                None => (
                    Some(u.clone()),
                    None,
                    Some(format!("no URL {u:?} in the run")),
                ),
            },
        };
        Checked {
            threshold: self.expr.clone(),
            metric: self.metric_name(),
            url,
            op: self.op.text().into(),
            limit: self.limit,
            unit: self.unit().into(),
            value,
            pass: value.is_some_and(|v| self.op.holds(v, self.limit)),
            why,
        }
    }
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn whole_run(m: Metric, s: &Summary) -> Option<f64> {
    let l = s.latency_ms;
    match m {
        Metric::Percentile(q) => l.map(|l| match q {
            Pct::P50 => l.p50,
            Pct::P90 => l.p90,
            Pct::P95 => l.p95,
            Pct::P99 => l.p99,
            Pct::P999 => l.p999,
        }),
        Metric::Mean => l.map(|l| l.mean),
        Metric::Max => l.map(|l| l.max),
        Metric::Errors { share: false } => Some(s.failed as f64),
        Metric::Errors { share: true } => Some(share(s.failed, s.requests)),
        Metric::Non2xx { share: false } => Some(s.non_2xx as f64),
        Metric::Non2xx { share: true } => Some(share(s.non_2xx, s.responses)),
        Metric::Rps => Some(s.success_rate()),
    }
}

fn per_url(m: Metric, u: &crate::report::UrlStats, duration_s: f64) -> Option<f64> {
    match m {
        Metric::Percentile(q) => match q {
            Pct::P50 => u.p50_ms,
            Pct::P90 => u.p90_ms,
            Pct::P95 => u.p95_ms,
            Pct::P99 => u.p99_ms,
            Pct::P999 => u.p999_ms,
        },
        Metric::Mean => u.mean_ms,
        Metric::Max => u.max_ms,
        Metric::Errors { share: false } => Some(u.errors as f64),
        Metric::Errors { share: true } => Some(share(u.errors, u.requests)),
        Metric::Rps => Some(u.responses as f64 / duration_s.max(1e-9)),
        // Refused by the parser.
        Metric::Non2xx { .. } => None,
    }
}

/// Checks every threshold against the run.
pub fn check_all(ts: &[Threshold], s: &Summary) -> Vec<Checked> {
    ts.iter().map(|t| t.check(s)).collect()
}

/// A threshold naming a URL that is not in the run's mix, before the run
/// (`groups`: the per-URL breakdown's names; `path`: a single request's).
pub fn unknown_url<'a>(ts: &'a [Threshold], groups: &[String], path: &str) -> Option<&'a str> {
    ts.iter().filter_map(|t| t.url.as_deref()).find(|u| {
        if groups.len() > 1 {
            !groups.iter().any(|g| Threshold::matches(u, g))
        } else {
            *u != path && !u.ends_with(&format!(" {path}"))
        }
    })
}

/// The pass/fail table of the text reports.
pub fn table(checked: &[Checked]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if checked.is_empty() {
        return o;
    }
    let w = checked
        .iter()
        .map(|c| c.threshold.chars().count())
        .max()
        .unwrap_or(0)
        .max(9);
    let _ = writeln!(o, "\nThresholds");
    let _ = writeln!(o, "  {:<w$} {:>14}  result", "threshold", "value");
    for c in checked {
        let v = match c.value {
            Some(v) => match c.unit.as_str() {
                "count" => format!("{v:.0}"),
                "%" => format!("{v:.3} %"),
                "req/s" => format!("{v:.1}/s"),
                _ => format!("{v:.3} ms"),
            },
            None => "-".into(),
        };
        let res = if c.pass { "pass" } else { "FAIL" };
        let _ = write!(o, "  {:<w$} {v:>14}  {res}", c.threshold);
        if let Some(why) = &c.why {
            let _ = write!(o, " ({why})");
        }
        o.push('\n');
    }
    let passed = checked.iter().filter(|c| c.pass).count();
    let _ = writeln!(o, "  {passed} of {} passed", checked.len());
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{LatencyMs, UrlStats};

    fn t(s: &str) -> Threshold {
        parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn k6_style_thresholds_parse_with_their_units() {
        let p = t("p99<20ms");
        assert_eq!(
            (p.metric, p.op, p.limit, p.url),
            (Metric::Percentile(Pct::P99), Op::Lt, 20.0, None)
        );
        assert_eq!(t("p99.9 <= 1.5s").limit, 1500.0);
        assert_eq!(t("p999<=1.5s").metric, Metric::Percentile(Pct::P999));
        assert_eq!(t("p95<250us").limit, 0.25);
        assert_eq!(t("mean < 3").limit, 3.0);
        assert_eq!(t("errors<0.1%").metric, Metric::Errors { share: true });
        assert_eq!(t("errors<=0").metric, Metric::Errors { share: false });
        assert_eq!(t("non_2xx<1%").metric, Metric::Non2xx { share: true });
        let r = t("rps>=1e4/s");
        assert_eq!((r.metric, r.op, r.limit), (Metric::Rps, Op::Ge, 10_000.0));
        let u = t("p99{/cgi-bin/hello.sh}<20ms");
        assert_eq!(u.url.as_deref(), Some("/cgi-bin/hello.sh"));
        assert_eq!(
            t("max{GET /a?b=1} > 2ms").url.as_deref(),
            Some("GET /a?b=1")
        );
    }

    #[test]
    fn a_malformed_threshold_says_what_is_wrong() {
        for (s, why) in [
            ("p99 20ms", "no comparison"),
            ("p98<20ms", "percentiles are"),
            ("p99<20m", "unit \"m\""),
            ("errors<5ms", "a count, or a share"),
            ("errors<150%", "at most 100%"),
            ("latency<2", "unknown metric"),
            ("<2", "no metric"),
            ("p99{/a<2", "ends with '}'"),
            ("p99{}<2", "empty URL"),
            ("p99<-1", "not a non-negative number"),
            ("non_2xx{/a}<1", "whole run only"),
            ("rps>5 per s", "requests per second"),
        ] {
            let e = parse(s).expect_err(s);
            assert!(e.contains(why), "{s}: {e}");
            assert!(e.starts_with(&format!("{s:?}: ")), "{e}");
        }
    }

    fn summary() -> Summary {
        Summary {
            requests: 1000,
            responses: 998,
            failed: 2,
            non_2xx: 10,
            duration_s: 2.0,
            path: "/".into(),
            latency_ms: Some(LatencyMs {
                p50: 1.0,
                p90: 4.0,
                p95: 6.0,
                p99: 19.0,
                p999: 40.0,
                mean: 2.0,
                max: 50.0,
                ..LatencyMs::default()
            }),
            urls: vec![
                UrlStats {
                    name: "GET /cgi-bin/hello.sh".into(),
                    requests: 100,
                    responses: 99,
                    errors: 1,
                    p99_ms: Some(25.0),
                    ..UrlStats::default()
                },
                UrlStats {
                    name: "GET /index.html".into(),
                    requests: 900,
                    responses: 899,
                    errors: 1,
                    p99_ms: None,
                    ..UrlStats::default()
                },
            ],
            ..Summary::default()
        }
    }

    #[test]
    fn thresholds_pass_or_fail_on_the_runs_figures() {
        let s = summary();
        let c = |e: &str| t(e).check(&s);
        assert!(c("p99<20ms").pass);
        assert!(!c("p99<19ms").pass);
        assert!(c("p99<=19ms").pass);
        assert!(c("errors<0.5%").pass, "2 of 1000 is 0.2 %");
        assert!(!c("errors<0.1%").pass);
        assert!(!c("errors<2").pass);
        assert_eq!(c("non_2xx<=10").value, Some(10.0));
        // (998 - 0 length failures) / 2 s.
        assert_eq!(c("rps>400").value, Some(499.0));
        let u = c("p99{/cgi-bin/hello.sh}<20ms");
        assert_eq!(
            (u.url.as_deref(), u.value, u.pass),
            (Some("GET /cgi-bin/hello.sh"), Some(25.0), false)
        );
        assert_eq!(c("errors{GET /cgi-bin/hello.sh}<=1%").value, Some(1.0));
        // No sample fails, and says why.
        let n = c("p99{/index.html}<20ms");
        assert!(!n.pass && n.value.is_none());
        assert_eq!(n.why.as_deref(), Some("no complete response"));
        let x = c("p99{/nope}<20ms");
        assert!(!x.pass);
        assert!(x.why.as_deref().is_some_and(|w| w.contains("/nope")));
        let none = Summary {
            latency_ms: None,
            ..summary()
        };
        assert!(!t("mean<1s").check(&none).pass);
    }

    #[test]
    fn a_url_outside_the_mix_is_found_before_the_run() {
        let ts = [t("p99{/a}<1"), t("p99{GET /b}<1"), t("p99<1")];
        let groups = ["GET /a".to_string(), "GET /b".to_string()];
        assert_eq!(unknown_url(&ts, &groups, "/a"), None);
        assert_eq!(unknown_url(&ts, &groups[..1], "/a"), Some("GET /b"));
        assert_eq!(unknown_url(&ts[..1], &[], "/a"), None);
    }

    #[test]
    fn the_table_gives_each_threshold_its_value_and_result() {
        let s = summary();
        let checked = check_all(&[t("p99<20ms"), t("errors<0.1%")], &s);
        let tab = table(&checked);
        assert!(tab.contains("p99<20ms"), "{tab}");
        assert!(tab.contains("19.000 ms  pass"), "{tab}");
        assert!(tab.contains("0.200 %  FAIL"), "{tab}");
        assert!(tab.contains("1 of 2 passed"), "{tab}");
    }
}
