//! The Stoa server. Layers, top to bottom (docs/ARCHITECTURE.md):
//! start-up (`server`, `worker`, the privileged parent `broker`, and
//! `lifecycle`, `listen`, `notify`, `upgrade` for the service, its sockets,
//! systemd and SIGUSR2); connection loops (`conn`) and the wire
//! (`proto`); routing (`route`) over the config's runtime (`config`); the
//! handler interface (`exchange`); handlers (`handler`); what gateways share
//! (`gateway`); application processes and connections (`upstream`); and
//! per-worker state (`local`) and HTTP semantics (`http`) beneath them all.
//! Protocol parsing lives in the sans-IO crates; this crate does the I/O.

pub(crate) mod access;
pub mod broker;
pub mod cert;
pub mod config;
pub mod conn;
pub mod exchange;
pub mod fs;
pub mod gateway;
pub mod handler;
pub mod http;
mod lifecycle;
mod listen;
pub mod local;
pub mod log;
mod notify;
pub mod privileges;
pub mod proto;
pub mod route;
pub mod server;
mod unix_listen;
mod upgrade;
pub mod upstream;
pub mod worker;

pub use config::{ConfigError, Overrides, Runtime};
pub use server::{run, Source, StartError};
