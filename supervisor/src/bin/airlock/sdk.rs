//! `airlock sdk …`: reads the SDK from the daemon's discovery API (its files, tool search,
//! what was learned of results, token figures).

use crate::args::{SdkCommand, SdkLanguageArg};
use crate::daemon::connect;
use airlock_supervisor::client::Client;
use airlock_supervisor::sdk::token_figures::{self, ToolDefinition};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `airlock sdk …`: reads the SDK from the daemon's discovery API.
pub async fn run(socket: Option<PathBuf>, action: SdkCommand) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    match action {
        SdkCommand::Tree { language } => tree(&mut client, language).await?,
        SdkCommand::Cat { path, language } => {
            print!(
                "{}",
                get_ok(
                    &mut client,
                    &format!("/v1/sdk/{}{}", encode_path(&path), language.query('?'))
                )
                .await?
            );
        }
        SdkCommand::Search {
            words,
            limit,
            language,
        } => search(&mut client, &words, limit, language).await?,
        SdkCommand::Stats { json } => stats(&mut client, json).await?,
        SdkCommand::Learned { tool, json } => learned(&mut client, tool.as_deref(), json).await?,
        SdkCommand::Forget { tool } => forget(&mut client, &tool).await?,
        SdkCommand::Write { dir, language } => write(&mut client, &dir, language).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The body of a successful GET, or the API's error message.
async fn get_ok(client: &mut Client, path: &str) -> Result<String> {
    let (status, body) = client.get(path).await?;
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(body);
        bail!("{message}");
    }
    Ok(body)
}

/// `airlock sdk tree`: the SDK's files, path and size.
async fn tree(client: &mut Client, language: SdkLanguageArg) -> Result<()> {
    let listing: serde_json::Value =
        serde_json::from_str(&get_ok(client, &format!("/v1/sdk{}", language.query('?'))).await?)?;
    for file in listing["files"].as_array().into_iter().flatten() {
        println!(
            "{:>9}  {}",
            file["bytes"],
            file["path"].as_str().unwrap_or_default()
        );
    }
    report_unavailable(&listing);
    Ok(())
}

/// `airlock sdk search WORDS…`: one-line signatures, best first.
async fn search(
    client: &mut Client,
    words: &[String],
    limit: usize,
    language: SdkLanguageArg,
) -> Result<()> {
    let query = encode_query(&words.join(" "));
    let found: serde_json::Value = serde_json::from_str(
        &get_ok(
            client,
            &format!(
                "/v1/tools/search?q={query}&limit={limit}{}",
                language.query('&')
            ),
        )
        .await?,
    )?;
    let results = found["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        eprintln!("airlock: no tool matches; `airlock sdk cat README.md` lists the namespaces");
    }
    for hit in results {
        println!("{}", hit["signature"].as_str().unwrap_or_default());
        if let Some(summary) = hit["summary"].as_str().filter(|s| !s.is_empty()) {
            println!("    {summary}");
        }
    }
    report_unavailable(&found);
    Ok(())
}

/// `airlock sdk stats`: the token figures of the tool definitions against the entry point.
async fn stats(client: &mut Client, json: bool) -> Result<()> {
    let answer: serde_json::Value = serde_json::from_str(&get_ok(client, "/v1/tools").await?)?;
    let definitions: Vec<ToolDefinition> = serde_json::from_value(answer["tools"].clone())
        .context("the daemon's GET /v1/tools answer has no tool list")?;
    let readme = get_ok(client, "/v1/sdk/README.md").await?;
    let figures = token_figures::measure(&definitions, &readme)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        println!(
            "tool definitions, as a classic tools array: {:>9} tokens ({} tools)",
            figures.definitions_tokens, figures.tools
        );
        println!(
            "SDK entry point (README.md):               {:>9} tokens",
            figures.entry_point_tokens
        );
        println!(
            "reduction:                                 {:>9.2} %",
            figures.reduction_percent
        );
        println!(
            "(tokenizer {}; the tools array is OpenAI-style JSON, compact, with each tool's name, description and input schema)",
            figures.tokenizer
        );
    }
    report_unavailable(&answer);
    Ok(())
}

/// `airlock sdk learned [TOOL]`: each tool's learned output type and its drift.
async fn learned(client: &mut Client, tool: Option<&str>, json: bool) -> Result<()> {
    let path = match tool {
        Some(tool) => format!("/v1/sdk/learned?tool={}", encode_query(tool)),
        None => "/v1/sdk/learned".to_owned(),
    };
    let answer: serde_json::Value = serde_json::from_str(&get_ok(client, &path).await?)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let learned = answer["learned"].as_array().cloned().unwrap_or_default();
    if learned.is_empty() {
        eprintln!(
            "airlock: nothing is learned yet; types are learned from your tools' successful results"
        );
    }
    for entry in learned {
        println!(
            "tools.{}: learned from {} result(s) since {}{}",
            entry["tool"].as_str().unwrap_or_default(),
            entry["results"],
            entry["since"].as_str().unwrap_or_default(),
            if entry["declared"] == true {
                " (the tool declares an output schema)"
            } else {
                ""
            }
        );
        for line in entry["typescript"].as_str().unwrap_or_default().lines() {
            println!("    {line}");
        }
        for drift in entry["drift"].as_array().into_iter().flatten() {
            println!("    drift: {}", drift.as_str().unwrap_or_default());
        }
    }
    Ok(())
}

/// `airlock sdk forget TOOL`.
async fn forget(client: &mut Client, tool: &str) -> Result<()> {
    let (status, body) = client
        .delete(&format!("/v1/sdk/learned/{}", encode_path(tool)))
        .await?;
    if !status.is_success() {
        let answer = serde_json::from_str::<serde_json::Value>(&body).unwrap_or_default();
        let message = answer["error"]["message"].as_str().unwrap_or(&body);
        match answer["error"]["hint"].as_str() {
            Some(hint) => bail!("{message} ({hint})"),
            None => bail!("{message}"),
        }
    }
    eprintln!("airlock: forgot what was learned of tools.{tool}");
    Ok(())
}

/// `airlock sdk write DIR`: every file of the SDK under `dir`.
async fn write(client: &mut Client, dir: &Path, language: SdkLanguageArg) -> Result<()> {
    let listing: serde_json::Value =
        serde_json::from_str(&get_ok(client, &format!("/v1/sdk{}", language.query('?'))).await?)?;
    let mut written = 0;
    for file in listing["files"].as_array().into_iter().flatten() {
        let Some(path) = file["path"].as_str() else {
            continue;
        };
        // The daemon's paths are relative and plain; refuse anything else rather than
        // write outside DIR.
        if !plain_relative(path) {
            bail!("refusing the SDK path {path:?}");
        }
        let text = get_ok(
            client,
            &format!("/v1/sdk/{}{}", encode_path(path), language.query('?')),
        )
        .await?;
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&target, text)
            .with_context(|| format!("cannot write {}", target.display()))?;
        written += 1;
    }
    eprintln!("airlock: wrote {written} file(s) under {}", dir.display());
    report_unavailable(&listing);
    Ok(())
}

/// Whether an SDK path is relative and plain: no empty, `.` or `..` part.
fn plain_relative(path: &str) -> bool {
    !path
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
}

fn report_unavailable(answer: &serde_json::Value) {
    for source in answer["unavailable"].as_array().into_iter().flatten() {
        eprintln!(
            "airlock: tools of `{}` are missing: {}",
            source["namespace"].as_str().unwrap_or_default(),
            source["error"].as_str().unwrap_or_default()
        );
    }
}

/// Percent-encodes what a URL path segment cannot hold (keeps `/`).
fn encode_path(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn encode_query(text: &str) -> String {
    encode_path(text).replace('/', "%2F")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_keep_their_slashes() {
        assert_eq!(
            encode_path("servers/github/index.ts"),
            "servers/github/index.ts"
        );
        assert_eq!(encode_path("a b/c?d#e%f"), "a%20b/c%3Fd%23e%25f");
        assert_eq!(encode_path("A-z_0.9~"), "A-z_0.9~");
        assert_eq!(encode_path("é"), "%C3%A9");
    }

    #[test]
    fn queries_encode_slashes_too() {
        assert_eq!(encode_query("open issue/pr"), "open%20issue%2Fpr");
        assert_eq!(encode_query("github.list_issues"), "github.list_issues");
        assert_eq!(encode_query("a&limit=1"), "a%26limit%3D1");
    }

    #[test]
    fn only_plain_relative_paths_are_written() {
        assert!(plain_relative("README.md"));
        assert!(plain_relative("servers/github/index.ts"));
        assert!(plain_relative("servers/..github/x.ts"));
        assert!(!plain_relative("/etc/passwd"));
        assert!(!plain_relative("../x.ts"));
        assert!(!plain_relative("servers/../../x.ts"));
        assert!(!plain_relative("servers/./x.ts"));
        assert!(!plain_relative("servers//x.ts"));
        assert!(!plain_relative("servers/"));
        assert!(!plain_relative(""));
    }
}
