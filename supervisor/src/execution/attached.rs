//! A started execution ([`Started`]) and, for a client that waits for it, the future that runs
//! it in the door's own task ([`Attached`]) until nobody waits any more.

use super::service::SubmitError;
use crate::agent_api::ExecutionResponse;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::Poll;
use tokio::sync::oneshot;

/// A started execution.
#[derive(Debug)]
pub struct Started {
    pub id: String,
    /// `None` for a detached execution, whose task the service holds.
    pub(super) task: Option<Attached>,
    /// For a client that waits for the whole response: dropping it (hyper drops the handler
    /// of a client that hung up) tells the execution its client is gone. A streaming
    /// client's closed event channel says the same.
    pub(super) _client: Option<oneshot::Sender<()>>,
}

impl Started {
    /// The response, once the execution ended (also sent as the last event when streaming);
    /// an error if it never ran (the daemon stopped while it waited for a slot) or it
    /// panicked.
    pub async fn response(self) -> Result<ExecutionResponse, SubmitError> {
        let Started { task, _client, .. } = self;
        let Some(task) = task else {
            return Err(SubmitError::Internal(
                "a detached execution has no response to wait for; follow it with GET /v1/executions/<id>".into(),
            ));
        };
        task.await
    }
}

/// What an execution ends with: its response, or why it has none.
pub(super) type Answer = Result<ExecutionResponse, SubmitError>;

/// An attached execution (one a client waits for): its future runs in the task that awaits
/// [`Started::response`], so the answer reaches the door without a hand-off from another task
/// (a wake-up of the door's task, measured at ~10 µs of a trivial execution's ~0.25 ms). If
/// it is dropped before the end (hyper drops the handler of a client that hung up, a
/// streaming door drops `Started` at once), the future gets a task of its own there and
/// then, so the execution still ends properly and reaches the audit log.
pub(super) struct Attached {
    future: Option<Pin<Box<dyn Future<Output = Answer> + Send>>>,
    runtime: tokio::runtime::Handle,
}

impl Attached {
    pub(super) fn new(future: impl Future<Output = Answer> + Send + 'static) -> Attached {
        Attached {
            future: Some(Box::pin(future)),
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached")
            .field("running", &self.future.is_some())
            .finish_non_exhaustive()
    }
}

impl Future for Attached {
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Answer> {
        let Some(future) = self.future.as_mut() else {
            return Poll::Ready(Err(SubmitError::Internal(
                "the execution's response was already taken".into(),
            )));
        };
        // As in a task of its own, a panic ends only this execution (its worker is killed
        // and reaped as the future's state is dropped) and its client gets a 500.
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
        let answer = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(answer)) => answer,
            Err(panic) => Err(SubmitError::Internal(format!(
                "the execution panicked: {}",
                panic_message(panic.as_ref())
            ))),
        };
        self.future = None;
        Poll::Ready(answer)
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            // Nobody waits for the answer now; the task's handle is not needed.
            drop(self.runtime.spawn(future));
        }
    }
}

/// The text a panic was raised with, as tokio's `JoinError` shows it.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod tests {
    use super::{Attached, SubmitError};
    use std::time::Duration;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn an_attached_execution_answers_its_waiter() {
        let answer = Attached::new(async { Err(SubmitError::ShuttingDown) }).await;
        assert!(
            matches!(answer, Err(SubmitError::ShuttingDown)),
            "{answer:?}"
        );
    }

    #[tokio::test]
    async fn an_attached_execution_nobody_waits_for_runs_on_to_its_end() {
        let (go, gate) = oneshot::channel::<()>();
        let (ended, has_ended) = oneshot::channel::<()>();
        let attached = Attached::new(async move {
            let _ = gate.await;
            let _ = ended.send(());
            Err(SubmitError::ShuttingDown)
        });
        // Polled once (the door waited a while), then dropped (its client hung up).
        let waited = tokio::time::timeout(Duration::from_millis(10), attached).await;
        assert!(waited.is_err(), "it cannot have ended yet");
        go.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), has_ended)
            .await
            .expect("the execution ran on in a task of its own")
            .unwrap();
    }

    #[tokio::test]
    async fn a_panicking_execution_is_an_internal_error_for_its_client() {
        let answer = Attached::new(async {
            if true {
                panic!("boom in the execution");
            }
            Err(SubmitError::ShuttingDown)
        })
        .await;
        match answer {
            Err(SubmitError::Internal(message)) => {
                assert!(message.contains("boom in the execution"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
