//! Execution slots (`[daemon] max_concurrent_executions`), shared fairly between principals.
//!
//! Each principal runs at most `limits.max_running_executions` at once and queues at most
//! `limits.max_queued_executions` more; one more is refused at once (`429`, `Retry-After`), so
//! the programs the daemon holds in memory are bounded. A freed slot goes to the principal that
//! runs the fewest of those waiting (in arrival order within a principal), and the last eighth
//! of the slots goes only to principals running less than an equal share (counting one more
//! principal than those running or waiting, the next to come): a principal that
//! floods the daemon with programs that never end cannot make another's wait for a slot.
//!
//! Slots are not CPU: a principal's running programs share the CPUs with everyone else's. So
//! that one principal's many busy programs do not crowd out another's few, each slot carries
//! its rank among its principal's running executions, and the worker of the k-th (k ≥ 2) runs
//! with about 1/(k(k−1)) of the scheduler weight of a first one ([`Slot::nice`]): all of a
//! principal's running workers together weigh no more than about two first ones, however
//! many it runs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// The slots, and who runs and waits.
#[derive(Debug)]
pub struct Slots {
    total: usize,
    inner: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    closed: bool,
    running: usize,
    next_ticket: u64,
    principals: HashMap<String, Share>,
}

#[derive(Debug, Default)]
struct Share {
    running: usize,
    /// Its most running at once (as the principal's limits said at its last request).
    max_running: usize,
    /// Waiting for a slot, oldest first: a ticket and where its slot (its rank) is sent.
    queue: VecDeque<(u64, oneshot::Sender<usize>)>,
}

/// A principal's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull {
    pub max_queued: u32,
    pub running: usize,
}

/// A slot held: dropping it frees it for the next in line.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    principal: String,
    /// How many its principal ran, this one included, when it got it.
    rank: usize,
}

impl Slot {
    /// The niceness for this slot's worker: 0 for a principal's first running execution, and
    /// for the k-th, the nice level whose scheduler weight is nearest 1/(k(k−1)) of nice 0's
    /// (these sum to 1 over k ≥ 2).
    pub fn nice(&self) -> i32 {
        let k = u64::try_from(self.rank).unwrap_or(u64::MAX);
        if k <= 1 {
            return 0;
        }
        let share = k.saturating_mul(k - 1);
        let mut best = (0, u64::MAX);
        for (nice, weight) in (0..).zip(NICE_WEIGHTS) {
            let distance = weight.saturating_mul(share).abs_diff(NICE_WEIGHTS[0]);
            if distance < best.1 {
                best = (nice, distance);
            }
        }
        best.0
    }
}

/// The kernel's scheduler weight of nice 0 to 19 (`sched_prio_to_weight`): each level about
/// 1/1.25 of the one before.
const NICE_WEIGHTS: [u64; 20] = [
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        state.running = state.running.saturating_sub(1);
        if let Some(share) = state.principals.get_mut(&self.principal) {
            share.running = share.running.saturating_sub(1);
        }
        self.slots.dispatch(&mut state);
    }
}

/// A place in a principal's queue, or the slot it got.
#[derive(Debug)]
pub enum Ticket {
    Now(Slot),
    Queued(Queued),
}

/// A place in the queue; [`Queued::slot`] waits for its slot. Dropped before it has one, it
/// leaves the queue (or hands on the slot it was just given).
#[derive(Debug)]
pub struct Queued {
    slots: Arc<Slots>,
    principal: String,
    ticket: u64,
    granted: Option<oneshot::Receiver<usize>>,
}

impl Queued {
    /// The slot, once one is this execution's; `None` if the daemon stops first.
    pub async fn slot(mut self) -> Option<Slot> {
        let granted = self.granted.as_mut()?;
        let rank = granted.await.ok();
        self.granted = None;
        rank.map(|rank| Slot {
            slots: self.slots.clone(),
            principal: self.principal.clone(),
            rank,
        })
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        let Some(mut granted) = self.granted.take() else {
            return;
        };
        if let Ok(rank) = granted.try_recv() {
            // Given a slot it will not use: the slot goes on to the next in line.
            drop(Slot {
                slots: self.slots.clone(),
                principal: self.principal.clone(),
                rank,
            });
            return;
        }
        let mut state = self.slots.lock();
        if let Some(share) = state.principals.get_mut(&self.principal) {
            share.queue.retain(|(t, _)| *t != self.ticket);
        }
        state.forget_idle(&self.principal);
    }
}

impl State {
    /// Principals that run or wait for something, `principal` among them.
    fn active_with(&self, principal: &str) -> usize {
        let others = self
            .principals
            .iter()
            .filter(|(name, share)| {
                name.as_str() != principal && (share.running > 0 || !share.queue.is_empty())
            })
            .count();
        others + 1
    }

    fn forget_idle(&mut self, principal: &str) {
        if self
            .principals
            .get(principal)
            .is_some_and(|s| s.running == 0 && s.queue.is_empty())
        {
            self.principals.remove(principal);
        }
    }
}

impl Slots {
    pub fn new(total: usize) -> Slots {
        Slots {
            total,
            inner: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `principal`, running `running`, may take a free slot now.
    fn may_start(&self, state: &State, principal: &str, running: usize, max: usize) -> bool {
        let free = self.total.saturating_sub(state.running);
        if free == 0 || running >= max {
            return false;
        }
        let reserve = self.total / 8;
        // An equal share counts one principal more than those active: the one that comes next.
        let share = self.total / (state.active_with(principal) + 1);
        running < share.max(1) || free > reserve
    }

    /// A slot for `principal` now, or its place in the queue, or why it has neither.
    /// `None`: the daemon stops.
    pub fn enter(
        self: &Arc<Self>,
        principal: &str,
        max_running: u32,
        max_queued: u32,
    ) -> Option<Result<Ticket, QueueFull>> {
        let max = usize::try_from(max_running).unwrap_or(usize::MAX).max(1);
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        let (running, queued) = match state.principals.get(principal) {
            Some(share) => (share.running, share.queue.len()),
            None => (0, 0),
        };
        if queued == 0 && self.may_start(&state, principal, running, max) {
            state.running += 1;
            let share = state.principals.entry(principal.to_owned()).or_default();
            share.running += 1;
            share.max_running = max;
            let rank = share.running;
            return Some(Ok(Ticket::Now(Slot {
                slots: self.clone(),
                principal: principal.to_owned(),
                rank,
            })));
        }
        if queued >= usize::try_from(max_queued).unwrap_or(usize::MAX) {
            return Some(Err(QueueFull {
                max_queued,
                running,
            }));
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        let (tx, rx) = oneshot::channel();
        let share = state.principals.entry(principal.to_owned()).or_default();
        share.max_running = max;
        share.queue.push_back((ticket, tx));
        Some(Ok(Ticket::Queued(Queued {
            slots: self.clone(),
            principal: principal.to_owned(),
            ticket,
            granted: Some(rx),
        })))
    }

    /// Hands free slots to those waiting: each to the principal running the fewest of those
    /// that may start one.
    fn dispatch(&self, state: &mut State) {
        loop {
            let next = state
                .principals
                .iter()
                .filter(|(name, share)| {
                    !share.queue.is_empty()
                        && self.may_start(state, name, share.running, share.max_running)
                })
                .min_by_key(|(_, share)| (share.running, share.queue.front().map(|q| q.0)))
                .map(|(name, _)| name.clone());
            let Some(name) = next else { break };
            let Some(share) = state.principals.get_mut(&name) else {
                break;
            };
            let Some((_, tx)) = share.queue.pop_front() else {
                break;
            };
            if tx.send(share.running + 1).is_ok() {
                share.running += 1;
                state.running += 1;
            }
        }
        let idle: Vec<String> = state
            .principals
            .iter()
            .filter(|(_, s)| s.running == 0 && s.queue.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        for name in idle {
            state.principals.remove(&name);
        }
    }

    /// Slots taken now.
    pub fn running(&self) -> usize {
        self.lock().running
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// No new executions; those waiting for a slot are told the daemon stops.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        for share in state.principals.values_mut() {
            share.queue.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{QueueFull, Slots, Ticket};
    use std::sync::Arc;

    fn now(t: Option<Result<Ticket, QueueFull>>) -> super::Slot {
        match t {
            Some(Ok(Ticket::Now(slot))) => slot,
            other => panic!("expected a slot now: {other:?}"),
        }
    }

    #[tokio::test]
    async fn one_principal_cannot_take_every_slot_or_queue_without_bound() {
        let slots = Arc::new(Slots::new(8));
        // Alone, `a` may take all but the last eighth.
        let mut held: Vec<_> = (0..7).map(|_| now(slots.enter("a", 100, 2))).collect();
        let q1 = slots.enter("a", 100, 2);
        let q2 = slots.enter("a", 100, 2);
        assert!(matches!(q1, Some(Ok(Ticket::Queued(_)))));
        assert!(matches!(q2, Some(Ok(Ticket::Queued(_)))));
        assert_eq!(
            slots.enter("a", 100, 2).unwrap().unwrap_err(),
            QueueFull {
                max_queued: 2,
                running: 7
            }
        );
        // Another principal finds the reserved slot.
        let b = now(slots.enter("b", 100, 2));
        // `b` waits next: a freed slot goes to it (it runs fewer) before `a`'s queue.
        let Some(Ok(Ticket::Queued(b2))) = slots.enter("b", 100, 2) else {
            panic!("b queues");
        };
        held.pop();
        let b2 = tokio::time::timeout(std::time::Duration::from_secs(1), b2.slot())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(slots.running(), 8);
        drop((b, b2, q1, q2));
        drop(held);
        assert_eq!(slots.running(), 0);
    }

    #[test]
    fn a_principals_workers_together_weigh_about_two_first_ones() {
        let slots = Arc::new(Slots::new(64));
        let held: Vec<_> = (0..20).map(|_| now(slots.enter("a", 100, 0))).collect();
        let nice: Vec<i32> = held.iter().map(super::Slot::nice).collect();
        assert_eq!(&nice[..9], &[0, 3, 8, 11, 13, 15, 17, 18, 19]);
        assert_eq!(nice[19], 19);
        assert_eq!(now(slots.enter("b", 100, 0)).nice(), 0, "another's first");
    }

    #[test]
    fn a_principal_runs_at_most_its_own_limit() {
        let slots = Arc::new(Slots::new(64));
        let _one = now(slots.enter("a", 1, 0));
        assert!(slots.enter("a", 1, 0).unwrap().is_err(), "no queue");
        slots.close();
        assert!(slots.enter("b", 1, 0).is_none());
    }
}
