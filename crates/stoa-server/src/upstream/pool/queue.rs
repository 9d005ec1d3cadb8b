//! Requests waiting for a slot: one FIFO queue per worker thread.
//!
//! Each waiter keeps its place until it leaves, and a freed slot is
//! signalled to one waiter in particular: the longest waiting one not
//! already signalled. A `tokio::sync::Notify` cannot do this: a waiter that
//! stops listening (to poll on a timer, or after losing a race for the
//! slot) and listens again goes to the back of its list, and with many
//! waiters the slots then go in an order close to random: a saturated
//! pool's median wait stays short while its tail grows tenfold (the lab's
//! FastCGI route, docs/BENCHMARKS.md).
//!
//! On a pool with affinity a waiter may need one process in particular
//! (the one its key maps to): it says which, and a slot freed on a process
//! is signalled only to a waiter that can use it. Waking every waiter to
//! look instead costs the whole queue's work for each slot.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A waiter that can use a slot on any process.
pub(super) const ANY: usize = usize::MAX;

fn can_use(want: usize, freed: usize) -> bool {
    want == ANY || want == freed
}

#[derive(Debug)]
struct Waiter {
    ticket: u64,
    at: Instant,
    /// The process whose slot it needs, or [`ANY`].
    want: usize,
    waker: Option<Waker>,
    /// Slots freed for this waiter and not yet tried for.
    slots: u32,
    /// Told to look again (a process started, the pool stopped, or a
    /// slot went unused where the pool cannot tell who may use it);
    /// carries no slot of its own.
    recheck: bool,
}

/// Requests of one worker thread waiting for a slot, oldest first.
#[derive(Debug, Default)]
pub(super) struct WaitQueue {
    waiters: Mutex<VecDeque<Waiter>>,
}

impl WaitQueue {
    pub(super) fn push(&self, ticket: u64, want: usize) {
        if let Ok(mut w) = self.waiters.lock() {
            w.push_back(Waiter {
                ticket,
                at: Instant::now(),
                want,
                waker: None,
                slots: 0,
                recheck: false,
            });
        }
    }

    /// Leaves the queue, `leased` or not; the slots signalled to it that it
    /// did not use, which the caller passes on to the next waiters.
    pub(super) fn remove(&self, ticket: u64, leased: bool) -> u32 {
        let Ok(mut w) = self.waiters.lock() else {
            return 0;
        };
        // Usually the front: slots go to waiters in order.
        let Some(i) = w.iter().position(|x| x.ticket == ticket) else {
            return 0;
        };
        let slots = w.remove(i).map_or(0, |x| x.slots);
        if leased {
            slots.saturating_sub(1)
        } else {
            slots
        }
    }

    pub(super) fn is_front(&self, ticket: u64) -> bool {
        self.waiters
            .lock()
            .is_ok_and(|w| w.front().is_some_and(|x| x.ticket == ticket))
    }

    /// The waiter's key now maps to another process (one stopped, started
    /// or was held off): it waits for that one's slots from now on.
    pub(super) fn set_want(&self, ticket: u64, want: usize) {
        if let Ok(mut w) = self.waiters.lock() {
            if let Some(x) = w.iter_mut().find(|x| x.ticket == ticket) {
                x.want = want;
            }
        }
    }

    /// When the longest waiter that can use a slot freed on process
    /// `freed` and is not yet signalled one arrived.
    pub(super) fn oldest(&self, freed: usize) -> Option<Instant> {
        let w = self.waiters.lock().ok()?;
        w.iter()
            .find(|x| x.slots == 0 && can_use(x.want, freed))
            .map(|x| x.at)
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.waiters.lock().map_or(true, |w| w.is_empty())
    }

    /// A slot was freed on process `freed`: it goes to the longest waiter
    /// that can use it and is not yet signalled one, or, when every such
    /// waiter here has one coming, to the first of them (which passes it
    /// on when it leaves). False when nobody here can use it.
    pub(super) fn signal_one(&self, freed: usize) -> bool {
        let Ok(mut w) = self.waiters.lock() else {
            return false;
        };
        let Some(i) = w
            .iter()
            .position(|x| x.slots == 0 && can_use(x.want, freed))
            .or_else(|| w.iter().position(|x| can_use(x.want, freed)))
        else {
            return false;
        };
        let Some(x) = w.get_mut(i) else {
            return false;
        };
        x.slots += 1;
        if let Some(k) = x.waker.take() {
            k.wake();
        }
        true
    }

    /// Every waiter looks again.
    pub(super) fn recheck_all(&self) {
        if let Ok(mut w) = self.waiters.lock() {
            for x in w.iter_mut() {
                x.recheck = true;
                if let Some(k) = x.waker.take() {
                    k.wake();
                }
            }
        }
    }

    /// Ready with the slots signalled so far once there is one or a
    /// recheck (which it consumes); otherwise registers the task.
    pub(super) fn poll_signal(&self, ticket: u64, cx: &mut Context<'_>) -> Poll<u32> {
        let Ok(mut w) = self.waiters.lock() else {
            return Poll::Ready(0);
        };
        let Some(x) = w.iter_mut().find(|x| x.ticket == ticket) else {
            return Poll::Ready(0);
        };
        if x.slots > 0 || x.recheck {
            x.recheck = false;
            return Poll::Ready(x.slots);
        }
        if !x.waker.as_ref().is_some_and(|k| k.will_wake(cx.waker())) {
            x.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// The waiter found no free slot: the `seen` slots signalled to it
    /// were taken by others (waiters ahead of it). Slots signalled since
    /// stay.
    pub(super) fn missed(&self, ticket: u64, seen: u32) {
        if let Ok(mut w) = self.waiters.lock() {
            if let Some(x) = w.iter_mut().find(|x| x.ticket == ticket) {
                x.slots = x.slots.saturating_sub(seen);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn park(q: &WaitQueue, ticket: u64, k: &Arc<Count>) -> Poll<u32> {
        let waker = Waker::from(k.clone());
        q.poll_signal(ticket, &mut Context::from_waker(&waker))
    }

    #[test]
    fn a_freed_slot_is_signalled_to_the_longest_waiter_not_already_signalled() {
        let q = WaitQueue::default();
        let ks: Vec<_> = (0..3)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        for (t, k) in ks.iter().enumerate() {
            q.push(t as u64, ANY);
            assert_eq!(park(&q, t as u64, k), Poll::Pending);
        }
        assert!(q.signal_one(0));
        assert!(q.signal_one(0));
        let woken: Vec<_> = ks.iter().map(|k| k.0.load(Ordering::Relaxed)).collect();
        assert_eq!(woken, [1, 1, 0]);
        assert_eq!(park(&q, 0, &ks[0]), Poll::Ready(1));
        assert_eq!(
            q.oldest(0),
            q.waiters.lock().expect("lock").get(2).map(|x| x.at)
        );
    }

    /// A waiter that lost the race for its slot, or polled on a timer,
    /// keeps its place: the next slot is still its.
    #[test]
    fn a_waiter_that_missed_its_slot_keeps_its_place() {
        let q = WaitQueue::default();
        let k0 = Arc::new(Count(AtomicUsize::new(0)));
        let k1 = Arc::new(Count(AtomicUsize::new(0)));
        q.push(0, ANY);
        q.push(1, ANY);
        assert_eq!(park(&q, 1, &k1), Poll::Pending);
        assert!(q.signal_one(0));
        assert_eq!(park(&q, 0, &k0), Poll::Ready(1));
        q.missed(0, 1);
        assert_eq!(park(&q, 0, &k0), Poll::Pending);
        assert!(q.signal_one(0));
        assert_eq!(k0.0.load(Ordering::Relaxed), 1);
        assert_eq!(k1.0.load(Ordering::Relaxed), 0);
    }

    /// A slot signalled while the waiter was trying is not lost when the
    /// try fails, and one it did not use goes back to the caller.
    #[test]
    fn slots_signalled_meanwhile_survive_a_miss_and_unused_ones_are_handed_back() {
        let q = WaitQueue::default();
        let k = Arc::new(Count(AtomicUsize::new(0)));
        q.push(7, ANY);
        assert!(q.signal_one(0));
        assert_eq!(park(&q, 7, &k), Poll::Ready(1));
        // Every waiter has a slot coming: the first gets another.
        assert!(q.signal_one(0));
        q.missed(7, 1);
        assert_eq!(park(&q, 7, &k), Poll::Ready(1));
        assert!(q.signal_one(0));
        assert_eq!(q.remove(7, true), 1);
        assert!(q.is_empty());
        assert!(!q.signal_one(0));
    }

    /// On a pool with affinity a slot freed on one process wakes only a
    /// waiter that can use it, the longest waiting one first; nobody when
    /// none can.
    #[test]
    fn a_slot_freed_on_a_process_is_signalled_only_to_a_waiter_that_can_use_it() {
        let q = WaitQueue::default();
        let ks: Vec<_> = (0..4)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        for (t, want) in [(0u64, 1), (1, 2), (2, 1), (3, ANY)] {
            q.push(t, want);
            assert_eq!(park(&q, t, &ks[t as usize]), Poll::Pending);
        }
        let woken = || -> Vec<usize> { ks.iter().map(|k| k.0.load(Ordering::Relaxed)).collect() };
        // Only the waiter for any process can use a slot on process 5.
        assert!(q.signal_one(5));
        assert_eq!(woken(), [0, 0, 0, 1]);
        assert!(q.signal_one(2));
        assert_eq!(woken(), [0, 1, 0, 1]);
        assert!(q.signal_one(1));
        assert!(q.signal_one(1));
        assert_eq!(woken(), [1, 1, 1, 1]);
        assert_eq!(q.oldest(1), None);
        // Every waiter for process 1 is signalled: a third slot goes along
        // with the first's.
        assert!(q.signal_one(1));
        assert_eq!(park(&q, 0, &ks[0]), Poll::Ready(2));
        // Its key moved to process 2 (process 1 stopped, say).
        q.set_want(0, 2);
        assert_eq!(q.remove(3, false), 1);
        assert_eq!(q.oldest(4), None);
        assert!(!q.signal_one(4));
        assert_eq!(q.oldest(2), None);
    }

    #[test]
    fn a_recheck_wakes_every_waiter_once_and_carries_no_slot() {
        let q = WaitQueue::default();
        let k = Arc::new(Count(AtomicUsize::new(0)));
        q.push(1, ANY);
        assert_eq!(park(&q, 1, &k), Poll::Pending);
        q.recheck_all();
        assert_eq!(k.0.load(Ordering::Relaxed), 1);
        assert_eq!(park(&q, 1, &k), Poll::Ready(0));
        assert_eq!(park(&q, 1, &k), Poll::Pending);
        assert_eq!(q.remove(1, false), 0);
    }
}
