//! A tool source backed by a GraphQL endpoint (`[[graphql]]` in the policy): the schema file
//! (SDL, or the JSON result of an introspection query) is read once at start-up and every field
//! of the query and mutation root types becomes a tool.
//!
//! Tool names (all sanitised with [`crate::tools::sources::mcp::identifiers`]):
//! - a query field `repository` is the tool `repository`;
//! - a mutation field `createIssue` is the tool `mutation_createIssue` (queries and mutations
//!   are separate namespaces in GraphQL, so the prefix keeps them from colliding, and lets an
//!   operator deny every mutation with one glob: `deny = ["github.mutation_*"]`);
//! - `query` takes `{ query, variables?, operationName? }` and runs a custom document that may
//!   contain only queries, and `mutate` takes the same and may also run mutations. Separate
//!   tools, so that granting `query` never grants writes. A schema field whose name collides
//!   with either gets `_2`.
//!
//! A field tool's arguments are the field's arguments, as a JSON Schema (scalars as JSON types,
//! custom scalars as any value, enums as string enums, input objects under `$defs`), checked
//! by the call pipeline before anything is sent. Its document selects a default selection
//! set: the return type's scalar and enum fields, down to `selection_depth` levels of object
//! fields, skipping deprecated fields and fields that need arguments, with `__typename` on
//! interfaces and unions, `first: 10` on Relay connections, and a cap on the number of fields
//! so that huge types (GitHub's `Repository`) stay bounded. The result is `data.<field>`;
//! a response with GraphQL `errors` fails the call with `upstream_error`.
//!
//! Query fields and the `query` tool only read ([`ToolDescriptor::read_only`]); mutation
//! fields and `mutate` may write. A call with an idempotency key
//! ([`CallContext::idempotency_key`]) sends it as the `Idempotency-Key` header when its
//! document has a mutation (a mutation field, or a `mutate` document with one), unless the
//! policy's `headers` set that header already.
//!
//! Schemas are parsed without validation (`graphql-parser`), because real schemas are not
//! always valid: GitHub's has duplicate field definitions. A duplicate field, or a type defined
//! twice, is merged and the first definition of each field wins.
//!
//! The rooms: `load` reads the schema file into the types tools need, `schema` makes
//! the tools (names, input schemas, output schemas), `selection` chooses a field tool's
//! default selection set, `send` makes a call and reads its answer.

mod load;
mod schema;
mod selection;
mod send;

pub use load::GraphQlLoadError;
pub use send::{DocumentError, parses_as_document};

use crate::secrets::store::SecretStore;
use crate::tools::coercion::OutputSchema;
use crate::tools::sources::settings::Settings;
use crate::tools::{CallContext, CallGate, ToolDescriptor, ToolFuture, ToolSource, ToolsFuture};
use airlock_policy::GraphQlSource;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Which root type a field or document belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Query,
    Mutation,
}

impl Operation {
    fn keyword(self) -> &'static str {
        match self {
            Operation::Query => "query",
            Operation::Mutation => "mutation",
        }
    }
}

#[derive(Debug)]
enum ToolKind {
    /// One root field with its default selection set.
    Field {
        operation: Operation,
        field: String,
        /// The field's arguments with their GraphQL types, in schema order.
        args: Vec<(String, String)>,
        /// `{ … }` or empty for a scalar result.
        selection: String,
    },
    /// A document the program writes; `Mutation` allows mutations as well as queries.
    Custom(Operation),
}

#[derive(Debug)]
struct Tool {
    descriptor: ToolDescriptor,
    kind: ToolKind,
    /// The descriptor's output schema, compiled on the first call that needed it: results
    /// that break it trivially (a custom scalar's) are coerced
    /// ([`crate::tools::coercion::mend_result`]).
    output: OnceLock<Option<OutputSchema>>,
}

impl Tool {
    fn output(&self) -> Option<&OutputSchema> {
        self.output
            .get_or_init(|| {
                self.descriptor
                    .output_schema
                    .as_ref()
                    .and_then(|s| OutputSchema::compile(s).ok())
            })
            .as_ref()
    }
}

/// One configured GraphQL endpoint with its tools.
#[derive(Debug)]
pub struct GraphQlApi {
    config: GraphQlSource,
    secrets: Arc<SecretStore>,
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
    descriptors: Arc<[ToolDescriptor]>,
    client: reqwest::Client,
    gate: CallGate,
}

impl GraphQlApi {
    pub fn config(&self) -> &GraphQlSource {
        &self.config
    }

    /// The tools as programs see them.
    pub fn descriptors(&self) -> &[ToolDescriptor] {
        &self.descriptors
    }

    /// The secrets the headers name that the store cannot give now, as warnings: the calls
    /// fail (naming the secret) until they are provided.
    pub fn missing_secrets(&self) -> Vec<String> {
        self.config
            .headers
            .iter()
            .filter_map(|(key, value)| {
                let secret = value.secret()?;
                let error = self.secrets.get(secret).err()?;
                Some(format!(
                    "graphql source `{}`: headers.{key} needs secret `{secret}`, so its calls will fail until it is provided: {error}",
                    self.config.name
                ))
            })
            .collect()
    }

    fn settings(&self) -> Settings<'_> {
        Settings {
            kind: "GraphQL source",
            name: &self.config.name,
            store: &self.secrets,
        }
    }
}

impl ToolSource for GraphQlApi {
    fn namespace(&self) -> &str {
        &self.config.name
    }

    fn tools(&self) -> ToolsFuture<'_> {
        let descriptors = self.descriptors.clone();
        Box::pin(async move { Ok(descriptors) })
    }

    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a> {
        Box::pin(self.perform(tool, args, ctx))
    }

    fn gate(&self) -> Option<&CallGate> {
        Some(&self.gate)
    }

    fn coerce(&self) -> airlock_policy::CoercePolicy {
        self.config.coerce
    }
}

#[cfg(test)]
mod tests;
