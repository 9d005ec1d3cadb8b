//! The stash: kept-alive connections parked with their process between
//! requests, not registered with any worker's event loop while they wait,
//! and their expiry.

use super::proc::{Proc, ProcState};
use super::Pool;
use crate::local::worker_index;
use crate::upstream::stream::IdleConn;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Proc {
    /// A kept-alive connection, this worker's own if it has one here.
    pub fn take_idle(&self) -> Option<IdleConn> {
        let me = worker_index();
        let mut v = self.idle.lock().ok()?;
        match v.iter().rposition(|c| c.owner == me) {
            // `remove`, not `swap_remove`: the stash stays in parking
            // order for `expire_idle`.
            Some(i) => Some(v.remove(i)),
            None => v.pop(),
        }
    }

    /// Keeps a connection for the next request. Connections open to a
    /// process (in use plus idle) never exceed what it can serve at once:
    /// an idle one may hold a worker of a process-per-connection server
    /// (php-fpm), and one more would wait in its backlog behind it. The
    /// most recently parked is reused first, so connections beyond what
    /// recent concurrency needs sit untouched until [`Proc::expire_idle`]
    /// closes them.
    pub(super) fn put_idle(&self, mut c: IdleConn, now: u64) {
        if self.state() != ProcState::Running || !self.keepalive.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut v) = self.idle.lock() {
            // `busy` still counts the request this connection just served.
            if v.len() + self.busy() <= self.capacity() {
                c.since = now;
                v.push(c);
            }
        }
    }

    /// Closes connections parked since before `cutoff` (oldest first in
    /// the stash, since reuse takes from the end).
    pub(super) fn expire_idle(&self, cutoff: u64, now: u64) {
        let old: Vec<IdleConn> = match self.idle.lock() {
            Ok(mut v) => {
                let n = v.iter().take_while(|c| c.since < cutoff).count();
                let mut old: Vec<IdleConn> = v.drain(..n).collect();
                // Those with a shorter life of their own, anywhere.
                let mut i = 0;
                while i < v.len() {
                    let c = &v[i];
                    if c.ttl.is_some_and(|t| c.since + t.as_millis() as u64 <= now) {
                        old.push(v.remove(i));
                    } else {
                        i += 1;
                    }
                }
                old
            }
            Err(_) => return,
        };
        // Closed outside the lock.
        drop(old);
    }

    /// A kept-alive connection failed before any response byte: the
    /// request goes again on a fresh one; the other parked connections
    /// are likely as stale (the process restarted or recycled).
    pub fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        self.drop_idle();
    }

    /// Kept-alive connections parked for reuse.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map_or(0, |v| v.len())
    }

    pub(super) fn drop_idle(&self) {
        if let Ok(mut v) = self.idle.lock() {
            v.clear();
        }
    }
}

/// Closes kept-alive connections parked longer than `keepalive_timeout`,
/// whether or not requests come (php-fpm's other clients need its children
/// back while Stoa is idle).
pub(super) async fn expire_idle(pool: Arc<Pool>) {
    let timeout = pool.spec.keepalive_timeout;
    let mut tick = tokio::time::interval((timeout / 4).max(Duration::from_millis(50)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if pool.stopping.load(Ordering::Acquire) {
            return;
        }
        let now = pool.clock();
        let cutoff = now.saturating_sub(timeout.as_millis() as u64);
        for p in &pool.procs {
            p.expire_idle(cutoff, now);
        }
    }
}
