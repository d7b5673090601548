//! From an admitted plan to the task that runs it: its place (a slot now, or in its
//! principal's queue), its session begun, its entry in the registry (and a detached one's
//! event log), and the task itself ([`Launched::run`]): the slot, the run, and what the service
//! records of its end. The task runs in the door's own task while a client waits for it
//! ([`Attached`]), or in one of its own.

use super::attached::{Answer, Attached, Started};
use super::plan::{Events, Plan};
use super::registry::{DetachedPlace, EventLog, LiveEntry, StopSignals};
use super::run::run_execution;
use super::service::{ExecutionService, SubmitError};
use super::slots::Ticket;
use crate::agent_api::{ExecutionEvent, ExecutionResponse, Status};
use crate::journal::store::ExecutionState;
use crate::journal::{Journal, SessionRun};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};
use tokio::sync::{mpsc, oneshot};

/// An execution with its place, its session and its registry entry: what its task runs to
/// the end.
struct Launched {
    plan: Plan,
    session: Option<Arc<SessionRun>>,
    ticket: Ticket,
    /// When it took its place (its queue wait runs from here) and was accepted (the audit
    /// record's time).
    queued: Instant,
    accepted: SystemTime,
    events: Events,
    stop: StopSignals,
    /// Its place in the registry (a detached one's is held by its log's writer instead).
    live: Option<LiveEntry>,
}

/// How an execution is followed while it runs.
struct Followed {
    /// Where its events go: the streaming client's channel, a detached one's log, or none.
    events: Events,
    stop: StopSignals,
    live: Option<LiveEntry>,
    /// For a client that waits for the whole response (see [`Started`]).
    client: Option<oneshot::Sender<()>>,
}

impl ExecutionService {
    /// Starts an admitted execution: its place, its session, its registry entry, and the
    /// future that runs it ([`Attached`]; a detached one's own task).
    pub(super) async fn launch(
        self: &Arc<Self>,
        mut plan: Plan,
        events: Events,
    ) -> Result<Started, SubmitError> {
        // Its place before anything is kept of it: a slot now, or in its principal's queue.
        let ticket = self.take_place(&plan)?;
        let queued = Instant::now();
        let accepted = SystemTime::now();
        let session = plan.begin_session().await?;
        let place = plan.place.take();
        let Followed {
            events,
            stop,
            live,
            client,
        } = self.follow(&plan, place, session.as_deref(), events);
        let id = plan.id.clone();
        let detached = plan.detached;
        let launched = Launched {
            plan,
            session,
            ticket,
            queued,
            accepted,
            events,
            stop,
            live,
        };
        let task = launched.run(self.clone());
        // Run by the door that waits for it, or in a task of its own once nobody does
        // ([`Attached`]), so that it ends properly and reaches the audit log whatever the door
        // does meanwhile (a client that hangs up stops the program, which is still recorded).
        // A detached one's task is the service's: the daemon waits for it when it stops.
        let task = if detached {
            self.spawn_detached(async move {
                let _ = task.await;
            });
            None
        } else {
            Some(Attached::new(task))
        };
        Ok(Started {
            id,
            task,
            _client: client,
        })
    }

    /// A slot now, or a place in the principal's queue.
    fn take_place(&self, plan: &Plan) -> Result<Ticket, SubmitError> {
        let principal = &plan.principal;
        match self.slots.enter(
            &principal.name,
            principal.limits.max_running_executions,
            principal.limits.max_queued_executions,
        ) {
            None => Err(SubmitError::ShuttingDown),
            Some(Err(full)) => {
                self.metrics.rate_limited();
                Err(SubmitError::QueueFull {
                    principal: principal.name.clone(),
                    running: full.running,
                    max_queued: full.max_queued,
                })
            }
            Some(Ok(ticket)) => Ok(ticket),
        }
    }

    /// Enters the execution in the registry (where a detached one's `place` among its
    /// principal's waiting executions passes to its entry), and says where its events go and
    /// what stops it. A detached execution's events go to its log (which
    /// `GET /v1/executions/<id>` reads), and nothing a client does stops it; a plain one stops
    /// when its client hangs up.
    fn follow(
        self: &Arc<Self>,
        plan: &Plan,
        place: Option<DetachedPlace>,
        session: Option<&SessionRun>,
        events: Events,
    ) -> Followed {
        let log = plan.detached.then(|| {
            Arc::new(EventLog::new(
                &plan.principal.name,
                plan.peer,
                plan.session_id(),
            ))
        });
        let (live, cancel) = self
            .live
            .enter(&plan.id, &plan.principal.name, log.clone(), place);
        let Some(log) = log else {
            let (client, gone) = match events {
                Some(_) => (None, None),
                None => {
                    let (client, gone) = oneshot::channel();
                    (Some(client), Some(gone))
                }
            };
            return Followed {
                events,
                stop: StopSignals {
                    client: gone,
                    cancel,
                },
                live: Some(live),
                client,
            };
        };
        let (tx, rx) = mpsc::channel::<ExecutionEvent>(64);
        // The log's writer holds the execution's place in the registry until the final
        // response is kept in the journal, so a reader never finds it in neither.
        let journal = session.map(|s| s.journal.clone());
        let ttl_ms = plan.principal.limits.waiting_ttl_ms;
        let service = self.clone();
        self.spawn_detached(async move {
            let _live = live;
            service.write_log(log, rx, journal, ttl_ms).await;
        });
        Followed {
            events: Some(tx),
            stop: StopSignals {
                client: None,
                cancel,
            },
            live: None,
            client: None,
        }
    }

    /// Logs a detached execution's events as they come, and keeps its response with them once
    /// it ended.
    async fn write_log(
        &self,
        log: Arc<EventLog>,
        mut events: mpsc::Receiver<ExecutionEvent>,
        journal: Option<Arc<Journal>>,
        ttl_ms: u64,
    ) {
        while let Some(event) = events.recv().await {
            let last = match &event {
                ExecutionEvent::Result(response) => Some(response.clone()),
                _ => None,
            };
            log.push(event);
            if let (Some(response), Some(journal)) = (last, &journal) {
                self.keep_response(journal, &response, &log.ndjson(), ttl_ms);
                break;
            }
        }
    }

    /// What the journal keeps of a session's execution that ended: its end, what a waiting
    /// one needs to go on, its response when someone may come for it, and nothing of a
    /// session opened only in case a call needed an approver.
    fn record_session(&self, plan: &Plan, run: &SessionRun, response: &mut ExecutionResponse) {
        if plan.keeps_waiting
            && let Some(scope) = &plan.client
        {
            self.keep_or_forget_waiting(run, plan, scope, response);
        }
        self.session_finished(run, response);
        if plan.provisional_session
            && response.status != Status::Waiting
            && !run.journal.is_settling(&run.session)
        {
            // No call needed an approver: the session was only in case one did.
            self.drop_provisional_session(run, response);
        } else if plan.keeps_waiting && !plan.detached {
            // What a waiting or detached execution ended with stays readable.
            self.keep_response(
                &run.journal,
                response,
                "",
                plan.principal.limits.waiting_ttl_ms,
            );
        }
    }
}

impl Launched {
    /// Waits for the slot, runs the execution under the generation it was admitted by, and
    /// records its end: the session's journal, the metrics, the audit trail, and the last
    /// event.
    async fn run(self, service: Arc<ExecutionService>) -> Answer {
        let Launched {
            plan,
            session,
            ticket,
            queued,
            accepted,
            events,
            stop,
            live,
        } = self;
        let _live = live;
        let slot = match ticket {
            Ticket::Now(slot) => Some(slot),
            Ticket::Queued(queued) => queued.slot().await,
        };
        let Some(slot) = slot else {
            // The daemon stops: it never ran.
            if let Some(run) = &session {
                let _ = run.journal.store().finish_execution(
                    &run.execution,
                    ExecutionState::Cancelled,
                    crate::determinism::now_ms(),
                    0,
                    0,
                    &[],
                );
                run.journal.leave(&run.session);
            }
            return Err(SubmitError::ShuttingDown);
        };
        service.executions_total.fetch_add(1, Ordering::Relaxed);
        let mut response = run_execution(
            &plan,
            session.clone(),
            events.clone(),
            stop,
            slot.nice(),
            queued,
        )
        .await;
        if let Some(run) = &session {
            service.record_session(&plan, run, &mut response);
        }
        service.finished(&plan, accepted, &mut response);
        if let Some(events) = events {
            let _ = events
                .send(ExecutionEvent::Result(Box::new(response.clone())))
                .await;
        }
        // Its slot is held to here: the next execution starts once this one is recorded.
        drop(slot);
        Ok(response)
    }
}
