//! The upstream layer: application processes and the connections to them,
//! protocol-free, shared by FastCGI and the proxy (whose one life cycle is
//! `gateway::life`). Pools of process slots (spawned and supervised, or
//! remote addresses), leases with a bounded wait queue, balancing
//! (least-busy, round-robin, p2c, rendezvous affinity), the stash of
//! kept-alive connections and its idle expiry. It imports nothing above
//! it: no exchange, gateway, handler or config; and its modules import
//! each other one way: addr <- tls <- target <- stream <- pool <- health.

pub mod addr;
pub mod health;
pub mod pool;
pub mod stream;
pub mod target;
pub mod tls;

pub use pool::{
    Affinity, Health, Lease, NoProcess, Pool, PoolKind, Proc, ProcState, Protocol, Target,
};
pub use stream::AppStream;

/// Starts a pool: its processes and their supervision, the expiry of its
/// parked connections, and its health checks.
pub fn start(pool: &std::sync::Arc<Pool>) {
    pool::start(pool);
    if pool.spec.health.is_some() {
        tokio::task::spawn_local(health::watch(pool.clone()));
    }
}
