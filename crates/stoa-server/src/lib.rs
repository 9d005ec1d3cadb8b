//! The Stoa server: listeners, connections, configuration, routing and
//! handlers. Protocol parsing lives in `stoa-h1`; this crate does the I/O.

pub mod cgi;
pub mod config;
pub mod conn;
pub mod downstream;
pub mod fastcgi;
pub mod http;
pub mod mux;
pub mod output;
pub mod pool;
pub mod privileges;
pub mod server;
pub mod static_files;
pub mod status;
pub mod worker;

pub use config::{ConfigError, Overrides, Runtime};
pub use server::{run, Source, StartError};
