//! `stoa bench`: the load generator.
//!
//! - [`cli`]: ApacheBench/wrk-compatible arguments, resolved into a [`plan::Plan`]
//!   (with a [`scenario`] file when given).
//! - [`engine`]: per-thread mio event loops driving the clients.
//! - [`record`]: counters and HdrHistograms; [`run`]: threads, the
//!   per-second collector, the summary.
//! - [`report`]: text (ab, wrk), JSON, HTML with SVG plots, `compare`.
//! - [`tree`]: `stoa bench tree`, a WebBench-like workload tree.
//! - [`merge`]: `stoa bench merge`, one result from runs that ran together.
//! - [`threshold`]: `--threshold 'p99<20ms'`, pass/fail checks for CI.

pub mod cli;
pub mod engine;
pub mod h2;
pub mod h3;
pub mod merge;
pub mod plan;
pub mod quic;
pub mod record;
pub mod report;
pub mod run;
pub mod scenario;
pub mod threshold;
pub mod transport;
pub mod tree;
pub mod util;

use cli::{CliError, Options};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

pub const HELP: &str = "\
stoa bench: an HTTP/1.x and HTTP/2 load generator, over TCP or TLS
(ApacheBench, wrk and h2load compatible)

Usage:
  stoa bench [options] URL
  stoa bench --scenario FILE [options] [URL]
  stoa bench compare A.json B.json ... [--html FILE] [--json FILE] [--each]
  stoa bench tree DIR [--size 61MB] [--seed S]
  stoa bench merge [--hdr-log OUT] [--json OUT] A.hdr B.hdr ... [A.json B.json ...]

compare groups repeated runs of a target (the same --name, or the same URL,
clients and keep-alive): a column per group, median (min-max) of its runs;
--each gives every run its own column.

ApacheBench options (short flags may be bundled: -kc10):
  -n N             requests to perform (default 1 unless a time limit is given)
  -c N             concurrent clients (connections) (default 1)
  -k               keep connections alive (HTTP/1.1 persistent; with --http1.0,
                   Connection: Keep-Alive); without -k every request closes
  -t SECONDS       time limit (unlike ab, does not imply -n 50000)
  -s SECONDS       per-request timeout, counted as a failure (default 30)
  -p FILE          POST the file's contents (with -T)
  -u FILE          PUT the file's contents (with -T)
  -T TYPE          Content-Type of -p/-u (default text/plain)
  -H 'Name: value' extra header (repeatable; replaces Host, User-Agent, Connection)
  -C 'name=value'  cookie (repeatable)
  -A USER:PASS     Basic authentication
  -i               HEAD instead of GET
  -m METHOD        request method
  -l               responses of different lengths are not failures
  -r               accepted for ab compatibility (receive errors never stop a run)
  --http1.0        send HTTP/1.0 requests (ab's protocol)

TLS, HTTP/2 and HTTP/3 (https:// URLs; curl's and h2load's meanings):
  --cacert FILE    check the certificate against these CA certificates (PEM)
                   instead of the system's
  --insecure       do not check the certificate (curl -k; -k is keep-alive here)
  --tls-resume     resume TLS sessions on new connections (default: every new
                   connection is a full handshake; without -k: handshakes/s)
  --http2, --h2    HTTP/2: ALPN h2 over https://, prior knowledge over http://;
                   one request in flight per connection (h2load -m 1)
  --max-concurrent-streams N, --streams N
                   HTTP/2 and HTTP/3: N requests in flight per connection
                   (h2load -m N): -c connections carry -c x N clients; over
                   HTTP/2 no more streams open than the server's
                   SETTINGS_MAX_CONCURRENT_STREAMS
  --http3, --h3    HTTP/3 over QUIC (ALPN h3, https:// only; UDP to the URL's
                   port); --cacert/--insecure as for TLS

wrk options:
  -d DURATION      run for this long (10s, 2m); prints a wrk-style report
  --threads N      event-loop threads (default 1); clients are dealt round-robin
  --latency        print the latency distribution (wrk-style report)
  --rate R         open loop: R requests per second in total, latency counted
                   from each request's intended send time (no coordinated omission)
  --corrected      closed loop: also report latencies corrected for coordinated
                   omission (the requests each client would have sent during a
                   slow response, at its observed rate, are back-filled)

Output:
  --threshold EXPR pass/fail check, repeatable (k6's thresholds):
                   METRIC[{URL}] OP VALUE; METRIC: p50 p90 p95 p99 p99.9 mean
                   max (us, ms, s; default ms), errors, non_2xx (a count, or a
                   share with %), rps; {URL}: one entry of the per-URL
                   breakdown ('p99{/cgi-bin/x}<20ms'); OP: < <= > >=.
                   A failed one makes the exit status 3
  --name NAME      the run's name in the JSON; compare groups runs by it
  --json FILE      machine-readable summary with the per-second timeline
  --html FILE      an HTML report with SVG plots
  --hdr-log FILE   HdrHistogram interval log (one histogram per second, us)
  --log FILE       per-request log, CSV: start_s,latency_ms,status,bytes,client,
                   connect_ms,tls_ms,first_byte_ms,transfer_ms,url
                   (buffered per thread); with --html, a scatter of every request
  -q, --quiet      no live progress (it is shown only on a terminal anyway)

Scenarios:
  --scenario FILE  TOML: stages or a ramp of clients, think time, request mix,
                   form bodies, timeouts, abort rules (docs/BENCH.md)
  --seed S         seed for think times and the mix (default 1, or the scenario's)
  --running-every N  the running mean and deviation every N responses (BENCH4)
  --first-delay D  closed loop: wait D before each client's first request, or
                   MIN,MAX for a seeded uniform draw per client (0s,2s)

Every request ends in exactly one outcome, counted by kind: a complete response
(by status), connect refused, connect error, reset, closed before responding,
timeout, short body, malformed, tls; requests still in flight when a timed run ends
are reported apart. Exit status: 0 done, 1 run-time error (or no response at
all), 2 usage error, 3 a --threshold failed.
";

/// Entry point for `stoa bench ARGS...`; `args[0]` is "stoa bench".
pub fn main(args: Vec<OsString>) -> ExitCode {
    install_sigint();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let tty = stderr.is_terminal();
    let code = run_with(&args, &mut stdout.lock(), &mut stderr.lock(), tty);
    ExitCode::from(code)
}

/// Runs `stoa bench` with its output going to `out` and `err` (no live
/// progress); returns the exit status. Used by the tests.
pub fn run(args: &[OsString], out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    run_with(args, out, err, false)
}

fn install_sigint() {
    extern "C" fn on_sigint(_: libc::c_int) {
        engine::INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe; `signal` is given a valid extern "C" function.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
}

fn run_with(args: &[OsString], out: &mut dyn Write, err: &mut dyn Write, tty: bool) -> u8 {
    let mut strs = Vec::new();
    for a in args.iter().skip(1) {
        match a.to_str() {
            Some(s) => strs.push(s.to_string()),
            None => {
                let _ = writeln!(err, "stoa bench: argument {a:?} is not UTF-8");
                return 2;
            }
        }
    }
    let result = match strs.first().map(String::as_str) {
        Some("compare") => report::compare::main(&strs[1..], out),
        Some("tree") => tree::main(&strs[1..], out),
        Some("merge") => merge::main(&strs[1..], out),
        Some("help") => {
            let _ = out.write_all(HELP.as_bytes());
            Ok(0)
        }
        _ => bench(&strs, out, err, tty),
    };
    match result {
        Ok(code) => code,
        Err(CliError::Usage(m)) => {
            let _ = writeln!(err, "stoa bench: {m}\nTry 'stoa bench --help'.");
            2
        }
        Err(CliError::Fatal(m)) => {
            let _ = writeln!(err, "stoa bench: {m}");
            1
        }
    }
}

fn write_file(path: &std::path::Path, data: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, data).map_err(|e| CliError::Fatal(format!("{}: {e}", path.display())))
}

fn bench(
    args: &[String],
    out: &mut dyn Write,
    err: &mut dyn Write,
    tty: bool,
) -> Result<u8, CliError> {
    let opts = Options::parse(args)?;
    if opts.help {
        let _ = out.write_all(HELP.as_bytes());
        return Ok(0);
    }
    if opts.version {
        let _ = writeln!(out, "stoa bench {}", env!("CARGO_PKG_VERSION"));
        return Ok(0);
    }
    let plan = opts.plan()?;
    let first_path = plan.requests.first().map_or("/", |r| r.path.as_str());
    let thresholds = plan.thresholds.clone();
    if let Some(u) = threshold::unknown_url(&thresholds, &plan.groups, first_path) {
        let names = if plan.groups.len() > 1 {
            plan.groups.join(", ")
        } else {
            first_path.to_string()
        };
        return Err(CliError::Usage(format!(
            "--threshold: no URL {u:?} in the run (its URLs: {names})"
        )));
    }
    // Open the output files first: a typo should not cost a whole run.
    let mut hdr_file = match &opts.hdr_log {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p)
                .map_err(|e| CliError::Fatal(format!("{}: {e}", p.display())))?,
        )),
        None => None,
    };
    for p in [&opts.json, &opts.html].into_iter().flatten() {
        std::fs::File::create(p).map_err(|e| CliError::Fatal(format!("{}: {e}", p.display())))?;
    }
    let request_log = match &opts.request_log {
        Some(p) => {
            let mut f = std::fs::File::create(p)
                .map_err(|e| CliError::Fatal(format!("{}: {e}", p.display())))?;
            f.write_all(b"start_s,latency_ms,status,bytes,client,connect_ms,tls_ms,first_byte_ms,transfer_ms,url\n")
                .map_err(|e| CliError::Fatal(format!("{}: {e}", p.display())))?;
            Some(f)
        }
        None => None,
    };
    raise_nofile(plan.concurrency);
    if !opts.wrk_style() {
        let _ = writeln!(
            out,
            "This is stoa bench {} (ApacheBench-compatible report)",
            env!("CARGO_PKG_VERSION")
        );
        let _ = writeln!(out, "Benchmarking {} (be patient)", plan.target.host);
        let _ = out.flush();
    }
    let progress = tty && !opts.quiet;
    let summary = run::run(
        plan,
        run::Sinks {
            hdr_log: hdr_file.as_mut().map(|f| f as &mut dyn Write),
            progress: if progress { Some(err) } else { None },
            request_log,
        },
    );
    let mut summary = summary;
    summary.name = opts.name.clone();
    summary.thresholds = threshold::check_all(&thresholds, &summary);
    summary.command_line = Some(
        std::iter::once("stoa bench".to_string())
            .chain(args.iter().map(|a| util::shell_quote(a)))
            .collect::<Vec<_>>()
            .join(" "),
    );
    if let Some(p) = &opts.request_log {
        summary.request_log = Some(p.display().to_string());
        if opts.html.is_some() {
            // The scatter of every request (sampled past a bound) comes
            // from the log just written.
            summary.scatter = report::html::scatter_from_log(p, &summary);
        }
    }
    if let Some(mut f) = hdr_file {
        f.flush()
            .map_err(|e| CliError::Fatal(format!("hdr log: {e}")))?;
    }
    let text = if opts.wrk_style() {
        report::text::wrk(&summary, opts.latency)
    } else {
        format!("\n\n{}", report::text::ab(&summary))
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    if let Some(p) = &opts.json {
        let j = serde_json::to_vec_pretty(&summary).map_err(|e| CliError::Fatal(e.to_string()))?;
        write_file(p, &j)?;
    }
    if let Some(p) = &opts.html {
        write_file(
            p,
            report::html::page(std::slice::from_ref(&summary)).as_bytes(),
        )?;
    }
    if let (Some(e), true) = (&summary.protocol_error, summary.failed > 0) {
        eprintln!("stoa bench: {e} (the first such failure)");
    }
    if let Some(e) = &summary.request_log_error {
        return Err(CliError::Fatal(format!(
            "{}: writing the request log failed: {e}",
            summary.request_log.as_deref().unwrap_or("log")
        )));
    }
    // Not a single response: the run measured nothing (unless an abort
    // rule stopped it, which is its result: BENCH1 stops at the first
    // response over 3 s, and may stop before any).
    if summary.responses == 0 && summary.abort.is_none() {
        let e = &summary.errors;
        let why = if summary.failed == 0 && summary.in_flight_at_end > 0 {
            "every request was still in flight when the run ended"
        } else if summary.failed == 0 {
            "no request was made"
        } else if e.connect_refused > 0 {
            "connection refused"
        } else if e.connect > 0 {
            "could not connect"
        } else if e.tls > 0 {
            return Err(CliError::Fatal(format!(
                "no response from {}:{}: {}{}",
                summary.host,
                summary.port,
                summary
                    .tls
                    .as_ref()
                    .and_then(|t| t.error.as_deref())
                    .unwrap_or("TLS failed"),
                if summary.tls.as_ref().is_some_and(|t| {
                    !t.insecure
                        && t.error
                            .as_deref()
                            .is_some_and(|e| e.contains("invalid peer certificate"))
                }) {
                    " (give the server's CA with --cacert FILE, or skip the check with --insecure)"
                } else {
                    ""
                }
            )));
        } else if e.timeout > 0 {
            "every request timed out"
        } else {
            "every request failed"
        };
        return Err(CliError::Fatal(format!(
            "no response from {}:{}: {why}",
            summary.host, summary.port
        )));
    }
    // k6 exits 99 when a threshold fails; 3 here, after 1 and 2.
    if summary.thresholds.iter().any(|t| !t.pass) {
        return Ok(3);
    }
    Ok(0)
}

/// Raises the soft limit on open files to what the run needs (or the hard
/// limit), quietly: the run reports connect errors if it is still short.
fn raise_nofile(conns: u64) {
    let want = conns.saturating_add(64);
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit get a valid pointer to a local rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 && rl.rlim_cur < want {
            rl.rlim_cur = (want as libc::rlim_t).min(rl.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}
