//! Active health checks: every `interval`, an HTTP/1.1 GET of `path` to
//! each process of a pool; `fails` failures in a row take it out of
//! rotation (no new leases, parked connections closed), `passes` successes
//! in a row put it back. The one place the upstream layer speaks a
//! protocol, and only this much of it: a status line is read, a 2xx or
//! 3xx passes.

use super::pool::{Pool, ProcState};
use super::stream::AppStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs the checks of `pool` until it stops.
pub async fn watch(pool: Arc<Pool>) {
    let Some(h) = pool.spec.health.clone() else {
        return;
    };
    let mut runs: Vec<(u32, u32)> = vec![(0, 0); pool.procs.len()];
    let mut tick = tokio::time::interval(h.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if pool.stopping.load(Ordering::Acquire) {
            return;
        }
        for (p, (fails, passes)) in pool.procs.iter().zip(runs.iter_mut()) {
            if p.state() != ProcState::Running {
                continue;
            }
            let ok = tokio::time::timeout(h.timeout, probe(&p.target, &h.path))
                .await
                .unwrap_or(false);
            if ok {
                *fails = 0;
                *passes += 1;
                if !p.is_healthy() && *passes >= h.passes {
                    tracing::info!(
                        "pool {}: #{} passes its health check again",
                        pool.spec.name,
                        p.index
                    );
                    p.set_healthy(true);
                    pool.health_changed();
                }
            } else {
                *passes = 0;
                *fails += 1;
                if p.is_healthy() && *fails >= h.fails {
                    tracing::warn!(
                        "pool {}: #{} failed {} health checks in a row; out of rotation",
                        pool.spec.name,
                        p.index,
                        fails
                    );
                    p.set_healthy(false);
                    pool.health_changed();
                }
            }
        }
    }
}

/// One GET; true for a 2xx or 3xx status line.
async fn probe(target: &super::target::Target, path: &str) -> bool {
    let Ok(mut s) = AppStream::connect(target, std::time::Duration::from_secs(5)).await else {
        return false;
    };
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: stoa-health\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let mut got = 0;
    while got < 12 {
        match s.read(&mut buf[got..]).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
    }
    // "HTTP/1.x NNN"
    buf.starts_with(b"HTTP/1.") && matches!(buf[9], b'2' | b'3')
}
