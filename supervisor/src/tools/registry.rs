//! All tool sources of a daemon by namespace, and name resolution: `namespace.tool` to a
//! source, with did-you-mean when nothing matches, drawn only from what the caller may call.

use crate::learned_types::ToolContract;
use crate::sdk::ToolSearch;
use crate::tools::arguments::ArgumentSchema;
use crate::tools::naming::{namespace_search, near_namespaces, near_tools, quote_list};
use crate::tools::{ToolDescriptor, ToolError, ToolErrorCode, ToolSource};
use airlock_policy::Principal;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

/// All tool sources of a daemon, by namespace.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    sources: BTreeMap<String, Arc<dyn ToolSource>>,
    /// Compiled input schemas by namespace and tool (shared by the registry's clones).
    schemas: Arc<Mutex<HashMap<String, HashMap<String, Compiled>>>>,
    /// Search indexes of namespaces' tool lists, for the did-you-mean of unknown tools: built
    /// on the first unknown name, again only when the list changed (a new list is a new
    /// `Arc`), so a program calling unknown names in a loop does not rebuild one per call.
    searches: Arc<Mutex<HashMap<String, IndexedList>>>,
}

/// The tools of `namespace` (listed as `tools`) that `principal` may call.
pub fn callable_tools(
    namespace: &str,
    tools: &[ToolDescriptor],
    principal: &Principal,
) -> Vec<ToolDescriptor> {
    tools
        .iter()
        .filter(|t| principal.allows_tool(&format!("{namespace}.{}", t.name)))
        .cloned()
        .collect()
}

/// A tool list and its search index.
type IndexedList = (Arc<[ToolDescriptor]>, Arc<ToolSearch>);

/// One tool's compiled input schema, and the tool list it came from: the list is kept, so
/// the same list (the same allocation) is recognised without comparing schemas, and a list
/// listed again (or made afresh on each call, as in-process sources do) is recognised by an
/// equal schema.
#[derive(Debug)]
struct Compiled {
    list: Arc<[ToolDescriptor]>,
    index: usize,
    schema: Arc<ArgumentSchema>,
    /// Its schema version and declared output schema (worked out with the schema).
    contract: Arc<ToolContract>,
}

/// A tool found by [`ToolRegistry::resolve`]: its source, its name there, its compiled input
/// schema and whether it only reads.
pub struct ResolvedTool {
    pub source: Arc<dyn ToolSource>,
    pub name: String,
    pub schema: Arc<ArgumentSchema>,
    /// The descriptor's [`ToolDescriptor::read_only`], as the source listed it now.
    pub read_only: bool,
    /// Its schema version and declared output schema: what its results are learned under
    /// and compared with ([`crate::learned_types`]).
    pub contract: Arc<ToolContract>,
}

impl std::fmt::Debug for ResolvedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedTool")
            .field("namespace", &self.source.namespace())
            .field("name", &self.name)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("namespaces", &self.sources.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a source; a later source with the same namespace replaces the earlier one.
    pub fn register(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.insert(source.namespace().to_owned(), source);
    }

    pub fn sources(&self) -> impl Iterator<Item = &Arc<dyn ToolSource>> {
        self.sources.values()
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.sources.keys().map(String::as_str)
    }

    /// Resolves `namespace.tool` to its source, the tool's name there, its compiled input
    /// schema and its read-only mark, or a `ToolError` that suggests near names. The names it
    /// suggests and lists are only ones `principal` may call: a namespace none of whose tools
    /// it may call is answered as one that does not exist, so a program learns nothing of what
    /// it may not call.
    pub async fn resolve(
        &self,
        full_name: &str,
        principal: &Principal,
    ) -> Result<ResolvedTool, ToolError> {
        let Some((namespace, tool)) = full_name.split_once('.') else {
            return Err(ToolError::new(
                ToolErrorCode::UnknownTool,
                format!("`{full_name}` is not a tool name"),
            )
            .with_hint("call tools as tools.<server>.<tool>(args)"));
        };
        let Some(source) = self.sources.get(namespace) else {
            return Err(self.unknown_namespace(namespace, full_name, principal));
        };
        let tools = source.tools().await?;
        let Some(index) = tools.iter().position(|t| t.name == tool) else {
            let callable = callable_tools(namespace, &tools, principal);
            if callable.is_empty() {
                return Err(self.unknown_namespace(namespace, full_name, principal));
            }
            let near = self.near_callable_tools(namespace, tool, &tools, principal);
            let near: Vec<&str> = near.iter().map(String::as_str).collect();
            let mut err = ToolError::new(
                ToolErrorCode::UnknownTool,
                format!("server `{namespace}` has no tool named `{tool}`"),
            );
            err.hint = Some(if near.is_empty() {
                let names: Vec<&str> = callable.iter().map(|t| t.name.as_str()).collect();
                format!("tools on `{namespace}`: {}", names.join(", "))
            } else {
                format!(
                    "did you mean {}?",
                    quote_list(&near, &format!("tools.{namespace}."), "")
                )
            });
            return Err(err);
        };
        let (schema, contract) = self.schema(namespace, &tools, index);
        Ok(ResolvedTool {
            source: source.clone(),
            name: tool.to_owned(),
            schema,
            read_only: tools[index].read_only,
            contract,
        })
    }

    /// The error for a namespace `principal` cannot call in (there is none, or none of its
    /// tools is allowed), naming only namespaces it may call in.
    fn unknown_namespace(
        &self,
        namespace: &str,
        full_name: &str,
        principal: &Principal,
    ) -> ToolError {
        let known: Vec<&str> = self
            .namespaces()
            .filter(|ns| *ns != namespace && principal.may_call_in(ns))
            .collect();
        let mut err = ToolError::new(
            ToolErrorCode::UnknownTool,
            format!(
                "there is no tool server named `{namespace}` with tools you may call (called as tools.{full_name})"
            ),
        );
        err.hint = Some(
            match near_namespaces(namespace, known.iter().copied()).as_slice() {
                [] if known.is_empty() => {
                    "you may call no tools; the operator grants tools with `allow` in the principal's policy entry".to_owned()
                }
                [] => format!("servers you may call: {}", known.join(", ")),
                near => format!("did you mean {}?", quote_list(near, "tools.", "")),
            },
        );
        err
    }

    /// The tools of `namespace` (listed as `tools`) that `principal` may call and an unknown
    /// `wanted` may have meant: over the namespace's cached search index when it may call
    /// them all, else over an index of the ones it may call (built for this one answer).
    pub fn near_callable_tools(
        &self,
        namespace: &str,
        wanted: &str,
        tools: &Arc<[ToolDescriptor]>,
        principal: &Principal,
    ) -> Vec<String> {
        if principal.may_call_all_in(namespace) {
            return self.near_tools(namespace, wanted, tools);
        }
        let callable = callable_tools(namespace, tools, principal);
        near_tools(wanted, &callable, &namespace_search(namespace, &callable))
    }

    /// The tools of `namespace` (listed as `tools`) that an unknown `wanted` may have meant:
    /// [`near_tools`] over the namespace's cached search index.
    fn near_tools(
        &self,
        namespace: &str,
        wanted: &str,
        tools: &Arc<[ToolDescriptor]>,
    ) -> Vec<String> {
        let cached = self
            .searches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(namespace)
            // The same list, or an equal one made afresh (in-process sources list anew).
            .filter(|(list, _)| Arc::ptr_eq(list, tools) || **list == **tools)
            .map(|(_, index)| index.clone());
        let index = match cached {
            Some(index) => index,
            None => {
                // Built outside the lock: a large catalogue must not hold up other calls.
                let index = Arc::new(namespace_search(namespace, tools));
                self.searches
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(namespace.to_owned(), (tools.clone(), index.clone()));
                index
            }
        };
        near_tools(wanted, tools, &index)
    }

    /// The compiled input schema of `tools[index]` and its contract, worked out once (and
    /// again only when the tool's schemas changed).
    fn schema(
        &self,
        namespace: &str,
        tools: &Arc<[ToolDescriptor]>,
        index: usize,
    ) -> (Arc<ArgumentSchema>, Arc<ToolContract>) {
        let tool = &tools[index];
        {
            let mut cache = self.schemas.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(known) = cache.get_mut(namespace).and_then(|t| t.get_mut(&tool.name))
                && (Arc::ptr_eq(&known.list, tools) && known.index == index
                    || known.list[known.index].input_schema == tool.input_schema
                        && known.list[known.index].output_schema == tool.output_schema)
            {
                known.list = tools.clone();
                known.index = index;
                return (known.schema.clone(), known.contract.clone());
            }
        }
        // Compiled outside the lock: a large schema must not hold up every other call.
        let schema = Arc::new(ArgumentSchema::compile(&tool.input_schema));
        let contract = Arc::new(tool.contract());
        self.schemas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(namespace.to_owned())
            .or_default()
            .insert(
                tool.name.clone(),
                Compiled {
                    list: tools.clone(),
                    index,
                    schema: schema.clone(),
                    contract: contract.clone(),
                },
            );
        (schema, contract)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{CallContext, ToolFuture, ToolsFuture};
    use serde_json::Value;

    struct Fixed;
    impl ToolSource for Fixed {
        fn namespace(&self) -> &str {
            "github"
        }
        fn tools(&self) -> ToolsFuture<'_> {
            Box::pin(async {
                Ok(["search_issues", "create_issue", "get_repo"]
                    .iter()
                    .map(|n| ToolDescriptor {
                        name: (*n).into(),
                        description: String::new(),
                        input_schema: serde_json::json!({"type": "object"}),
                        output_schema: None,
                        read_only: n.starts_with("get_") || n.starts_with("search_"),
                    })
                    .collect::<Vec<_>>()
                    .into())
            })
        }
        fn call<'a>(&'a self, _: &'a str, args: Value, _: &'a CallContext) -> ToolFuture<'a> {
            Box::pin(async move { Ok(args).into() })
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        r.register(Arc::new(Fixed));
        r
    }

    fn resolve(r: &ToolRegistry, name: &str) -> Result<(Arc<dyn ToolSource>, String), ToolError> {
        resolve_as(r, name, &Principal::new("p", vec![], &["*"]))
    }

    fn resolve_as(
        r: &ToolRegistry,
        name: &str,
        principal: &Principal,
    ) -> Result<(Arc<dyn ToolSource>, String), ToolError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(r.resolve(name, principal))
            .map(|t| (t.source, t.name))
    }

    #[test]
    fn resolves_known_tools() {
        let r = registry();
        let (_, tool) = resolve(&r, "github.get_repo").unwrap();
        assert_eq!(tool, "get_repo");
    }

    /// The journal learns from the resolution whether a tool only reads.
    #[test]
    fn resolution_carries_the_read_only_mark() {
        let r = registry();
        let read_only = |name: &str| {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(r.resolve(name, &Principal::new("p", vec![], &["*"])))
                .unwrap()
                .read_only
        };
        assert!(read_only("github.get_repo"));
        assert!(read_only("github.search_issues"));
        assert!(!read_only("github.create_issue"));
    }

    #[test]
    fn unknown_tool_suggests_the_nearest_names() {
        let err = resolve(&registry(), "github.search_issue").err().unwrap();
        assert_eq!(err.code.as_str(), "unknown_tool");
        assert_eq!(
            err.hint.as_deref(),
            Some("did you mean tools.github.search_issues?")
        );
        // No near spelling: the search finds it by its words.
        let err = resolve(&registry(), "github.repo").err().unwrap();
        assert_eq!(
            err.hint.as_deref(),
            Some("did you mean tools.github.get_repo?")
        );
    }

    #[test]
    fn unknown_namespace_suggests_servers() {
        let err = resolve(&registry(), "gthub.get_repo").err().unwrap();
        assert!(err.message.contains("`gthub`"), "{}", err.message);
        assert_eq!(err.hint.as_deref(), Some("did you mean tools.github?"));
        let err = resolve(&ToolRegistry::new(), "x.y").err().unwrap();
        assert_eq!(
            err.hint.as_deref(),
            Some(
                "you may call no tools; the operator grants tools with `allow` in the principal's policy entry"
            )
        );
    }

    /// What an unknown name is answered with names only what the caller may call: near tools
    /// it may call, the namespaces it may call in; a namespace none of whose tools it may
    /// call is answered as one that does not exist.
    #[test]
    fn suggestions_are_drawn_from_what_the_principal_may_call() {
        let mut r = registry();
        r.register(Arc::new(Secret));
        // May search issues, not read repositories.
        let reader = Principal {
            deny: vec!["github.get_*".into()],
            ..Principal::new("p", vec![], &["github.*", "secret.x*"])
        };
        let err = resolve_as(&r, "github.get_rep", &reader).err().unwrap();
        let hint = err.hint.unwrap();
        assert!(!hint.contains("get_repo"), "{hint}");
        assert!(
            hint.contains("search_issues") || hint.contains("create_issue"),
            "{hint}"
        );
        // `secret` has tools, but none this principal may call.
        let err = resolve_as(&r, "secret.xyz", &reader).err().unwrap();
        assert!(
            err.message
                .contains("no tool server named `secret` with tools you may call"),
            "{}",
            err.message
        );
        assert_eq!(err.hint.as_deref(), Some("servers you may call: github"));
        let only_github = Principal::new("p", vec![], &["github.*"]);
        let err = resolve_as(&r, "secre.x", &only_github).err().unwrap();
        assert_eq!(err.hint.as_deref(), Some("servers you may call: github"));
        // Whoever may call everything is told everything.
        let err = resolve(&r, "secret.read_al").err().unwrap();
        assert_eq!(
            err.hint.as_deref(),
            Some("did you mean tools.secret.read_all?")
        );
    }

    struct Secret;
    impl ToolSource for Secret {
        fn namespace(&self) -> &str {
            "secret"
        }
        fn tools(&self) -> ToolsFuture<'_> {
            Box::pin(async {
                Ok(vec![ToolDescriptor {
                    name: "read_all".into(),
                    description: "reads every secret".into(),
                    input_schema: serde_json::json!({"type": "object"}),
                    output_schema: None,
                    read_only: true,
                }]
                .into())
            })
        }
        fn call<'a>(&'a self, _: &'a str, args: Value, _: &'a CallContext) -> ToolFuture<'a> {
            Box::pin(async move { Ok(args).into() })
        }
    }
}
