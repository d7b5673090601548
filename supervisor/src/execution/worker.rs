//! An execution's worker: taken and given its program in one place ([`start`]), as the
//! execution's run begins, and let go of once it answered ([`let_go`]).

use super::error;
use super::plan::Plan;
use crate::agent_api::ExecutionError;
use crate::workers::pool::{
    AFTER_ANSWER, ChannelError, Checkout, ReadyWorker, WorkerChannel, WorkerPool, WorkerStartError,
};
use crate::workers::process::{WorkerExit, WorkerProcess};
use std::time::{Duration, Instant};
use tracing::{Instrument, warn};

/// A worker that has been sent its execution's `Start`.
#[derive(Debug)]
pub(super) struct StartedWorker {
    pub(super) process: WorkerProcess,
    pub(super) channel: WorkerChannel,
    /// Forked by the zygote (it reports its own peak memory).
    pub(super) forked: bool,
    pub(super) checkout: Checkout,
    /// When `Start` was written: the worker's own deadline starts as it reads it.
    pub(super) sent: Instant,
}

/// Why an execution has no worker.
#[derive(Debug)]
pub(super) enum NoWorker {
    /// None could be had.
    Checkout(WorkerStartError),
    /// The one taken could not be given the program; it was killed (and the pool told).
    Send(ChannelError, Option<WorkerExit>),
}

impl NoWorker {
    /// The execution's failure.
    pub(super) fn failure(&self) -> ExecutionError {
        match self {
            NoWorker::Checkout(e) => {
                tracing::error!(error = %e, "no worker for execution");
                error::no_worker(e)
            }
            NoWorker::Send(e, exit) => error::crashed(
                &format!("could not send the program to the worker: {e}"),
                *exit,
            ),
        }
    }
}

/// Takes a worker for `plan` (the newest pre-started one, else a new one) and gives it the
/// program, lowered to `nice` (its principal's share of the CPUs). The caller holds the
/// execution's slot.
pub(super) async fn start(plan: &Plan, nice: i32) -> Result<StartedWorker, NoWorker> {
    let pool = &plan.generation.pool;
    let (worker, checkout) = pool.checkout().await.map_err(NoWorker::Checkout)?;
    let ReadyWorker {
        mut process,
        mut channel,
        lockdown,
        ..
    } = worker;
    if nice > 0 {
        process.lower_priority(nice);
    }
    let sending = Instant::now();
    if let Err(e) = channel.send(&plan.start_message()).await {
        let exit = process.kill_and_reap(Duration::from_secs(1)).await;
        pool.replenish();
        return Err(NoWorker::Send(e, exit));
    }
    Ok(StartedWorker {
        process,
        channel,
        forked: lockdown.forked,
        checkout,
        sent: sending,
    })
}

/// After `Done` the worker exits once the daemon hangs up, and the pool replaces it. Neither
/// is the agent's business, so both happen in the background; for an execution running alone
/// they wait until its answer is usually out (`AFTER_ANSWER`), because on a small machine the
/// worker's exit (unmapping its memory) competes with writing the answer and with the client
/// reading it.
pub(super) fn let_go(pool: &WorkerPool, mut process: WorkerProcess, channel: WorkerChannel) {
    let pool = pool.clone();
    let alone = pool.in_use() <= 1;
    tokio::spawn(
        async move {
            if alone {
                tokio::time::sleep(AFTER_ANSWER).await;
            }
            drop(channel);
            pool.replenish();
            if tokio::time::timeout(Duration::from_millis(500), process.wait())
                .await
                .is_err()
            {
                warn!("worker did not exit after Done; killing it");
                process.kill_and_reap(Duration::from_secs(1)).await;
            }
        }
        .in_current_span(),
    );
}
