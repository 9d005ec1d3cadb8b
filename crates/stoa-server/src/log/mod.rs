//! The server's logs: the access log's lines ([`access`]), the error log
//! (where `tracing` events go: stderr or a file, plain or JSON), the one
//! function every log file is opened with ([`open_append`]), reopening
//! them all on SIGUSR1 ([`reopen`]), and a limiter that logs a repeating
//! error once with a count ([`Repeats`]). A leaf: it imports nothing of
//! the server's.

pub mod access;

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Opens a log file for appending. Every log file, access or error, is
/// opened here and nowhere else (at start, on a reload, on SIGUSR1): in
/// one process by [`open_here`]; in the server child of a privileged
/// parent by the opener start-up installs ([`set_opener`]), which has the
/// parent open it as root and pass it back, so that the unprivileged
/// server needs no right to the file or its directory.
pub fn open_append(path: &Path) -> io::Result<File> {
    match OPENER.get() {
        Some(open) => open(path),
        None => open_here(path),
    }
}

/// How log files are opened when not by this process itself.
static OPENER: OnceLock<fn(&Path) -> io::Result<File>> = OnceLock::new();

/// Makes [`open_append`] call `open` (once, at start-up: the layers above
/// know whether there is a privileged parent; this leaf does not).
pub(crate) fn set_opener(open: fn(&Path) -> io::Result<File>) {
    let _ = OPENER.set(open);
}

/// Opens a log file for appending as this process, creating it (mode
/// 0644 less the umask, as nginx does) when missing.
pub(crate) fn open_here(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

/// Bumped by [`reopen`]: each worker compares it with the generation its
/// access-log files were opened in, before its next write.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The generation of log files current now.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// SIGUSR1 (nginx's `reopen`, logrotate's `postrotate`): the error log is
/// reopened now, and every worker reopens its access-log files before it
/// next writes. Lines buffered before the signal go to the new file; no
/// line is written twice or lost, since a worker writes a buffer to one
/// file, whole, and only then swaps files.
pub fn reopen() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let mut e = lock_error_log();
    if let Some(path) = e.path.clone() {
        match open_append(&path) {
            Ok(f) => e.file = Some(f),
            Err(err) => {
                let msg = format!("error log {}: cannot reopen: {err}", path.display());
                let line = e.format_line(Level::ERROR, &msg, "");
                e.write(&line);
            }
        }
    }
}

/// The error log's destination and format.
struct ErrorLog {
    /// None: stderr.
    path: Option<PathBuf>,
    file: Option<File>,
    json: bool,
}

static ERROR_LOG: Mutex<ErrorLog> = Mutex::new(ErrorLog {
    path: None,
    file: None,
    json: false,
});

fn lock_error_log() -> std::sync::MutexGuard<'static, ErrorLog> {
    // A panic while logging leaves the state usable.
    ERROR_LOG.lock().unwrap_or_else(|p| p.into_inner())
}

/// `[log] error` and `error_format`: where `tracing` events go from now
/// on (None: stderr) and whether as JSON. A file is opened at once, so
/// a path that cannot be opened is an error for whoever configured it.
pub fn set_error_log(path: Option<&Path>, json: bool) -> io::Result<()> {
    let file = path.map(open_append).transpose()?;
    let mut e = lock_error_log();
    e.path = path.map(Path::to_path_buf);
    e.file = file;
    e.json = json;
    Ok(())
}

impl ErrorLog {
    fn format_line(&self, level: Level, message: &str, fields: &str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let mut line = String::with_capacity(64 + message.len() + fields.len());
        if self.json {
            let mut b = Vec::with_capacity(line.capacity());
            b.extend_from_slice(b"{\"time\":\"");
            b.extend_from_slice(iso_time(now, true).as_bytes());
            b.extend_from_slice(b"\",\"level\":\"");
            b.extend_from_slice(level.as_str().as_bytes());
            b.extend_from_slice(b"\",\"message\":");
            access::json_str(&mut b, message.as_bytes());
            b.extend_from_slice(fields.as_bytes());
            b.extend_from_slice(b"}\n");
            return String::from_utf8_lossy(&b).into_owned();
        }
        let _ = write!(
            line,
            "{} {:>5} {message}{fields}",
            iso_time(now, true),
            level.as_str()
        );
        // A message is one line: a newline inside cannot forge another.
        if line.contains('\n') {
            line = line.replace('\n', "\\n");
        }
        line.push('\n');
        line
    }

    fn write(&mut self, line: &str) {
        let ok = match self.file.as_mut() {
            Some(f) => f.write_all(line.as_bytes()).is_ok(),
            None => false,
        };
        if !ok {
            let _ = io::stderr().lock().write_all(line.as_bytes());
        }
    }
}

/// `2026-11-26T14:01:44.123456Z` (`micros`) or `2026-11-26T14:01:44+00:00`.
pub fn iso_time(since_epoch: Duration, micros: bool) -> String {
    let secs = since_epoch.as_secs();
    let (y, m, d) = civil(secs / 86400);
    let rem = secs % 86400;
    if micros {
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
            rem / 3600,
            rem / 60 % 60,
            rem % 60,
            since_epoch.subsec_micros()
        )
    } else {
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00",
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        )
    }
}

/// Year, month (1-12) and day of the month of a day since 1970-01-01
/// (civil-from-days, proleptic Gregorian).
pub fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// The `tracing` layer that writes events to the error log.
pub struct ErrorLayer;

impl<S: Subscriber> Layer<S> for ErrorLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let json = lock_error_log().json;
        let mut v = Fields {
            message: String::new(),
            rest: String::new(),
            json,
        };
        event.record(&mut v);
        let mut e = lock_error_log();
        let line = e.format_line(*event.metadata().level(), &v.message, &v.rest);
        e.write(&line);
    }
}

/// An event's message and its other fields (` key=value`, or `,"key":"value"`
/// in JSON).
struct Fields {
    message: String,
    rest: String,
    json: bool,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else if self.json {
            let mut b = Vec::new();
            b.push(b',');
            access::json_str(&mut b, field.name().as_bytes());
            b.push(b':');
            access::json_str(&mut b, format!("{value:?}").as_bytes());
            self.rest.push_str(&String::from_utf8_lossy(&b));
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.record_debug(field, &value);
        }
    }
}

/// Installs the error log as `tracing`'s subscriber: events at `filter`
/// (an `EnvFilter` directive such as `info` or `stoa_server=debug`) or
/// above, to stderr until [`set_error_log`] names a file.
pub fn init(filter: tracing_subscriber::EnvFilter) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(ErrorLayer)
        .try_init();
}

/// How often a repeating error is logged: once, then once per
/// [`REPEAT_INTERVAL`] with how many times it happened meanwhile.
pub const REPEAT_INTERVAL: Duration = Duration::from_secs(10);

/// A repeating error logged once with a count (`accept: Too many open
/// files` would otherwise be logged 20 times a second, each worker).
pub struct Repeats {
    /// Each message seen lately: when it was last logged, and how many
    /// times it happened since without being logged.
    seen: Mutex<Vec<(String, Instant, u64)>>,
    interval: Duration,
}

impl Repeats {
    pub const fn new(interval: Duration) -> Repeats {
        Repeats {
            seen: Mutex::new(Vec::new()),
            interval,
        }
    }

    /// Another `what` happened at `now`: `Some(n)` when it is to be logged
    /// now, `n` being how many were not logged since the last one; `None`
    /// when it is only counted.
    pub fn hit(&self, what: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, since, n)) = seen.iter_mut().find(|(w, _, _)| w == what) {
            if now.duration_since(*since) < self.interval {
                *n += 1;
                return None;
            }
            let missed = *n;
            *since = now;
            *n = 0;
            return Some(missed);
        }
        if seen.len() >= 64 {
            // Bounded: messages that vary (an address in them) must not
            // grow the list for ever.
            seen.retain(|(_, since, _)| now.duration_since(*since) < self.interval);
            if seen.len() >= 64 {
                seen.remove(0);
            }
        }
        seen.push((what.to_owned(), now, 0));
        Some(0)
    }

    /// The messages whose interval has passed with repeats not yet said,
    /// each with its count (reset): so the last of a burst is said too,
    /// not only when the error comes back.
    pub fn due(&self, now: Instant) -> Vec<(String, u64)> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for (what, since, n) in seen.iter_mut() {
            if *n > 0 && now.duration_since(*since) >= self.interval {
                out.push((what.clone(), *n));
                *since = now;
                *n = 0;
            }
        }
        out
    }

    /// Logs the counts [`Repeats::due`] gives (called once a second).
    pub fn flush(&self) {
        for (what, n) in self.due(Instant::now()) {
            tracing::warn!(
                "{what} (repeated {n} times in the last {} s)",
                self.interval.as_secs()
            );
        }
    }

    /// [`Repeats::hit`], and the message written to the log when it is due
    /// (with ", repeated N times" when some were not written).
    pub fn warn(&self, what: &str) {
        if let Some(n) = self.hit(what, Instant::now()) {
            if n == 0 {
                tracing::warn!("{what}");
            } else {
                tracing::warn!(
                    "{what} (repeated {n} times in the last {} s)",
                    self.interval.as_secs()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeating error: the first is logged, the next ones within the
    /// interval are counted, and the first after it is logged with the
    /// count (what nginx does not do, and 40 lines a second would be).
    #[test]
    fn a_repeating_error_is_logged_once_per_interval_with_a_count() {
        let r = Repeats::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(r.hit("accept: EMFILE", t0), Some(0));
        for i in 1..=40 {
            assert_eq!(
                r.hit("accept: EMFILE", t0 + Duration::from_millis(i * 25)),
                None
            );
        }
        // Another message is its own.
        assert_eq!(r.hit("accept: ENFILE", t0), Some(0));
        assert_eq!(
            r.hit("accept: EMFILE", t0 + Duration::from_secs(10)),
            Some(40)
        );
        assert_eq!(r.hit("accept: EMFILE", t0 + Duration::from_secs(11)), None);
        assert_eq!(
            r.hit("accept: EMFILE", t0 + Duration::from_secs(21)),
            Some(1)
        );
    }

    #[test]
    fn iso_times_are_utc() {
        assert_eq!(iso_time(Duration::ZERO, false), "1970-01-01T00:00:00+00:00");
        assert_eq!(
            iso_time(Duration::from_micros(951_782_400_000_042), true),
            "2000-02-29T00:00:00.000042Z"
        );
    }

    #[test]
    fn error_lines_are_one_line_plain_or_json() {
        let plain = ErrorLog {
            path: None,
            file: None,
            json: false,
        };
        let l = plain.format_line(Level::WARN, "cgi /x: a\nb", " k=1");
        assert!(l.ends_with("  WARN cgi /x: a\\nb k=1\n"), "{l}");
        assert_eq!(l.matches('\n').count(), 1);
        let json = ErrorLog {
            json: true,
            ..plain
        };
        let l = json.format_line(Level::ERROR, "fastcgi \"php\"\n", ",\"k\":\"1\"");
        let v: serde_json::Value = serde_json::from_str(l.trim_end()).expect("JSON");
        assert_eq!(v["level"], "ERROR");
        assert_eq!(v["message"], "fastcgi \"php\"\n");
        assert_eq!(v["k"], "1");
        assert!(v["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    }

    /// Lines written before a reopen stay in the moved file, lines after
    /// go to the new one (logrotate's `create` + `postrotate`).
    #[test]
    fn open_append_appends_and_creates() {
        let dir = std::env::temp_dir().join(format!("stoa-log-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join("a.log");
        let _ = std::fs::remove_file(&p);
        open_append(&p)
            .expect("create")
            .write_all(b"1\n")
            .expect("write");
        open_append(&p)
            .expect("open")
            .write_all(b"2\n")
            .expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"1\n2\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
