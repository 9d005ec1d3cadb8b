//! Requests waiting for a slot: one FIFO queue per worker thread.

use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Requests of one worker thread waiting for a slot, oldest first.
#[derive(Debug, Default)]
pub(super) struct WaitQueue {
    pub(super) notify: Notify,
    /// (ticket, arrival) of each waiter.
    pub(super) waiters: Mutex<std::collections::VecDeque<(u64, Instant)>>,
}

impl WaitQueue {
    pub(super) fn push(&self, ticket: u64) {
        if let Ok(mut w) = self.waiters.lock() {
            w.push_back((ticket, Instant::now()));
        }
    }

    pub(super) fn remove(&self, ticket: u64) {
        if let Ok(mut w) = self.waiters.lock() {
            // Usually the front: waiters are woken in order.
            if let Some(i) = w.iter().position(|&(t, _)| t == ticket) {
                w.remove(i);
            }
        }
    }

    pub(super) fn is_front(&self, ticket: u64) -> bool {
        self.waiters
            .lock()
            .is_ok_and(|w| w.front().is_some_and(|&(t, _)| t == ticket))
    }

    /// When the longest waiter here arrived.
    pub(super) fn oldest(&self) -> Option<Instant> {
        self.waiters.lock().ok()?.front().map(|&(_, at)| at)
    }
}

/// How much longer than the local one a waiter on another worker thread
/// may wait before a freed slot crosses threads to it.
pub(super) const FAIRNESS: Duration = Duration::from_millis(1);

/// One wait queue per worker thread there can be.
pub(super) fn wait_queues() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 256)
}
