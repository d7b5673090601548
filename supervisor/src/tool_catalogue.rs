//! The catalogue as one caller sees it: every tool its principal may call, from every source,
//! turned into the TypeScript SDK and the search index that `GET /v1/sdk` and
//! `GET /v1/tools/search` serve.
//!
//! Listing tools can start lazily started servers, and building the SDK of a large API is
//! not free, so the result is cached per principal and rebuilt only when a source's tool list
//! changed (each source hands out its list as an `Arc`, so a changed list is a new pointer).

use crate::tool_source::{ToolDescriptor, ToolRegistry};
use crate::typescript_sdk::{Sdk, SdkTool};
use airlock_policy::Principal;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex;

/// What a caller's SDK was built from, plus the sources that could not be listed.
#[derive(Debug, Clone)]
pub struct CatalogueView {
    pub sdk: Arc<Sdk>,
    pub unavailable: Vec<UnavailableSource>,
}

/// A source whose tools are missing from the SDK, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UnavailableSource {
    pub namespace: String,
    pub error: String,
}

/// The tool lists (by pointer) an SDK was built from, and the SDK.
type CachedSdk = (Vec<usize>, Arc<Sdk>);

#[derive(Debug, Default)]
pub struct ToolCatalogue {
    /// Principal name → what its SDK was built from, and the SDK.
    cache: Mutex<HashMap<String, CachedSdk>>,
}

impl ToolCatalogue {
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
        // The pointer identity of each list: a source that relisted hands out a new one.
        let fingerprint: Vec<usize> = lists
            .iter()
            .map(|(_, tools)| Arc::as_ptr(tools).cast::<u8>() as usize)
            .collect();
        let mut cache = self.cache.lock().await;
        if let Some((seen, sdk)) = cache.get(&principal.name)
            && *seen == fingerprint
        {
            return CatalogueView {
                sdk: sdk.clone(),
                unavailable,
            };
        }
        let tools: Vec<SdkTool> = lists
            .iter()
            .flat_map(|(namespace, tools)| {
                tools
                    .iter()
                    .filter(move |t| principal.allows_tool(&format!("{namespace}.{}", t.name)))
                    .map(|t| SdkTool {
                        namespace: namespace.clone(),
                        name: t.name.clone(),
                        description: t.description.clone(),
                        input_schema: t.input_schema.clone(),
                        output_schema: None,
                    })
            })
            .collect();
        let sdk = Arc::new(Sdk::new(&tools));
        cache.insert(principal.name.clone(), (fingerprint, sdk.clone()));
        CatalogueView { sdk, unavailable }
    }
}
