//! The catalogue as one caller sees it: every tool its principal may call, from every source,
//! turned into the TypeScript SDK and the search index that `GET /v1/sdk` and
//! `GET /v1/tools/search` serve.
//!
//! Listing tools can start lazily started servers, and building the SDK of a large API is
//! not free, so the result is cached per principal and rebuilt only when a source's tool list
//! changed (each source hands out its list as an `Arc`, so a changed list is a new pointer).

use crate::learned_types::{LearnedReport, Learning};
use crate::sdk::sdk_files::LearnedOutput;
use crate::sdk::token_figures::ToolDefinition;
use crate::sdk::{Language, Sdk, SdkTool};
use crate::tools::{ToolDescriptor, ToolRegistry};
use airlock_policy::Principal;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex;

/// What a caller's SDK was built from, plus the sources that could not be listed.
#[derive(Debug, Clone)]
pub struct CatalogueView {
    pub sdk: Arc<Sdk>,
    pub unavailable: Vec<UnavailableSource>,
    /// The tool lists the SDK was built from (unfiltered; see [`CatalogueView::definitions`]).
    lists: Vec<(String, Arc<[ToolDescriptor]>)>,
    /// What the generation learns, for the learned types of these tools.
    learning: Learning,
}

impl CatalogueView {
    /// What is learned of the tools `principal` (the view's principal) may call, under their
    /// current schema version, in namespace and name order; only `tool` (`namespace.tool`)
    /// when it is given. A tool the principal may not call is not there, whoever's calls
    /// taught it.
    pub fn learned(&self, principal: &Principal, tool: Option<&str>) -> Vec<LearnedReport> {
        let Some(types) = self.learning.types() else {
            return Vec::new();
        };
        let mut reports = Vec::new();
        for (namespace, tools) in &self.lists {
            for t in tools.iter() {
                let full = format!("{namespace}.{}", t.name);
                if tool.is_some_and(|wanted| wanted != full)
                    || !principal.allows_tool(&full)
                    || !types.has(&principal.name, namespace, &t.name)
                {
                    continue;
                }
                let contract = t.contract();
                if let Some(entry) =
                    types.get(&principal.name, namespace, &t.name, &contract.version)
                {
                    reports.push(LearnedReport::of(full, &entry, contract.declared.is_some()));
                }
            }
        }
        reports.sort_by(|a, b| a.tool.cmp(&b.tool));
        reports
    }
}

impl CatalogueView {
    /// The definitions of the tools `principal` may call (the view's principal), namespace by
    /// namespace in the sources' order, for `GET /v1/tools`.
    pub fn definitions(&self, principal: &Principal) -> Vec<ToolDefinition> {
        self.lists
            .iter()
            .flat_map(|(namespace, tools)| {
                tools
                    .iter()
                    .filter(move |t| principal.allows_tool(&format!("{namespace}.{}", t.name)))
                    .map(move |t| ToolDefinition {
                        namespace: namespace.clone(),
                        name: t.name.clone(),
                        description: t.description.clone(),
                        input_schema: t.input_schema.clone(),
                    })
            })
            .collect()
    }
}

impl CatalogueView {
    /// The SDK's file tree (each file's path and size), how many tools it describes, and the
    /// sources that could not be listed: what `GET /v1/sdk` and `tools.airlock.read_sdk({})`
    /// answer.
    pub fn tree(&self) -> Value {
        self.tree_in(Language::TypeScript)
    }

    /// [`Self::tree`] of the SDK in `language` (`GET /v1/sdk?language=python`).
    pub fn tree_in(&self, language: Language) -> Value {
        let files: Vec<Value> = self
            .sdk
            .files_in(language)
            .tree()
            .into_iter()
            .map(|(path, bytes)| json!({ "path": path, "bytes": bytes }))
            .collect();
        json!({
            "files": files,
            "tools": self.sdk.search.len(),
            "unavailable": self.unavailable,
        })
    }

    /// The best `limit` tools for `query`, and the sources that could not be listed: what
    /// `GET /v1/tools/search` and `tools.airlock.search_tools` answer.
    pub fn search(&self, query: &str, limit: usize) -> Value {
        self.search_in(query, limit, Language::TypeScript)
    }

    /// [`Self::search`] with signatures and files in `language`.
    pub fn search_in(&self, query: &str, limit: usize, language: Language) -> Value {
        json!({
            "query": query,
            "results": self.sdk.search.search_in(query, limit, language),
            "unavailable": self.unavailable,
        })
    }
}

impl CatalogueView {
    /// The SDK files a request with client-owned tools sees: the view's, with the client's
    /// tools (`tools.client.<name>`) added. Only the files that differ: `tools.d.ts`,
    /// `README.md` and `servers/client/*`.
    pub fn with_client_tools(
        &self,
        principal: &Principal,
        client: &[SdkTool],
    ) -> std::collections::BTreeMap<String, String> {
        self.with_client_tools_in(principal, client, Language::TypeScript)
    }

    /// [`Self::with_client_tools`] in `language` (in Python, the files that differ are
    /// `tools.pyi`, `README.md` and `servers/client/*`).
    pub fn with_client_tools_in(
        &self,
        principal: &Principal,
        client: &[SdkTool],
        language: Language,
    ) -> std::collections::BTreeMap<String, String> {
        let mut tools = sdk_tools(&self.lists, principal, &self.learning);
        tools.extend(client.iter().cloned());
        let files = match language {
            Language::TypeScript => crate::sdk::sdk_files::SdkFiles::generate(&tools),
            Language::Python => crate::sdk::python_files::generate(&tools),
        };
        files
            .files
            .into_iter()
            .filter(|(path, _)| {
                path == "tools.d.ts"
                    || path == "tools.pyi"
                    || path == "README.md"
                    || path.starts_with("servers/client/")
            })
            .collect()
    }
}

/// The tools of `lists` that `principal` may call, as the SDK shows them, with what is
/// learned of their results (of a source that learns, under the tool's current version).
fn sdk_tools(
    lists: &[(String, Arc<[ToolDescriptor]>)],
    principal: &Principal,
    learning: &Learning,
) -> Vec<SdkTool> {
    lists
        .iter()
        .flat_map(|(namespace, tools)| {
            tools
                .iter()
                .filter(move |t| principal.allows_tool(&format!("{namespace}.{}", t.name)))
                .map(|t| {
                    let mut tool = t.sdk_tool(namespace);
                    tool.learned = learned_output(learning, &principal.name, namespace, t);
                    tool
                })
        })
        .collect()
}

/// What `principal`'s calls taught of `tool`'s results, as its SDK shows it. A tool with a
/// declared output schema shows it only when its results contradict the declaration.
fn learned_output(
    learning: &Learning,
    principal: &str,
    namespace: &str,
    tool: &ToolDescriptor,
) -> Option<LearnedOutput> {
    let types = learning.learns(namespace)?;
    // Most tools have learned nothing: no schema hashing for them.
    if !types.has(principal, namespace, &tool.name) {
        return None;
    }
    let contract = tool.contract();
    let entry = types.get(principal, namespace, &tool.name, &contract.version)?;
    if contract.declared.is_some() && entry.drift.is_empty() {
        return None;
    }
    Some(LearnedOutput {
        schema: entry.schema(),
        results: entry.results,
        since: entry.since_day(),
        drift: entry.drift_lines(),
    })
}

/// A source whose tools are missing from the SDK, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UnavailableSource {
    pub namespace: String,
    pub error: String,
}

/// The tool lists an SDK was built from, the learned types' epoch then, and the SDK. The
/// lists are held, not just their addresses: a freed list's address can be handed to the
/// next list, which would then look unchanged.
type CachedSdk = (Vec<(String, Arc<[ToolDescriptor]>)>, u64, Arc<Sdk>);

/// One caller's catalogue: the catalogue of its execution's generation, with the sources and
/// the principal it is seen with. The daemon's built-in tools (`tools.airlock.*`,
/// [`super::builtin`]) answer from it, so a program sees exactly what its principal's
/// `GET /v1/sdk` and `GET /v1/tools/search` show, never another principal's tools.
/// Cheap to clone (every call's context holds one).
#[derive(Clone)]
pub struct CallerCatalogue(Arc<Caller>);

impl std::fmt::Debug for CallerCatalogue {
    /// The principal only: a context's debug form must not print the whole catalogue.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CallerCatalogue")
            .field(&self.0.principal.name)
            .finish()
    }
}

struct Caller {
    catalogue: Arc<ToolCatalogue>,
    registry: ToolRegistry,
    principal: Arc<Principal>,
}

impl CallerCatalogue {
    pub fn new(
        catalogue: Arc<ToolCatalogue>,
        registry: ToolRegistry,
        principal: Arc<Principal>,
    ) -> CallerCatalogue {
        CallerCatalogue(Arc::new(Caller {
            catalogue,
            registry,
            principal,
        }))
    }

    /// The caller's view, as [`ToolCatalogue::view`] gives it (may start lazily started
    /// servers; cached per principal).
    pub async fn view(&self) -> CatalogueView {
        self.0
            .catalogue
            .view(&self.0.registry, &self.0.principal)
            .await
    }

    /// The principal whose tools these are.
    pub fn principal(&self) -> &Principal {
        &self.0.principal
    }
}

#[derive(Debug, Default)]
pub struct ToolCatalogue {
    /// Principal name → what its SDK was built from, and the SDK.
    cache: Mutex<HashMap<String, CachedSdk>>,
    /// What the generation learns: its learned types are in the SDK.
    learning: Learning,
}

impl ToolCatalogue {
    /// A catalogue whose SDKs show what `learning` learned.
    pub fn new(learning: Learning) -> ToolCatalogue {
        ToolCatalogue {
            cache: Mutex::default(),
            learning,
        }
    }

    /// What the generation learns.
    pub fn learning(&self) -> &Learning {
        &self.learning
    }

    /// The SDK for `principal`: only tools its policy allows.
    pub async fn view(&self, registry: &ToolRegistry, principal: &Principal) -> CatalogueView {
        let mut lists: Vec<(String, Arc<[ToolDescriptor]>)> = Vec::new();
        let mut unavailable = Vec::new();
        // Listing may start servers; do them all at once, then take them in namespace order.
        let mut listings = tokio::task::JoinSet::new();
        for (index, source) in registry.sources().enumerate() {
            let source = source.clone();
            listings.spawn(async move {
                let listed = source.tools().await;
                (index, source.namespace().to_owned(), listed)
            });
        }
        let mut listed_all = Vec::new();
        while let Some(joined) = listings.join_next().await {
            if let Ok(item) = joined {
                listed_all.push(item);
            }
        }
        listed_all.sort_by_key(|(index, _, _)| *index);
        for (_, namespace, listed) in listed_all {
            match listed {
                Ok(tools) => lists.push((namespace, tools)),
                Err(e) => unavailable.push(UnavailableSource {
                    namespace,
                    error: e.message,
                }),
            }
        }
        // Read before the tools are: a result learned meanwhile moves it on again, so the
        // next view rebuilds rather than keeping a stale SDK.
        let epoch = self.learning.types().map_or(0, |t| t.epoch());
        let mut cache = self.cache.lock().await;
        // A source that relisted hands out a new list, so identity says what changed; a
        // learned type that changed moves the epoch.
        if let Some((seen, seen_epoch, sdk)) = cache.get(&principal.name)
            && *seen_epoch == epoch
            && same_lists(seen, &lists)
        {
            return CatalogueView {
                sdk: sdk.clone(),
                unavailable,
                lists,
                learning: self.learning.clone(),
            };
        }
        let tools = sdk_tools(&lists, principal, &self.learning);
        let sdk = Arc::new(Sdk::from_tools(tools));
        cache.insert(principal.name.clone(), (lists.clone(), epoch, sdk.clone()));
        CatalogueView {
            sdk,
            unavailable,
            lists,
            learning: self.learning.clone(),
        }
    }
}

fn same_lists(
    a: &[(String, Arc<[ToolDescriptor]>)],
    b: &[(String, Arc<[ToolDescriptor]>)],
) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((na, ta), (nb, tb))| na == nb && Arc::ptr_eq(ta, tb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{
        CallContext, ToolError, ToolErrorCode, ToolFuture, ToolSource, ToolsFuture,
    };
    use serde_json::json;

    /// A source whose list can be swapped for a new one of the same size.
    struct Swapping(std::sync::Mutex<Arc<[ToolDescriptor]>>);

    fn list(name: &str) -> Arc<[ToolDescriptor]> {
        Arc::from(vec![ToolDescriptor {
            name: name.to_owned(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            read_only: false,
        }])
    }

    impl ToolSource for Swapping {
        fn namespace(&self) -> &str {
            "s"
        }
        fn tools(&self) -> ToolsFuture<'_> {
            let tools = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
            Box::pin(async move { Ok(tools) })
        }
        fn call<'a>(
            &'a self,
            _: &'a str,
            _: serde_json::Value,
            _: &'a CallContext,
        ) -> ToolFuture<'a> {
            Box::pin(async { Err(ToolError::new(ToolErrorCode::UnknownTool, "none")).into() })
        }
    }

    /// A learned type is in the SDK of a principal that may call the tool, at once (the
    /// cached SDK is rebuilt), and nowhere else: not in another principal's SDK, search or
    /// learned list; a source with learning off shows none.
    #[tokio::test]
    async fn learned_types_show_only_where_the_tool_is_visible() {
        use crate::learned_types::{LearnedTypes, Learning, Observation};
        let source = Arc::new(Swapping(std::sync::Mutex::new(Arc::from(vec![
            list("mine")[0].clone(),
            list("theirs")[0].clone(),
        ]))));
        let mut registry = ToolRegistry::new();
        registry.register(source.clone());
        let types = Arc::new(LearnedTypes::in_memory());
        let catalogue = ToolCatalogue::new(Learning::new(Some(types.clone()), []));
        let me = Principal::new("me", vec![], &["s.mine"]);
        let other = Principal::new("other", vec![], &["s.theirs"]);
        let before = catalogue.view(&registry, &me).await;
        assert!(before.sdk.files.files["servers/s/mine.ts"].contains("MineOutput = unknown"));
        let contract = list("mine")[0].contract();
        let result = json!({"id": 7, "created": "2026-11-20T10:00:00Z"});
        types.record(
            "me",
            "s",
            "mine",
            &contract,
            Observation::of(&result, &contract),
        );
        let view = catalogue.view(&registry, &me).await;
        let file = &view.sdk.files.files["servers/s/mine.ts"];
        assert!(file.contains("// learned from 1 result since "), "{file}");
        assert!(file.contains("  id: number;"), "{file}");
        assert_eq!(view.learned(&me, None).len(), 1);
        assert_eq!(view.learned(&me, Some("s.theirs")).len(), 0);
        let theirs = catalogue.view(&registry, &other).await;
        assert!(theirs.sdk.files.files.keys().all(|p| !p.contains("mine")));
        assert!(theirs.learned(&other, None).is_empty());
        assert!(theirs.learned(&other, Some("s.mine")).is_empty());
        // Another principal that may call the same tool learned nothing from `me`'s calls:
        // what `me`'s results taught stays in `me`'s SDK.
        let also = Principal::new("also", vec![], &["s.mine"]);
        let shared = catalogue.view(&registry, &also).await;
        assert!(
            shared.sdk.files.files["servers/s/mine.ts"].contains("MineOutput = unknown"),
            "{}",
            shared.sdk.files.files["servers/s/mine.ts"]
        );
        assert!(shared.learned(&also, None).is_empty());
        let off = ToolCatalogue::new(Learning::new(Some(types), ["s".to_owned()]));
        let view = off.view(&registry, &me).await;
        assert!(view.sdk.files.files["servers/s/mine.ts"].contains("MineOutput = unknown"));
    }

    /// A relisted source shows its new tools, even when the new list lands at the address
    /// the old one had (the cache once compared addresses only; the allocator reuses a
    /// freed block of the same size readily).
    #[tokio::test]
    async fn a_changed_tool_list_rebuilds_the_sdk() {
        let source = Arc::new(Swapping(std::sync::Mutex::new(list("first"))));
        let mut registry = ToolRegistry::new();
        registry.register(source.clone());
        let principal = Principal::new("p", vec![], &["*"]);
        let catalogue = ToolCatalogue::default();
        for name in ["second", "third", "fourth"] {
            let view = catalogue.view(&registry, &principal).await;
            assert!(
                view.sdk
                    .files
                    .files
                    .keys()
                    .all(|p| !p.ends_with(&format!("/{name}.ts")))
            );
            {
                let mut current = source.0.lock().unwrap_or_else(|e| e.into_inner());
                // Free the old list first, so the new one may take its place.
                *current = Arc::from(Vec::new());
                *current = list(name);
            }
            let view = catalogue.view(&registry, &principal).await;
            assert!(
                view.sdk
                    .files
                    .files
                    .contains_key(&format!("servers/s/{name}.ts")),
                "{:?}",
                view.sdk.files.files.keys().collect::<Vec<_>>()
            );
        }
    }
}
