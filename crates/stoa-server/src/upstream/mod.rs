//! The upstream layer: application processes and the connections to them,
//! protocol-free, shared by FastCGI and (next) the proxy. Pools of process
//! slots (spawned and supervised, or remote addresses), leases with a
//! bounded wait queue, balancing (least-busy, round-robin, rendezvous
//! affinity), the stash of kept-alive connections and its idle expiry.
//! It imports nothing above it: no exchange, gateway, handler or config.

pub mod health;
pub mod pool;
pub mod stream;
pub mod tls;

pub use pool::{
    Affinity, Health, Lease, NoProcess, Pool, PoolKind, Proc, ProcState, Protocol, Target,
};
pub use stream::AppStream;
