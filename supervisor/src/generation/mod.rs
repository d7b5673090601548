//! Policy generations: one loaded policy and everything built from it (admitted principals,
//! tool sources, the worker pool and the SDK cache). The daemon serves from the current
//! generation; an execution keeps the generation it started under until it ends, so a reload
//! never changes the rules under a running program.
//!
//! A reload ([`PolicyLoader::next_generation`]) validates the whole new policy first (every file,
//! every OpenAPI and GraphQL document) and builds nothing visible until all of it is good; on any
//! problem the current generation stays. MCP servers whose configuration and secrets are
//! unchanged carry over running; the others are shut down once the last execution of the old
//! generation is done.

use crate::learned_types::{LearnedTypes, Learning};
use crate::secrets::scanner::SecretScanner;
use crate::secrets::store::{SecretStore, SecretValue};
use crate::tools::builtin::BuiltinTools;
use crate::tools::catalogue::{CatalogueView, ToolCatalogue};
use crate::tools::sources::graphql::GraphQlApi;
use crate::tools::sources::mcp::{McpServer, ServerHost};
use crate::tools::sources::openapi::OpenApiSource as OpenApiTools;
use crate::tools::{ToolRegistry, ToolSource};
use crate::workers::pool::WorkerPool;
use airlock_policy::{Policy, PolicyWarning, Principal, ToolServer};
use serde::Serialize;
use std::hash::{DefaultHasher, Hash, Hasher};

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::{info, warn};

mod check;
mod reload;

pub use check::{PolicyCheck, check_policy};
pub use reload::{Generations, PolicyLoader, ReloadReport, start_eager_sources, worker_ceiling};

/// One loaded policy and what was built from it.
#[derive(Debug)]
pub struct PolicyGeneration {
    /// 1 for the policy the daemon started with, then one more per successful reload.
    pub number: u64,
    pub policy: Policy,
    principals: Vec<Arc<Principal>>,
    /// Every tool source: the policy's and any the embedder added.
    pub tools: ToolRegistry,
    /// The pool executions of this generation take workers from (shared with the previous
    /// generation unless the ceilings or the pool size changed).
    pub pool: WorkerPool,
    /// The SDK per principal, for this generation's principals and sources (shared with its
    /// executions, whose built-in tools answer from it).
    pub catalogue: Arc<ToolCatalogue>,
    /// When it was loaded (seconds since the Unix epoch).
    pub loaded_at: u64,
    /// Scans tool results and everything agent-bound: the embedded shape rules plus every
    /// secret this policy's sources reference.
    pub scanner: SecretScanner,
    /// The MCP servers built from the policy, kept so the next generation can reuse them.
    mcp_servers: Vec<BuiltServer>,
    /// Sources the next generation dropped: shut down when this generation is gone.
    retired: Mutex<ToolRegistry>,
}

/// What every generation builds its sources with.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// The credentials the policy's sources may reference.
    pub secrets: Arc<SecretStore>,
    /// Sources the embedder added (tests' fault injection), carried into every generation.
    pub extra: ToolRegistry,
    /// Where confined servers' launcher and scratch directories are.
    pub host: ServerHost,
    /// The daemon's learned output types (kept across reloads); `None`: nothing is learned.
    pub learned: Option<Arc<LearnedTypes>>,
}

/// An MCP server built from a `[[server]]` entry, with what decides whether it can be kept.
#[derive(Debug, Clone)]
struct BuiltServer {
    config: ToolServer,
    secrets: u64,
    source: Arc<McpServer>,
}

/// What a source that cannot be built costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFailure {
    /// The whole generation (a reload: the last good policy stays).
    RejectsGeneration,
    /// Only itself, logged (the policy the daemon starts with: it serves the rest).
    DropsSource,
}

impl PolicyGeneration {
    /// The MCP servers of this generation, in policy order.
    pub fn mcp_servers(&self) -> impl Iterator<Item = &Arc<McpServer>> {
        self.mcp_servers.iter().map(|built| &built.source)
    }

    /// Builds a generation. `extra` sources (an embedder's, e.g. tests' fault injection) are
    /// registered after the policy's and carried into every later generation. A secret
    /// scanner that cannot be built rejects the generation whatever `on_failure` says.
    pub fn build(
        number: u64,
        mut policy: Policy,
        context: &SourceContext,
        pool: WorkerPool,
        previous: Option<&PolicyGeneration>,
        on_failure: SourceFailure,
    ) -> Result<PolicyGeneration, Vec<SourceProblem>> {
        let SourceContext {
            secrets,
            extra,
            host,
            learned,
        } = context;
        let mut tools = ToolRegistry::new();
        let mut problems = Vec::new();
        let mut mcp_servers = Vec::new();
        for config in &policy.servers {
            let fingerprint = secret_fingerprint(secrets, config.transport.secrets());
            let kept = previous.and_then(|p| {
                p.mcp_servers
                    .iter()
                    // `learn_types` is the pipeline's, not the server's: no restart for it.
                    .find(|b| {
                        b.secrets == fingerprint
                            && ToolServer {
                                learn_types: config.learn_types,
                                ..b.config.clone()
                            } == *config
                    })
            });
            let source = match kept {
                Some(built) => built.source.clone(),
                None => Arc::new(
                    McpServer::new(config.clone(), secrets.clone()).with_host(host.clone()),
                ),
            };
            tools.register(source.clone());
            mcp_servers.push(BuiltServer {
                config: config.clone(),
                secrets: fingerprint,
                source,
            });
        }
        for config in &policy.openapi {
            match OpenApiTools::load(config.clone(), secrets.clone()) {
                Ok(source) => {
                    info!(source = %config.name, tools = source.descriptors().len(), base_url = %source.base_url(), "openapi source loaded");
                    tools.register(Arc::new(source));
                }
                Err(e) => problems.push(SourceProblem {
                    source: config.name.clone(),
                    message: e.to_string(),
                }),
            }
        }
        for config in &policy.graphql {
            match GraphQlApi::load(config.clone(), secrets.clone()) {
                Ok(source) => {
                    info!(source = %config.name, tools = source.descriptors().len(), endpoint = %config.endpoint, "graphql source loaded");
                    for problem in source.missing_secrets() {
                        warn!("{problem}");
                    }
                    tools.register(Arc::new(source));
                }
                Err(e) => problems.push(SourceProblem {
                    source: config.name.clone(),
                    message: e.to_string(),
                }),
            }
        }
        for source in extra.sources() {
            tools.register(source.clone());
        }
        // The daemon's own tools, last: the namespace is reserved, so nothing else is there.
        tools.register(Arc::new(BuiltinTools::new()));
        if on_failure == SourceFailure::DropsSource {
            for problem in &problems {
                tracing::error!(source = %problem.source, "tool source not loaded, its tools are unavailable: {}", problem.message);
            }
            let failed = |name: &String| problems.iter().any(|p| p.source == *name);
            policy.openapi.retain(|s| !failed(&s.name));
            policy.graphql.retain(|s| !failed(&s.name));
            problems.clear();
        }
        let scanner = match policy_scanner(&policy, secrets) {
            Ok(scanner) => scanner,
            Err(e) => {
                problems.push(SourceProblem {
                    source: "secret scanner".to_owned(),
                    message: e.to_string(),
                });
                return Err(problems);
            }
        };
        let catalogue = Arc::new(ToolCatalogue::new(Learning::new(
            learned.clone(),
            learning_off(&policy),
        )));
        let generation = PolicyGeneration {
            scanner,
            number,
            principals: policy.principals.iter().cloned().map(Arc::new).collect(),
            policy,
            tools,
            pool,
            catalogue,
            loaded_at: unix_now(),
            mcp_servers,
            retired: Mutex::new(ToolRegistry::new()),
        };
        if problems.is_empty() {
            Ok(generation)
        } else {
            // Nothing of a rejected generation may keep running: servers it started fresh
            // have not been started yet (they start on first use), so dropping is enough.
            Err(problems)
        }
    }

    /// The SDK and search index for `principal` (may start lazily started servers).
    pub async fn catalogue_view(&self, principal: &Principal) -> CatalogueView {
        self.catalogue.view(&self.tools, principal).await
    }

    /// The principal named `name`.
    pub fn principal(&self, name: &str) -> Option<Arc<Principal>> {
        self.principals.iter().find(|p| p.name == name).cloned()
    }

    /// The first principal that admits a peer with these credentials.
    pub fn admit(&self, uid: u32, gid: u32, groups: &[u32]) -> Option<Arc<Principal>> {
        let admitted = self.policy.admit(uid, gid, groups)?;
        self.principals
            .iter()
            .find(|p| p.name == admitted.name)
            .cloned()
    }

    /// Hands this generation the sources its successor no longer uses; they are shut down
    /// when this generation is dropped (its last execution ended).
    fn retire(&self, next: &PolicyGeneration) {
        let kept = |source: &Arc<dyn ToolSource>| {
            next.tools
                .sources()
                .any(|s| std::ptr::addr_eq(Arc::as_ptr(s), Arc::as_ptr(source)))
        };
        let mut retired = ToolRegistry::new();
        for source in self.tools.sources().filter(|s| !kept(s)) {
            retired.register(source.clone());
        }
        *self
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = retired;
    }

    /// Shuts down every source (daemon shutdown).
    pub async fn shutdown_sources(&self) {
        for source in self.tools.sources() {
            source.shutdown().await;
        }
    }
}

impl Drop for PolicyGeneration {
    fn drop(&mut self) {
        let retired = std::mem::take(
            &mut *self
                .retired
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if retired.sources().next().is_none() {
            return;
        }
        // Shutting a server down waits for its process; that happens on the runtime, not in
        // whichever task dropped the last reference.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for source in retired.sources() {
                    info!(
                        source = source.namespace(),
                        "shutting down a tool source the reloaded policy no longer uses"
                    );
                    source.shutdown().await;
                }
            });
        }
    }
}

/// The sources whose policy entry says `learn_types = false`.
fn learning_off(policy: &Policy) -> Vec<String> {
    let servers = policy.servers.iter().map(|s| (&s.name, s.learn_types));
    let openapi = policy.openapi.iter().map(|s| (&s.name, s.learn_types));
    let graphql = policy.graphql.iter().map(|s| (&s.name, s.learn_types));
    servers
        .chain(openapi)
        .chain(graphql)
        .filter(|(_, learns)| !learns)
        .map(|(name, _)| name.clone())
        .collect()
}

/// The scanner for a policy: every secret its sources reference that the store can give is a
/// known secret (one that cannot be read is not held by the daemon either, so it cannot leak).
fn policy_scanner(
    policy: &Policy,
    secrets: &SecretStore,
) -> Result<SecretScanner, crate::secrets::scanner::ScannerError> {
    let mut names: Vec<&str> = Vec::new();
    for server in &policy.servers {
        names.extend(server.transport.secrets());
    }
    for source in &policy.openapi {
        names.extend(source.secrets());
    }
    for source in &policy.graphql {
        names.extend(source.secrets());
    }
    names.sort_unstable();
    names.dedup();
    let values: Vec<(&str, SecretValue)> = names
        .into_iter()
        .filter_map(|name| secrets.get(name).ok().map(|value| (name, value)))
        .collect();
    SecretScanner::new(values.iter().map(|(name, value)| (*name, value)))
}

/// A tool source that could not be built from the policy.
#[derive(Debug, Clone, Serialize)]
pub struct SourceProblem {
    /// The source's name in the policy.
    pub source: String,
    /// Why (names the file and place).
    pub message: String,
}

/// Detects a changed secret without keeping its value: a hash of each referenced secret's
/// value (or of its absence). Collisions only cost a server restart that was not needed.
fn secret_fingerprint<'a>(secrets: &SecretStore, names: impl Iterator<Item = &'a str>) -> u64 {
    let mut hasher = DefaultHasher::new();
    for name in names {
        name.hash(&mut hasher);
        match secrets.get(name) {
            Ok(value) => value.expose().hash(&mut hasher),
            Err(_) => 0u8.hash(&mut hasher),
        }
    }
    hasher.finish()
}

/// The warnings of a policy as lines.
pub(crate) fn warning_lines(warnings: &[PolicyWarning]) -> Vec<String> {
    warnings.iter().map(ToString::to_string).collect()
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
