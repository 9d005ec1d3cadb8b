//! The Stoa server. Layers, top to bottom (docs/ARCHITECTURE.md):
//! start-up (`server`, `worker`, the privileged parent `broker`, and
//! `lifecycle`, `listen`, `notify`, `upgrade` for the service, its sockets,
//! systemd and SIGUSR2); connection loops (`conn`) and the wire
//! (`proto`); routing (`route`) over the config's runtime (`config`);
//! certificates from ACME (`acme`), under both and beside the wire; the
//! handler interface (`exchange`); handlers (`handler`); what gateways share
//! (`gateway`); application processes and connections (`upstream`) and
//! the response cache's store and rules (`cache`); and
//! per-worker state (`local`) and HTTP semantics (`http`) beneath them all.
//! Protocol parsing lives in the sans-IO crates; this crate does the I/O.

// `pub`: what the binary (crates/stoa) and the tests (tests/, fuzz/) use;
// the rest is the crate's own.
pub(crate) mod access;
pub(crate) mod acme;
pub mod broker;
pub(crate) mod cache;
pub mod cert;
pub(crate) mod config;
pub(crate) mod conn;
pub(crate) mod exchange;
mod filter;
pub(crate) mod fs;
pub(crate) mod gateway;
pub(crate) mod handler;
pub mod http;
mod lifecycle;
mod listen;
pub(crate) mod local;
pub mod log;
mod notify;
pub(crate) mod privileges;
pub(crate) mod proto;
pub(crate) mod route;
pub(crate) mod server;
mod units;
mod unix_listen;
mod upgrade;
pub(crate) mod upstream;
pub(crate) mod worker;

pub use config::{ConfigError, Overrides, Runtime};
pub use server::{run, Source, StartError};
