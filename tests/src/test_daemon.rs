//! A real daemon (`airlock_supervisor::run`) with real workers on a temporary socket, started
//! inside the test's own tokio runtime.

use crate::binaries;
use crate::test_tools::TestTools;
use airlock_policy::Policy;
use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, RequestLanguage};
use airlock_supervisor::audit_log::{AuditQuery, ExecutionRow, query as audit_query};
use airlock_supervisor::client::{Client, ClientError};
use airlock_supervisor::secrets::scanner::SharedScanner;
use airlock_supervisor::tools::{ToolRegistry, ToolSource};
use airlock_supervisor::{DaemonConfig, run};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How to start a [`TestDaemon`].
pub struct DaemonOptions {
    pub pool_size: usize,
    pub worker_path: PathBuf,
    /// Last word on the policy before the daemon starts.
    pub adjust: Box<dyn FnOnce(&mut Policy) + Send>,
    pub tools: Option<Arc<TestTools>>,
    /// More tool sources besides `test` (e.g. real MCP servers).
    pub sources: Vec<Arc<dyn ToolSource>>,
    /// Read the policy from this file (with its drop-ins) instead of adjusting the embedded
    /// default, and reload from it (`POST /v1/reload`).
    pub policy_file: Option<PathBuf>,
    /// The daemon's credential store (name, value).
    pub secrets: Vec<(String, String)>,
    /// Its state directory (journal, tool servers' scratch directories), for a daemon that
    /// starts where an earlier one stopped; by default one of its own, gone with it.
    pub state_directory: Option<PathBuf>,
    /// The scanner of the process's log subscriber, as `airlockd` passes it (the daemon puts
    /// its policy's scanner in it).
    pub log_scanner: Option<SharedScanner>,
}

impl std::fmt::Debug for DaemonOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonOptions")
            .field("pool_size", &self.pool_size)
            .field("worker_path", &self.worker_path)
            .finish()
    }
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            pool_size: 0,
            worker_path: binaries::worker(),
            adjust: Box::new(|_| {}),
            tools: None,
            sources: Vec::new(),
            policy_file: None,
            secrets: Vec::new(),
            state_directory: None,
            log_scanner: None,
        }
    }
}

impl DaemonOptions {
    pub fn pool(mut self, n: usize) -> Self {
        self.pool_size = n;
        self
    }

    pub fn worker(mut self, path: PathBuf) -> Self {
        self.worker_path = path;
        self
    }

    pub fn source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    pub fn secret(mut self, name: &str, value: &str) -> Self {
        self.secrets.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn policy_file(mut self, path: PathBuf) -> Self {
        self.policy_file = Some(path);
        self
    }

    /// The daemon writes through the log subscriber that scans with `scanner`
    /// ([`airlock_supervisor::daemon::logging::init`]).
    pub fn log(mut self, scanner: SharedScanner) -> Self {
        self.log_scanner = Some(scanner);
        self
    }

    pub fn policy(mut self, f: impl FnOnce(&mut Policy) + Send + 'static) -> Self {
        self.adjust = Box::new(f);
        self
    }
}

/// A running daemon; dropping it shuts the daemon down (abruptly).
#[derive(Debug)]
pub struct TestDaemon {
    pub socket: PathBuf,
    pub tools: Arc<TestTools>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    state: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestDaemon {
    pub async fn start() -> TestDaemon {
        Self::start_with(DaemonOptions::default()).await
    }

    pub async fn start_with(options: DaemonOptions) -> TestDaemon {
        let dir = tempfile::Builder::new()
            .prefix("airlock-test-")
            .tempdir()
            .expect("tempdir");
        let socket = dir.path().join("airlock.sock");
        let state = options
            .state_directory
            .unwrap_or_else(|| dir.path().join("state"));
        let mut policy = Policy::embedded_default();
        policy.daemon.pool_size = options.pool_size;
        policy.daemon.shutdown_grace_ms = 5_000;
        // The audit log of this daemon only, gone with its directory.
        policy.audit.directory = Some(dir.path().join("audit"));
        let inherited = policy.limits.clone();
        (options.adjust)(&mut policy);
        // A principal's limits are resolved from [limits] when the file is read; a test that
        // changes [limits] in code means its principals to follow, unless it set theirs.
        for principal in &mut policy.principals {
            if principal.limits == inherited {
                principal.limits = policy.limits.clone();
            }
        }
        let tools = options.tools.unwrap_or_default();
        let mut registry = ToolRegistry::new();
        registry.register(tools.clone());
        for source in options.sources {
            registry.register(source);
        }
        let listener =
            airlock_supervisor::daemon::socket_path::bind(&socket, 0o660).expect("bind socket");
        let listener = tokio::net::UnixListener::from_std(listener).expect("listener");
        if let Some(file) = &options.policy_file {
            policy = Policy::load(file).expect("the test's policy file is valid");
            // Unless the file names one, the log of this daemon only: the default is the
            // user's state directory, which daemons of tests running at the same time would
            // share (and wait on each other's locks in).
            if policy.audit.directory.is_none() {
                policy.audit.directory = Some(dir.path().join("audit"));
            }
        }
        let config = DaemonConfig {
            tools: registry,
            policy_path: options.policy_file,
            secrets: Arc::new(
                airlock_supervisor::secrets::store::SecretStore::with_values(options.secrets),
            ),
            // Tool servers' scratch directories of this daemon only.
            state_directory: Some(state.clone()),
            log_scanner: options.log_scanner,
            ..DaemonConfig::new(policy, options.worker_path)
        };
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            run(config, listener, async {
                let _ = rx.await;
            })
            .await
            .expect("daemon run failed");
        });
        TestDaemon {
            socket,
            tools,
            shutdown: Some(tx),
            task: Some(task),
            state,
            _dir: dir,
        }
    }

    /// `POST path` with a JSON body: the status and the body as JSON (panics, with the body,
    /// when the answer is not JSON).
    pub async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let (status, text) = self
            .client()
            .await
            .post(path, body.to_string().into())
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("POST {path} answered {status} with no JSON ({e}): {text}"));
        (status.as_u16(), value)
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.socket)
            .await
            .expect("connect to test daemon")
    }

    /// Runs TypeScript with the default timeout.
    pub async fn exec(&self, code: &str) -> ExecutionResponse {
        self.try_exec(code, None)
            .await
            .expect("execution request failed")
    }

    pub async fn exec_timeout(&self, code: &str, timeout_ms: u64) -> ExecutionResponse {
        self.try_exec(code, Some(timeout_ms))
            .await
            .expect("execution request failed")
    }

    pub async fn try_exec(
        &self,
        code: &str,
        timeout_ms: Option<u64>,
    ) -> Result<ExecutionResponse, ClientError> {
        let mut client = self.client().await;
        client
            .execute(&ExecutionRequest {
                code: code.to_owned(),
                language: RequestLanguage::Typescript,
                timeout_ms,
                session: None,
                replay: None,
                ..Default::default()
            })
            .await
    }

    /// Runs TypeScript in a session (`"new"` for a new one), replaying as `replay` says.
    pub async fn exec_in(
        &self,
        code: &str,
        session: &str,
        replay: Option<airlock_supervisor::agent_api::ReplayMode>,
    ) -> Result<ExecutionResponse, ClientError> {
        self.client()
            .await
            .execute(&ExecutionRequest {
                code: code.to_owned(),
                language: RequestLanguage::Typescript,
                timeout_ms: None,
                session: Some(session.to_owned()),
                replay,
                ..Default::default()
            })
            .await
    }

    /// How many idle pool workers `/v1/health` reports now.
    pub async fn idle_workers(&self) -> usize {
        let (_, body) = self.client().await.get("/v1/health").await.expect("health");
        let health: serde_json::Value = serde_json::from_str(&body).expect("health json");
        health["pool"]["idle"].as_u64().unwrap_or(0) as usize
    }

    /// Waits until `/v1/health` reports at least `n` idle pool workers.
    pub async fn wait_for_idle_workers(&self, n: usize) {
        for _ in 0..500 {
            if self.idle_workers().await >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("pool never reached {n} idle workers");
    }

    /// This daemon's state directory (its journal, tool servers' scratch directories).
    pub fn state_directory(&self) -> PathBuf {
        self.state.clone()
    }

    /// Where this daemon's audit log is (`[audit] directory`).
    pub fn audit_directory(&self) -> PathBuf {
        self._dir.path().join("audit")
    }

    /// What this daemon's audit log holds, newest first, once it holds anything: the log's
    /// own thread writes it, so this waits for it (up to 10 s; empty if nothing came).
    pub async fn audited_executions(&self) -> Vec<ExecutionRow> {
        for _ in 0..500 {
            match audit_query::read(&self.audit_directory(), &AuditQuery::default()) {
                Ok(rows) if !rows.is_empty() => return rows,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        Vec::new()
    }

    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Graceful shutdown; waits for `run` to return.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("daemon task panicked");
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
