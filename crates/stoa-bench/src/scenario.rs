//! Scenario files (`--scenario FILE`): the TOML format documented in
//! docs/BENCH.md. Parsing gives a [`Scenario`]; errors name file:line.

use crate::plan::{AbortRules, Load, Think};
use crate::util::{parse_duration, parse_size};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    run: RunT,
    clients: Option<ClientsT>,
    stages: Option<Vec<StageT>>,
    think: Option<ThinkT>,
    mix: Option<Vec<MixT>>,
    tree: Option<TreeT>,
    abort: Option<AbortT>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RunT {
    name: Option<String>,
    url: Option<String>,
    seed: Option<u64>,
    duration: Option<String>,
    requests: Option<u64>,
    threads: Option<usize>,
    keep_alive: Option<bool>,
    http: Option<String>,
    timeout: Option<String>,
    rate: Option<f64>,
    connections: Option<u64>,
    headers: Option<Vec<String>>,
    variable_length: Option<bool>,
    running_every: Option<u64>,
    thresholds: Option<Vec<String>>,
    insecure: Option<bool>,
    cacert: Option<String>,
    tls_resume: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientsT {
    start: Option<u64>,
    add: Option<u64>,
    every: Option<String>,
    max: Option<u64>,
    requests: Option<u64>,
    first_delay: Option<DelayT>,
}

/// `first_delay = "1s"` or `first_delay = ["0s", "2s"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DelayT {
    Fixed(String),
    Range(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StageT {
    // Spanned: an error names the line of the stage at fault, not the
    // first line that has a key of the same name.
    duration: toml::Spanned<String>,
    clients: toml::Spanned<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThinkT {
    distribution: String,
    time: Option<String>,
    min: Option<String>,
    max: Option<String>,
    mean: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MixT {
    path: String,
    weight: Option<u64>,
    method: Option<String>,
    form: Option<BTreeMap<String, String>>,
    body: Option<String>,
    body_file: Option<String>,
    content_type: Option<String>,
    headers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeT {
    dir: String,
    prefix: Option<String>,
    weight: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AbortT {
    latency_over: Option<String>,
    errors_over: Option<u64>,
    error_rate_over: Option<f64>,
}

/// One entry of the request mix, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct MixEntry {
    pub path: String,
    pub weight: u64,
    pub method: String,
    /// Body and its content type.
    pub body: Option<(Vec<u8>, String)>,
    /// The body is a file's bytes, sent as they are (no placeholders).
    pub body_is_file: bool,
    /// The per-URL breakdown's group (a tree's size class); `None`: the
    /// entry is its own group.
    pub group: Option<String>,
    pub headers: Vec<String>,
}

/// The per-URL group of a tree file: its size class when it is named as
/// `stoa bench tree` names them (`c1_00042.html`: class 1), else the tree.
fn tree_group(prefix: &str, rel: &str) -> String {
    let name = rel.rsplit('/').next().unwrap_or(rel).as_bytes();
    match name {
        [b'c', d @ b'0'..=b'9', b'_', ..] => {
            format!("{prefix} class {} files", *d as char)
        }
        _ => format!("{prefix} tree"),
    }
}

/// A parsed, checked scenario. `None` fields leave the CLI's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub url: Option<String>,
    pub seed: Option<u64>,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub threads: Option<usize>,
    pub keep_alive: Option<bool>,
    pub http10: Option<bool>,
    /// `http = "2"`.
    pub http2: Option<bool>,
    /// `http = "3"`: like `--http3`.
    pub http3: Option<bool>,
    /// TLS: like `--insecure`, `--cacert` (relative to the scenario's
    /// directory), `--tls-resume`.
    pub insecure: Option<bool>,
    pub cacert: Option<std::path::PathBuf>,
    pub tls_resume: Option<bool>,
    pub timeout: Option<Duration>,
    pub rate: Option<f64>,
    pub connections: Option<u64>,
    pub headers: Vec<String>,
    pub variable_length: Option<bool>,
    pub running_every: Option<u64>,
    pub load: Option<Load>,
    pub per_client: Option<u64>,
    pub first_delay: Option<(Duration, Duration)>,
    pub think: Think,
    pub mix: Vec<MixEntry>,
    pub abort: AbortRules,
    /// `[run] thresholds`: pass/fail checks (as `--threshold`).
    pub thresholds: Vec<crate::threshold::Threshold>,
}

/// A scenario error with its place: `file:line: message`.
fn at(path: &Path, src: &str, offset: Option<usize>, msg: &str) -> String {
    match offset {
        Some(o) => {
            let line = src[..o.min(src.len())].matches('\n').count() + 1;
            format!("{}:{line}: {msg}", path.display())
        }
        None => format!("{}: {msg}", path.display()),
    }
}

/// Offset of the first line that starts a key or table named `key`.
fn find_key(src: &str, key: &str) -> Option<usize> {
    let mut off = 0;
    for line in src.split_inclusive('\n') {
        let t = line.trim_start();
        let name = t.trim_start_matches('[').trim_start();
        if name.starts_with(key) && name[key.len()..].trim_start().starts_with(['=', ']', '.']) {
            return Some(off);
        }
        off += line.len();
    }
    None
}

fn dur(path: &Path, src: &str, key: &str, v: &str) -> Result<Duration, String> {
    parse_duration(v).ok_or_else(|| {
        at(
            path,
            src,
            find_key(src, key),
            &format!("{key} = {v:?}: not a duration (e.g. \"500ms\", \"3s\", \"2m\")"),
        )
    })
}

/// Lists every file under `dir`, sorted (so the mix is the same on every
/// machine), as paths relative to it with '/' separators.
pub fn walk_tree(dir: &Path) -> std::io::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(dir.join(&rel))?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let ft = e.file_type()?;
            let r = rel.join(e.file_name());
            if ft.is_dir() {
                stack.push(r);
            } else if ft.is_file() {
                let s = r
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                out.push((s, e.metadata()?.len()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Percent-encodes a path for a request line (keeps '/').
fn encode_path(p: &str) -> String {
    let mut o = String::new();
    for &b in p.as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let src = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the scenario: {e}", path.display()))?;
        Scenario::parse(path, &src)
    }

    pub fn parse(path: &Path, src: &str) -> Result<Scenario, String> {
        let f: File = toml::from_str(src).map_err(|e| {
            let msg = e.message().trim().to_string();
            at(path, src, e.span().map(|s| s.start), &msg)
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let r = &f.run;
        let mut s = Scenario {
            name: r.name.clone().unwrap_or_else(|| {
                path.file_stem()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
            url: r.url.clone(),
            seed: r.seed,
            requests: r.requests,
            threads: r.threads,
            keep_alive: r.keep_alive,
            rate: r.rate,
            connections: r.connections,
            headers: r.headers.clone().unwrap_or_default(),
            variable_length: r.variable_length,
            running_every: r.running_every,
            insecure: r.insecure,
            cacert: r.cacert.as_ref().map(|c| base.join(c)),
            tls_resume: r.tls_resume,
            ..Scenario::default()
        };
        if let Some(d) = &r.duration {
            s.duration = Some(dur(path, src, "duration", d)?);
        }
        for t in r.thresholds.iter().flatten() {
            let t = crate::threshold::parse(t).map_err(|e| {
                at(
                    path,
                    src,
                    find_key(src, "thresholds"),
                    &format!("thresholds: {e}"),
                )
            })?;
            s.thresholds.push(t);
        }
        if let Some(d) = &r.timeout {
            s.timeout = Some(dur(path, src, "timeout", d)?);
        }
        if let Some(h) = &r.http {
            s.http10 = Some(match h.as_str() {
                "1.0" => true,
                "1.1" | "2" | "3" => false,
                _ => {
                    return Err(at(
                        path,
                        src,
                        find_key(src, "http"),
                        "http must be \"1.0\", \"1.1\", \"2\" or \"3\"",
                    ))
                }
            });
            s.http2 = Some(h == "2");
            s.http3 = Some(h == "3");
        }
        if r.threads == Some(0) {
            return Err(at(
                path,
                src,
                find_key(src, "threads"),
                "threads must be at least 1",
            ));
        }
        if r.rate.is_some_and(|x| !(x > 0.0 && x.is_finite())) {
            return Err(at(
                path,
                src,
                find_key(src, "rate"),
                "rate must be a positive number of requests per second",
            ));
        }
        if f.clients.is_some() && f.stages.is_some() {
            return Err(at(
                path,
                src,
                find_key(src, "stages"),
                "use either [clients] or [[stages]], not both",
            ));
        }
        if let Some(c) = &f.clients {
            let start = c.start.unwrap_or(1);
            s.per_client = c.requests;
            s.first_delay = match &c.first_delay {
                None => None,
                Some(DelayT::Fixed(d)) => {
                    let d = dur(path, src, "first_delay", d)?;
                    Some((d, d))
                }
                Some(DelayT::Range(r)) => match r.as_slice() {
                    [a, b] => {
                        let (a, b) = (
                            dur(path, src, "first_delay", a)?,
                            dur(path, src, "first_delay", b)?,
                        );
                        if a > b {
                            return Err(at(
                                path,
                                src,
                                find_key(src, "first_delay"),
                                "first_delay: the first bound is above the second",
                            ));
                        }
                        Some((a, b))
                    }
                    _ => {
                        return Err(at(
                            path,
                            src,
                            find_key(src, "first_delay"),
                            "first_delay is a duration or [min, max]",
                        ))
                    }
                },
            };
            if c.requests == Some(0) {
                return Err(at(
                    path,
                    src,
                    find_key(src, "requests"),
                    "clients.requests must be at least 1",
                ));
            }
            s.load = Some(match (&c.every, c.add) {
                (Some(e), add) => {
                    let every = dur(path, src, "every", e)?;
                    if every.is_zero() {
                        return Err(at(
                            path,
                            src,
                            find_key(src, "every"),
                            "every must be longer than 0",
                        ));
                    }
                    Load::Ramp {
                        start,
                        add: add.unwrap_or(1),
                        every,
                        max: c.max.unwrap_or(0),
                    }
                }
                (None, Some(_)) => {
                    return Err(at(
                        path,
                        src,
                        find_key(src, "add"),
                        "add needs every = \"...\"",
                    ))
                }
                (None, None) => Load::Fixed(start),
            });
        }
        if let Some(st) = &f.stages {
            let mut stages = Vec::new();
            let mut prev = 0;
            for (i, t) in st.iter().enumerate() {
                let v = t.duration.get_ref();
                let d = parse_duration(v).ok_or_else(|| {
                    at(
                        path,
                        src,
                        Some(t.duration.span().start),
                        &format!(
                            "stage {}: duration = {v:?}: not a duration (e.g. \"500ms\", \"3s\", \"2m\")",
                            i + 1
                        ),
                    )
                })?;
                let clients = *t.clients.get_ref();
                if clients < prev {
                    return Err(at(
                        path,
                        src,
                        Some(t.clients.span().start),
                        &format!("stage {}: clients may only grow (from {prev} to {clients}); end the run instead", i + 1),
                    ));
                }
                prev = clients;
                stages.push((d, clients));
            }
            if stages.is_empty() {
                return Err(at(path, src, find_key(src, "stages"), "no stages"));
            }
            s.load = Some(Load::Stages { start: 0, stages });
        }
        if let Some(t) = &f.think {
            let need = |k: &str, v: &Option<String>| -> Result<Duration, String> {
                match v {
                    Some(v) => dur(path, src, k, v),
                    None => Err(at(
                        path,
                        src,
                        find_key(src, "think"),
                        &format!(
                            "think: distribution {:?} needs {k} = \"...\"",
                            t.distribution
                        ),
                    )),
                }
            };
            s.think = match t.distribution.as_str() {
                "constant" => Think::Constant(need("time", &t.time)?),
                "uniform" => {
                    let (a, b) = (need("min", &t.min)?, need("max", &t.max)?);
                    if a > b {
                        return Err(at(
                            path,
                            src,
                            find_key(src, "min"),
                            "think: min is above max",
                        ));
                    }
                    Think::Uniform(a, b)
                }
                "exponential" => Think::Exponential(
                    need("mean", &t.mean)?,
                    t.max
                        .as_ref()
                        .map(|m| dur(path, src, "max", m))
                        .transpose()?,
                ),
                other => {
                    return Err(at(
                        path,
                        src,
                        find_key(src, "distribution"),
                        &format!(
                        "think: unknown distribution {other:?} (constant, uniform, exponential)"
                    ),
                    ))
                }
            };
        }
        for m in f.mix.iter().flatten() {
            if !m.path.starts_with('/') {
                return Err(at(
                    path,
                    src,
                    find_key(src, "path"),
                    &format!("mix path {:?} must start with '/'", m.path),
                ));
            }
            if m.weight == Some(0) {
                return Err(at(
                    path,
                    src,
                    find_key(src, "weight"),
                    "weight must be at least 1",
                ));
            }
            let nbodies = [m.form.is_some(), m.body.is_some(), m.body_file.is_some()]
                .iter()
                .filter(|&&b| b)
                .count();
            if nbodies > 1 {
                return Err(at(
                    path,
                    src,
                    find_key(src, "path"),
                    &format!("{}: use one of form, body, body_file", m.path),
                ));
            }
            let body = if let Some(form) = &m.form {
                let enc: Vec<String> = form
                    .iter()
                    .map(|(k, v)| {
                        format!(
                            "{}={}",
                            crate::util::form_encode(k),
                            crate::util::form_encode_keeping_placeholders(v)
                        )
                    })
                    .collect();
                Some((
                    enc.join("&").into_bytes(),
                    m.content_type
                        .clone()
                        .unwrap_or_else(|| "application/x-www-form-urlencoded".into()),
                ))
            } else if let Some(b) = &m.body {
                Some((
                    b.clone().into_bytes(),
                    m.content_type
                        .clone()
                        .unwrap_or_else(|| "text/plain".into()),
                ))
            } else if let Some(bf) = &m.body_file {
                let p = base.join(bf);
                let b = std::fs::read(&p).map_err(|e| {
                    at(
                        path,
                        src,
                        find_key(src, "body_file"),
                        &format!("{}: {e}", p.display()),
                    )
                })?;
                Some((
                    b,
                    m.content_type
                        .clone()
                        .unwrap_or_else(|| "application/octet-stream".into()),
                ))
            } else {
                None
            };
            let method = m
                .method
                .clone()
                .unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.into())
                .to_ascii_uppercase();
            if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(at(
                    path,
                    src,
                    find_key(src, "method"),
                    &format!("bad method {method:?}"),
                ));
            }
            s.mix.push(MixEntry {
                path: m.path.clone(),
                weight: m.weight.unwrap_or(1),
                method,
                body,
                body_is_file: m.body_file.is_some(),
                group: None,
                headers: m.headers.clone().unwrap_or_default(),
            });
        }
        if let Some(t) = &f.tree {
            let dir = base.join(&t.dir);
            let files = walk_tree(&dir).map_err(|e| {
                at(
                    path,
                    src,
                    find_key(src, "dir"),
                    &format!("tree {}: {e}", dir.display()),
                )
            })?;
            if files.is_empty() {
                return Err(at(
                    path,
                    src,
                    find_key(src, "dir"),
                    &format!("tree {}: no files", dir.display()),
                ));
            }
            let mut prefix = t.prefix.clone().unwrap_or_else(|| "/".into());
            if !prefix.starts_with('/') {
                prefix.insert(0, '/');
            }
            if !prefix.ends_with('/') {
                prefix.push('/');
            }
            for (rel, _) in files {
                s.mix.push(MixEntry {
                    path: format!("{prefix}{}", encode_path(&rel)),
                    weight: t.weight.unwrap_or(1),
                    method: "GET".into(),
                    body: None,
                    body_is_file: false,
                    group: Some(tree_group(&prefix, &rel)),
                    headers: Vec::new(),
                });
            }
        }
        if let Some(a) = &f.abort {
            s.abort = AbortRules {
                latency_over: a
                    .latency_over
                    .as_ref()
                    .map(|v| dur(path, src, "latency_over", v))
                    .transpose()?,
                errors_over: a.errors_over,
                error_ratio_over: a.error_rate_over,
            };
            if a.error_rate_over.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
                return Err(at(
                    path,
                    src,
                    find_key(src, "error_rate_over"),
                    "error_rate_over is a ratio between 0 and 1",
                ));
            }
        }
        let _ = parse_size; // sizes are for `stoa bench tree`
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Scenario, String> {
        Scenario::parse(Path::new("s.toml"), src)
    }

    #[test]
    fn http_3_asks_for_http3_and_an_unknown_version_is_refused() {
        let s = parse("[run]\nurl = \"https://h/\"\nhttp = \"3\"\n").expect("parses");
        assert_eq!(
            (s.http3, s.http2, s.http10),
            (Some(true), Some(false), Some(false))
        );
        let e = parse("[run]\nurl = \"https://h/\"\nhttp = \"4\"\n").expect_err("refused");
        assert!(e.contains("\"3\""), "{e}");
    }

    #[test]
    fn bench1_parses_into_a_ramp_with_uniform_think_time_and_an_abort_rule() {
        let s = parse(
            r#"
[run]
url = "http://127.0.0.1:8080/"
seed = 7
timeout = "3s"

[clients]
start = 1
add = 1
every = "2s"
max = 100

[think]
distribution = "uniform"
min = "1s"
max = "8s"

[[mix]]
path = "/a"
weight = 3

[[mix]]
path = "/form"
form = { q = "hello world", n = "1" }

[abort]
latency_over = "3s"
"#,
        )
        .unwrap();
        assert_eq!(s.seed, Some(7));
        assert_eq!(
            s.load,
            Some(Load::Ramp {
                start: 1,
                add: 1,
                every: Duration::from_secs(2),
                max: 100
            })
        );
        assert_eq!(
            s.think,
            Think::Uniform(Duration::from_secs(1), Duration::from_secs(8))
        );
        assert_eq!(s.mix.len(), 2);
        assert_eq!(s.mix[1].method, "POST");
        assert_eq!(s.mix[1].body.as_ref().unwrap().0, b"n=1&q=hello+world");
        assert_eq!(s.abort.latency_over, Some(Duration::from_secs(3)));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("[run]\nseed = 1\n\n[think]\ndistribution = \"gauss\"\n").unwrap_err();
        assert!(e.starts_with("s.toml:5:"), "{e}");
        let e = parse("[run]\nsed = 1\n").unwrap_err();
        assert!(e.starts_with("s.toml:2:"), "{e}");
        let e = parse("[run]\nduration = \"soon\"\n").unwrap_err();
        assert!(e.starts_with("s.toml:2:"), "{e}");
        let e = parse("[[stages]]\nduration = \"1s\"\nclients = 5\n[[stages]]\nduration = \"1s\"\nclients = 2\n")
            .unwrap_err();
        assert!(e.contains("may only grow"), "{e}");
    }

    #[test]
    fn tree_files_are_grouped_by_their_size_class() {
        assert_eq!(tree_group("/t/", "d000/c1_00042.html"), "/t/ class 1 files");
        assert_eq!(tree_group("/t/", "c3_00001.html"), "/t/ class 3 files");
        assert_eq!(tree_group("/", "other/page.html"), "/ tree");
    }

    #[test]
    fn a_first_delay_is_a_duration_or_an_ordered_range() {
        let s = parse("[clients]\nstart = 2\nfirst_delay = \"1s\"\n").unwrap();
        let one = Duration::from_secs(1);
        assert_eq!(s.first_delay, Some((one, one)));
        let s = parse("[clients]\nfirst_delay = [\"0s\", \"1s\"]\n").unwrap();
        assert_eq!(s.first_delay, Some((Duration::ZERO, one)));
        let e = parse("[clients]\n\nfirst_delay = [\"2s\", \"1s\"]\n").unwrap_err();
        assert!(e.starts_with("s.toml:3:"), "{e}");
        let e = parse("[clients]\nfirst_delay = [\"1s\"]\n").unwrap_err();
        assert!(e.contains("[min, max]"), "{e}");
    }

    #[test]
    fn a_bad_stage_is_reported_at_its_own_line_not_the_first_stages() {
        let e = parse("[[stages]]\nduration = \"1s\"\nclients = 5\n\n[[stages]]\nduration = \"1s\"\nclients = 2\n")
            .unwrap_err();
        assert!(e.starts_with("s.toml:7:") && e.contains("stage 2"), "{e}");
        let e = parse("[run]\nduration = \"9s\"\n[[stages]]\nduration = \"1s\"\nclients = 5\n[[stages]]\nduration = \"soon\"\nclients = 6\n")
            .unwrap_err();
        assert!(e.starts_with("s.toml:7:") && e.contains("stage 2"), "{e}");
    }
}
