//! `stoa`: the command line. Thin on purpose: parsing arguments and
//! reporting errors; everything else is in the library crates.

mod manual;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use stoa_server::{Overrides, Source};

#[derive(Parser)]
#[command(
    name = "stoa",
    version,
    about = "Stoa: a web server and application gateway"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a directory or a configuration (with neither: demo/stoa.toml of the current directory, a source checkout's demo site).
    Serve {
        /// Directory to serve (replaces the root of the first site of --config).
        dir: Option<PathBuf>,
        /// Address to listen on, e.g. 127.0.0.1:8080 or [::1]:8080 (repeatable; replaces `listen`).
        #[arg(long, short = 'l', value_name = "ADDR")]
        listen: Vec<String>,
        /// Configuration file (stoa.toml).
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<PathBuf>,
        /// Worker threads; 0 = one per core.
        #[arg(long, short = 'w', value_name = "N")]
        workers: Option<usize>,
        /// Access log: a path, "-" for stdout, or "off" (replaces `log.access`).
        #[arg(long, value_name = "DEST")]
        access_log: Option<String>,
        /// Certificate chain (PEM): the --listen addresses speak TLS (default 127.0.0.1:8443).
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The certificate's private key (PEM).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Write a self-signed certificate for local testing: DIR/cert.pem and DIR/key.pem
    /// (CN the first name, valid 397 days from an hour ago).
    Cert {
        /// Directory to write into (created if missing).
        dir: PathBuf,
        /// Names the certificate is for (default: localhost, 127.0.0.1, ::1).
        names: Vec<String>,
    },
    /// Load generator (ApacheBench/wrk compatible); see `stoa bench --help`.
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Validate a configuration file and report every problem with file:line and key.
    Check {
        /// Configuration file.
        file: PathBuf,
    },
    /// Run one of the demo's FastCGI applications (a [[pool]] starts it with
    /// `command = ["{stoa}", "demo-app", NAME]`; fd 0 must be its listening socket).
    DemoApp {
        #[arg(value_enum)]
        app: DemoApp,
    },
    /// Print the manual page stoa(1) (roff), or write every page (stoa.1, stoa-serve.1, ...) into --dir.
    Man {
        /// Directory to write all the pages into (created if missing).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print the completion script for a shell (the Debian package installs bash's, zsh's and fish's).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DemoApp {
    /// The comments form, stored in SQLite (the file named by STOA_DEMO_COMMENTS_DB).
    Comments,
    /// A FastCGI Authorizer: HTTP Basic demo:demo gets through, anything else 401.
    Authorizer,
    /// The FastCGI paper's personalized-content application: STOA_PERSONALIZED_DB, _CONTENT,
    /// _MODE (cached: a kept connection and a cache of users; uncached: the kept connection only;
    /// per-request: a connection per request), _CACHE (users a process caches, least recently used
    /// discarded; 100000), _STATS (a directory for each process's cache counters).
    Personalized,
    /// The same, as a CGI program.
    PersonalizedCgi,
    /// The lab's dynamic-routes application: Select * as an HTML table (STOA_TABLE_DB: SQLite; STOA_TABLE_PG: PostgreSQL, for ?db=pg).
    Table,
}

/// The demo site's config: `demo/stoa.toml` under the working directory
/// (the root of a source checkout, where the README runs `stoa serve`).
/// Never a path of the machine the binary was built on: an installed
/// binary would otherwise serve (or fail on) whatever sits there.
fn demo_config() -> Option<PathBuf> {
    let here = Path::new("demo/stoa.toml");
    here.is_file().then(|| here.to_path_buf())
}

/// What bare `stoa serve` says where there is no demo to run.
const NOTHING_TO_SERVE: &str =
    "stoa: nothing to serve: no DIR, no --config, and no demo/stoa.toml in the current directory.
  stoa serve DIR                 serve a directory (http://127.0.0.1:8080/)
  stoa serve --config FILE       serve a configuration (see `stoa check FILE`)
  stoa serve                     from the root of a Stoa source checkout: the demo site";

/// `stoa man`: stoa(1) on stdout, or every page into `dir`, each path
/// printed as it is written.
fn man(dir: Option<&Path>) -> ExitCode {
    let written = manual::pages(Cli::command()).and_then(|pages| match dir {
        None => {
            let mut out = std::io::stdout().lock();
            // The first page is stoa(1).
            if let Some(p) = pages.first() {
                out.write_all(&p.roff)?;
            }
            out.flush()
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            for p in &pages {
                let path = dir.join(&p.file);
                std::fs::write(&path, &p.roff).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
                })?;
                println!("{}", path.display());
            }
            Ok(())
        }
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stoa man: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    // `stoa bench` has its own ab/wrk-compatible argument syntax: hand it
    // everything after the word `bench` untouched.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "bench") {
        let mut rest = vec![std::ffi::OsString::from("stoa bench")];
        rest.extend(args.into_iter().skip(2));
        return stoa_bench::main(rest);
    }
    // The error log: stderr until the configuration names a file.
    stoa_server::log::init(
        tracing_subscriber::EnvFilter::try_from_env("STOA_LOG").unwrap_or_else(|_| "info".into()),
    );
    let cli = Cli::parse();
    match cli.command {
        // Handled before clap parses (see above); listed for --help.
        Command::Bench { .. } => ExitCode::from(2),
        Command::Man { dir } => man(dir.as_deref()),
        Command::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            manual::completions(shell, Cli::command(), &mut out);
            match out.flush() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("stoa completions: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::DemoApp { app } => {
            let app = match app {
                DemoApp::Comments => stoa_demo::App::Comments,
                DemoApp::Authorizer => stoa_demo::App::Authorizer,
                DemoApp::Personalized => stoa_demo::App::Personalized,
                DemoApp::PersonalizedCgi => stoa_demo::App::PersonalizedCgi,
                DemoApp::Table => stoa_demo::App::Table,
            };
            match stoa_demo::run(app) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("stoa demo-app[{}]: {e}", std::process::id());
                    ExitCode::from(1)
                }
            }
        }
        Command::Cert { dir, names } => match stoa_server::cert::self_signed(&dir, &names) {
            Ok((cert, key)) => {
                println!("{}\n{}", cert.display(), key.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("stoa cert: {e}");
                ExitCode::from(1)
            }
        },
        // Started as root, the file is checked as root and again as the
        // user Stoa would serve as (`stoa_server::broker::check`).
        Command::Check { file } => match stoa_server::broker::check(
            &file,
            &Overrides {
                dry_run: true,
                ..Overrides::default()
            },
        ) {
            Ok(rt) => {
                for w in &rt.warnings {
                    eprintln!("warning: {w}");
                }
                println!(
                    "{}: ok ({} site(s), listening on {})",
                    file.display(),
                    rt.sites.len(),
                    rt.listen
                        .iter()
                        .map(|a| a.to_string())
                        .chain(rt.tls.iter().map(|(a, _)| format!("{a} (TLS)")))
                        .chain(
                            rt.unix
                                .paths
                                .iter()
                                .map(|p| format!("unix:{}", p.display()))
                        )
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        },
        Command::Serve {
            dir,
            listen,
            config,
            workers,
            access_log,
            tls_cert,
            tls_key,
        } => {
            let config = match (&dir, config) {
                (None, None) => match demo_config() {
                    Some(c) => Some(c),
                    None => {
                        eprintln!("{NOTHING_TO_SERVE}");
                        return ExitCode::from(2);
                    }
                },
                (_, c) => c,
            };
            let root = dir;
            let source = Source {
                config,
                overrides: Overrides {
                    root,
                    listen,
                    workers,
                    access_log,
                    tls_cert,
                    tls_key,
                    dry_run: false,
                },
            };
            match stoa_server::run(source, |addrs| {
                for (scheme, a) in addrs {
                    // Tests and scripts read this line to learn the port.
                    eprintln!("stoa: listening on {scheme}://{a}/");
                }
            }) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("stoa: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
