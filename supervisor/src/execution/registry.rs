//! The executions that are running, by id: what cancelling one needs now, and what answering
//! a waiting one (client-owned tool results, approvals) will need.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{oneshot, watch};

/// Running executions by id.
#[derive(Debug, Default)]
pub struct LiveExecutions {
    running: Arc<Mutex<HashMap<String, Entry>>>,
}

#[derive(Debug)]
struct Entry {
    /// The principal that started it: the only one that may act on it.
    principal: String,
    cancel: watch::Sender<bool>,
}

/// Why [`LiveExecutions::cancel`] did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CancelError {
    /// No execution of this principal runs under that id (it ended, never existed, or is
    /// another principal's, which is not told apart).
    #[error("no running execution `{0}` of yours")]
    NotFound(String),
}

/// What may stop an execution before its end.
#[derive(Debug)]
pub struct StopSignals {
    /// A client waiting for the whole response: its sender is dropped when the client hangs up.
    pub client: Option<oneshot::Receiver<()>>,
    /// Set by [`LiveExecutions::cancel`].
    pub cancel: watch::Receiver<bool>,
}

/// Holds an execution's place in the registry; dropping it removes the entry.
#[derive(Debug)]
pub struct LiveEntry {
    id: String,
    running: Arc<Mutex<HashMap<String, Entry>>>,
}

impl Drop for LiveEntry {
    fn drop(&mut self) {
        lock(&self.running).remove(&self.id);
    }
}

fn lock(map: &Mutex<HashMap<String, Entry>>) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
    // The map stays whole whatever panicked while holding it.
    map.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LiveExecutions {
    /// Registers execution `id` of `principal`; it is listed until the returned entry drops.
    pub fn enter(&self, id: &str, principal: &str) -> (LiveEntry, watch::Receiver<bool>) {
        let (cancel, cancelled) = watch::channel(false);
        lock(&self.running).insert(
            id.to_owned(),
            Entry {
                principal: principal.to_owned(),
                cancel,
            },
        );
        (
            LiveEntry {
                id: id.to_owned(),
                running: self.running.clone(),
            },
            cancelled,
        )
    }

    /// Asks execution `id` of `principal` to stop; it ends with status `cancelled`.
    pub fn cancel(&self, id: &str, principal: &str) -> Result<(), CancelError> {
        let running = lock(&self.running);
        match running.get(id) {
            Some(entry) if entry.principal == principal => {
                entry.cancel.send_replace(true);
                Ok(())
            }
            _ => Err(CancelError::NotFound(id.to_owned())),
        }
    }

    /// How many run now.
    pub fn len(&self) -> usize {
        lock(&self.running).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_starting_principal_cancels_and_entries_leave_when_dropped() {
        let live = LiveExecutions::default();
        let (entry, cancelled) = live.enter("ex_1", "alice");
        assert_eq!(live.len(), 1);
        assert_eq!(
            live.cancel("ex_1", "bob"),
            Err(CancelError::NotFound("ex_1".into()))
        );
        assert!(!*cancelled.borrow());
        live.cancel("ex_1", "alice").unwrap();
        assert!(*cancelled.borrow());
        drop(entry);
        assert!(live.is_empty());
        assert!(live.cancel("ex_1", "alice").is_err());
    }
}
