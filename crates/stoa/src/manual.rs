//! Manual pages and shell completions, generated from the clap definition
//! of the command line (`stoa man`, `stoa completions SHELL`). They are
//! produced on demand by the binary rather than by a build script, so an
//! ordinary build pays nothing for them and a packaged binary can always
//! regenerate the pages that match it exactly.

use clap::Command;
use clap_mangen::roff::{bold, roman, Inline, Roff};
use clap_mangen::Man;
use std::io::{self, Write};

/// One manual page: its file name (`stoa-serve.1`) and its roff source.
pub struct Page {
    pub file: String,
    pub roff: Vec<u8>,
}

/// Every page: stoa(1), one per visible subcommand (stoa-serve(1), ...),
/// and stoa-bench(1), which is written from the load generator's own
/// help text since its ab/wrk-style arguments are not parsed by clap.
pub fn pages(cli: Command) -> io::Result<Vec<Page>> {
    // The `help` subcommand is clap's own; it gets no page.
    let mut cli = cli.disable_help_subcommand(true);
    // Fills in display and bin names ("stoa serve", "stoa-serve").
    cli.build();
    let mut pages = vec![Page {
        file: "stoa.1".into(),
        roff: tidy(main_page(&cli)?, &cli),
    }];
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let roff = if sub.get_name() == "bench" {
            bench_page()
        } else {
            let mut out = Vec::new();
            Man::new(sub.clone()).render(&mut out)?;
            see_also(&mut out, &["stoa(1)"])?;
            out
        };
        pages.push(Page {
            file: format!("stoa-{}.1", sub.get_name()),
            roff: tidy(roff, &cli),
        });
    }
    Ok(pages)
}

/// Writes the completion script for `shell` (bash, zsh, fish, elvish,
/// powershell) for the whole command line.
pub fn completions(shell: clap_complete::Shell, mut cli: Command, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut cli, "stoa", out);
}

const DESCRIPTION: &str = "\
Stoa is a web server and application gateway. It serves static files over \
HTTP/1.1 and HTTP/2, with TLS; runs CGI/1.1 scripts and FastCGI \
applications in pools it spawns and supervises (or at addresses such as \
php-fpm's); proxies to pools of HTTP application servers; and answers \
server-side includes and embedded Lua handlers in-process. Its load \
generator, stoa bench, measures it.

A configuration file (stoa.toml, TOML) names the listeners, sites, routes, \
pools and limits; stoa check validates one and reports each problem as \
file:line: key: message. The keys are described in CONFIG.md (installed \
under /usr/share/doc/stoa by the Debian package).

Started as root, Stoa binds its listeners and opens its log files, then \
runs as the configured user (default nobody).";

/// (signal, what Stoa does on it): the same table as CONFIG.md's.
const SIGNALS: &[(&str, &str)] = &[
    (
        "SIGHUP",
        "Re-read the configuration (started as root, the root parent reads it, with \
         its certificates and keys). If it is valid, new connections and the next \
         request on open ones use it; if not, the error is logged and the running \
         configuration stays.",
    ),
    (
        "SIGQUIT",
        "Graceful stop: stop accepting, close idle connections, let every response \
         in progress finish, then exit 0.",
    ),
    (
        "SIGTERM, SIGINT",
        "Fast stop: the same, but responses in progress get at most \
         limits.shutdown_timeout.",
    ),
    (
        "SIGUSR1",
        "Reopen every log file (after logrotate moved them): the privileged parent \
         reopens its error log and passes the signal on, and the server process's \
         files are reopened through it. Pool state is on the status page.",
    ),
    (
        "SIGUSR2",
        "Binary upgrade: start the binary at the path Stoa was started from on the \
         same listening sockets; once it is ready, this process stops gracefully.",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "/etc/stoa/stoa.toml",
        "The configuration the Debian package installs and its systemd unit reads.",
    ),
    (
        "/var/log/stoa/",
        "Access logs of the packaged configuration.",
    ),
    (
        "/usr/lib/systemd/system/stoa.service",
        "The systemd unit: systemctl reload stoa sends SIGHUP.",
    ),
    (
        "/tmp/stoa-PID/",
        "Sockets of the FastCGI processes Stoa spawns, removed when it stops.",
    ),
];

const ENVIRONMENT: &[(&str, &str)] = &[(
    "STOA_LOG",
    "Which server events are logged to stderr: an env_filter expression such as \
     debug or info,stoa_server=debug (default info).",
)];

const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "Stopped as asked (serve), or the file is valid (check).",
    ),
    (
        "1",
        "The configuration is invalid, a listener could not be bound, or the \
         command failed.",
    ),
    ("2", "The command line was wrong."),
];

fn main_page(cli: &Command) -> io::Result<Vec<u8>> {
    let man = Man::new(cli.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    let mut roff = Roff::default();
    roff.control("SH", ["DESCRIPTION"]);
    paragraphs(&mut roff, DESCRIPTION);
    roff.to_writer(&mut out)?;
    man.render_options_section(&mut out)?;
    man.render_subcommands_section(&mut out)?;
    let mut roff = Roff::default();
    for (title, entries) in [
        ("SIGNALS", SIGNALS),
        ("FILES", FILES),
        ("ENVIRONMENT", ENVIRONMENT),
        ("EXIT STATUS", EXIT_STATUS),
    ] {
        roff.control("SH", [title]);
        for (name, text) in entries {
            roff.control("TP", []);
            roff.text([bold(*name)]);
            roff.text([roman(*text)]);
        }
    }
    roff.to_writer(&mut out)?;
    let mut also: Vec<String> = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| format!("stoa-{}(1)", s.get_name()))
        .collect();
    also.push("systemd.service(5)".into());
    let also: Vec<&str> = also.iter().map(String::as_str).collect();
    see_also(&mut out, &also)?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// stoa-bench(1) from `stoa bench --help`: its first line is the NAME,
/// the `Usage:` block the SYNOPSIS, the closing paragraph the
/// DESCRIPTION, and every other `Heading:` block a section kept as
/// written (no fill), since its option columns are aligned by hand.
fn bench_page() -> Vec<u8> {
    let mut lines = stoa_bench::HELP.lines();
    let name = lines
        .next()
        .and_then(|l| l.strip_prefix("stoa bench: "))
        .unwrap_or("an HTTP/1.x load generator");
    // (heading, its lines as written), and the text outside any block.
    let mut blocks: Vec<(String, Vec<&str>)> = Vec::new();
    let mut prose = String::new();
    let mut in_block = false;
    for line in lines {
        if let Some(heading) = line.strip_suffix(':').filter(|h| !h.starts_with(' ')) {
            // "ApacheBench options (short flags may be bundled: -kc10)":
            // the remark in brackets becomes the block's first line.
            let (title, remark) = match heading.split_once(" (") {
                Some((t, r)) => (t, Some(r.trim_end_matches(')'))),
                None => (heading, None),
            };
            let title = if title == "Usage" {
                "SYNOPSIS".to_string()
            } else {
                title.to_uppercase()
            };
            blocks.push((title, remark.into_iter().collect()));
            in_block = true;
        } else if line.is_empty() {
            in_block = false;
        } else if let (true, Some((_, body))) = (in_block, blocks.last_mut()) {
            body.push(line.strip_prefix("  ").unwrap_or(line));
        } else {
            prose.push_str(line);
            prose.push(' ');
        }
    }
    let mut roff = Roff::default();
    // The rest of the title line is written by `tidy`.
    roff.control("TH", ["stoa-bench", "1"]);
    roff.control("SH", ["NAME"]);
    roff.text([roman(format!("stoa-bench - {name}"))]);
    let (synopsis, rest): (Vec<_>, Vec<_>) = blocks.iter().partition(|(t, _)| t == "SYNOPSIS");
    let literal = |roff: &mut Roff, (title, body): &(String, Vec<&str>)| {
        roff.control("SH", [title.as_str()]);
        roff.control("nf", []);
        for l in body {
            roff.text([roman(*l)]);
        }
        roff.control("fi", []);
    };
    for b in synopsis {
        literal(&mut roff, b);
    }
    if !prose.is_empty() {
        roff.control("SH", ["DESCRIPTION"]);
        roff.text([roman(prose.trim_end())]);
    }
    for b in rest {
        literal(&mut roff, b);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("stoa"),
        roman("(1), "),
        bold("ab"),
        roman("(1), and BENCH.md in the Stoa documentation."),
    ]);
    roff.render().into_bytes()
}

/// The title line's source: "stoa 0.1.0" on every page, subcommands'
/// included.
fn source(cli: &Command) -> String {
    format!("stoa {}", cli.get_version().unwrap_or_default())
}

/// Every page's finishing touches:
/// - each piece rendered on its own starts with the roff crate's two-line
///   preamble (defining the apostrophe string): the page needs it once;
/// - the title line gets an empty date, quoted (the roff crate drops an
///   empty argument, which moves the source into the date's place): the
///   version tells which release a page belongs to, and a date written
///   here would go stale.
fn tidy(page: Vec<u8>, cli: &Command) -> Vec<u8> {
    let text = String::from_utf8_lossy(&page);
    let mut seen = false;
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n');
    while let Some(line) = lines.next() {
        if line.starts_with(".ie \\n(.g .ds Aq") {
            let second = lines.next().unwrap_or_default();
            if !seen {
                out.push_str(line);
                out.push_str(second);
                seen = true;
            }
        } else if let Some(args) = line.strip_prefix(".TH ") {
            let mut args = args.split_whitespace();
            let name = args.next().unwrap_or("stoa");
            let section = args.next().unwrap_or("1");
            let source = source(cli);
            out.push_str(&format!(
                ".TH {name} {section} \"\" \"{source}\" \"Stoa Manual\"\n"
            ));
        } else {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

fn paragraphs(roff: &mut Roff, text: &str) {
    for (i, p) in text.split("\n\n").enumerate() {
        if i > 0 {
            roff.control("PP", []);
        }
        roff.text([roman(p.replace('\n', " "))]);
    }
}

fn see_also(out: &mut Vec<u8>, pages: &[&str]) -> io::Result<()> {
    let mut roff = Roff::default();
    roff.control("SH", ["SEE ALSO"]);
    let mut text: Vec<Inline> = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let (name, section) = page.split_once('(').unwrap_or((page, ")"));
        if i > 0 {
            text.push(roman(", "));
        }
        text.push(bold(name));
        text.push(roman(format!("({section}")));
    }
    roff.text(text);
    roff.to_writer(out)
}
