//! Scaling a dynamic pool (`min_processes` .. `max_processes`): a process
//! more while requests queue, one less when one has been idle long.

use super::proc::{Proc, ProcState};
use super::spec::PoolKind;
use super::supervise::supervise;
use super::Pool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Grows a dynamic pool while requests queue, shrinks it when idle.
pub(super) async fn scale(pool: Arc<Pool>) {
    let PoolKind::Spawn {
        min,
        max,
        idle_timeout,
        ..
    } = pool.spec.kind.clone()
    else {
        return;
    };
    if min == max {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        if pool.stopping.load(Ordering::Acquire) {
            return;
        }
        let live: Vec<&Arc<Proc>> = pool
            .procs
            .iter()
            .filter(|p| p.state() != ProcState::Stopped)
            .collect();
        if pool.waiting() > 0 && live.len() < max {
            if let Some(p) = pool.procs.iter().find(|p| p.state() == ProcState::Stopped) {
                tracing::info!(
                    "pool {}: {} waiting, starting process #{}",
                    pool.spec.name,
                    pool.waiting(),
                    p.index
                );
                p.set_state(ProcState::Starting);
                tokio::task::spawn_local(supervise(pool.clone(), p.index));
            }
        } else if pool.waiting() == 0 && live.len() > min {
            let now = pool.clock();
            let idle_ms = idle_timeout.as_millis() as u64;
            if let Some(p) = live.iter().rev().find(|p| {
                p.state() == ProcState::Running
                    && p.busy() == 0
                    && now.saturating_sub(p.last_used.load(Ordering::Relaxed)) > idle_ms
            }) {
                tracing::info!(
                    "pool {}: process #{} idle, stopping it",
                    pool.spec.name,
                    p.index
                );
                p.set_state(ProcState::Retiring);
                p.retire.notify_one();
            }
        }
    }
}
