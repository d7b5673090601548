//! Explanations of real programs' errors, run by the interpreter against a fake supervisor
//! that answers each tool with a fixed result.

use super::super::tests::{answering, limits, run_with};
use airlock_proto::ExecError;

const GRAPH: &str = r#"{"entities": [{"type": "entity", "name": "ana", "entityType": "person", "observations": ["likes tea"]}], "relations": []}"#;

/// The error of `code` when every tool answers `result`.
fn failed(code: &str, result: &'static str) -> ExecError {
    run_with(code, limits(), answering(move |_, _| Ok(result.to_owned())))
        .error()
        .clone()
}

fn explanation(code: &str, result: &'static str) -> String {
    let e = failed(code, result);
    let text = e
        .explanation
        .unwrap_or_else(|| panic!("no explanation for {code}: {}", e.message));
    assert!(text.chars().count() <= super::MAX_EXPLANATION, "{text}");
    text
}

#[test]
fn a_key_the_result_lacks() {
    let text = explanation("r = await tools.memory.read_graph()\nr[\"nodes\"]", GRAPH);
    assert_eq!(
        text,
        "r[\"nodes\"]: KeyError — r is the result of tools.memory.read_graph (line 1), a dict \
         with keys entities, relations; use one of its keys, or r.get(\"nodes\") for a key that \
         may be missing"
    );
}

#[test]
fn an_attribute_on_a_dict() {
    let text = explanation(
        "r = await tools.memory.read_graph()\nn = len(r.entities)",
        GRAPH,
    );
    assert!(
        text.starts_with("r.entities: AttributeError — r is the result of tools.memory.read_graph (line 1), a dict with keys entities, relations"),
        "{text}"
    );
    assert!(text.ends_with("read with r[\"entities\"]"), "{text}");
}

#[test]
fn a_key_of_an_element_through_a_loop_and_an_alias() {
    let text = explanation(
        "g = await tools.memory.read_graph()\nes = g['entities']\nfor e in es:\n    print(e['kind'])",
        GRAPH,
    );
    assert!(
        text.starts_with("e['kind']: KeyError — e is an element of [\"entities\"] of the result of tools.memory.read_graph (line 1), a dict with keys type, name, entityType, observations"),
        "{text}"
    );
}

#[test]
fn a_missing_await() {
    let text = explanation("r = tools.memory.read_graph()\nr['entities']", GRAPH);
    assert!(
        text.contains("r is the coroutine of tools.memory.read_graph (line 1)"),
        "{text}"
    );
    assert!(text.contains("add `await`"), "{text}");
    let text = explanation("r = tools.memory.read_graph()\nr.then(print)", GRAPH);
    assert!(text.contains("add `await`"), "{text}");
}

#[test]
fn json_text_used_as_a_dict() {
    let text = explanation(
        "t = await tools.time.now()\nt['datetime']",
        r#""{\"datetime\": \"x\", \"timezone\": \"UTC\"}""#,
    );
    assert!(
        text.contains("a str of JSON text (a dict with keys datetime, timezone)"),
        "{text}"
    );
    assert!(text.ends_with("json.loads(t)"), "{text}");
}

#[test]
fn none_an_empty_list_a_list_as_a_dict_and_a_number_in_a_str() {
    let text = explanation("r = await tools.a.b()\nr['x']['y']", r#"{"x": null}"#);
    assert!(
        text.contains("r['x'] is [\"x\"] of the result of tools.a.b (line 1), None"),
        "{text}"
    );
    let text = explanation(
        "r = await tools.memory.search_nodes(query='x')\nr['entities'][0]['name']",
        r#"{"entities": [], "relations": []}"#,
    );
    assert!(text.contains("an empty list"), "{text}");
    assert!(text.contains("IndexError"), "{text}");
    let text = explanation(
        "r = await tools.memory.read_graph()\nr['entities']['name']",
        GRAPH,
    );
    assert!(
        text.contains("a list of 1 dicts with keys type, name")
            && text.contains("for x in r['entities']"),
        "{text}"
    );
    // Not a tool's value (len() of one): no explanation.
    let e = failed(
        "r = await tools.memory.read_graph()\n'count: ' + len(r['entities'])",
        GRAPH,
    );
    assert_eq!(e.explanation, None);
}

#[test]
fn a_number_from_a_tool_added_to_a_str() {
    let text = explanation("n = await tools.a.count()\n'total: ' + n", "3");
    assert!(
        text.contains("n is the result of tools.a.count (line 1), an int; convert it with str(n)"),
        "{text}"
    );
}

#[test]
fn gathered_results_are_told_apart() {
    let e = failed(
        "import asyncio\na, b = await asyncio.gather(tools.x.one(), tools.x.two())\nb['k']",
        r#"{"v": 1}"#,
    );
    let text = e.explanation.unwrap();
    assert!(
        text.contains("b is the result of tools.x.two (line 2)"),
        "{text}"
    );
}

#[test]
fn no_explanation_when_it_is_ambiguous_or_not_a_tool_value() {
    // Bound twice: which value it holds is not known here.
    let e = failed(
        "r = await tools.memory.read_graph()\nr = {}\nr['nodes']",
        GRAPH,
    );
    assert_eq!(e.explanation, None);
    let e = failed("d = {'a': 1}\nd['b']", GRAPH);
    assert_eq!(e.explanation, None);
}

#[test]
fn tool_error_names_what_to_write() {
    let failing = |code: &str| {
        run_with(
            code,
            limits(),
            answering(|_, _| {
                Err(airlock_proto::ToolFailure {
                    code: "upstream_error".to_owned(),
                    message: "no".to_owned(),
                    hint: None,
                })
            }),
        )
        .error()
        .clone()
    };
    let e = failing("try:\n    await tools.a.b()\nexcept ToolError as e:\n    pass");
    assert!(
        e.message.contains("except RuntimeError as e"),
        "{}",
        e.message
    );
    let e = failing("try:\n    await tools.a.b()\nexcept RuntimeError as e:\n    e.code");
    assert!(e.message.contains("read str(e)"), "{}", e.message);
}

#[test]
fn a_loop_over_the_result_dict() {
    let text = explanation(
        "r = await tools.memory.read_graph()\nfor e in r:\n    print(e['name'])",
        GRAPH,
    );
    assert!(
        text.contains("e is a key (a str) of the result of tools.memory.read_graph (line 1), a dict with keys entities, relations: a loop over a dict gives its keys; loop over a list in it instead, such as [\"entities\"]"),
        "{text}"
    );
}

#[test]
fn the_environment_and_javascript_habits() {
    let e = failed("import os\ntoken = os.environ['GITHUB_TOKEN']", GRAPH);
    let text = e.explanation.unwrap();
    assert!(
        text.starts_with(
            "os.environ['GITHUB_TOKEN']: KeyError — the sandbox has no environment variables"
        ) && text.contains("credentials"),
        "{text}"
    );
    let e = failed(
        "r = await tools.memory.read_graph()\nr['entities'].length",
        GRAPH,
    );
    assert!(
        e.message.ends_with("Python writes len(x) for the length"),
        "{}",
        e.message
    );
    let text = e.explanation.unwrap();
    assert!(
        text.ends_with("a list of 1 dicts with keys type, name, entityType, observations"),
        "{text}"
    );
    let e = failed("JSON.parse('{}')", GRAPH);
    assert!(e.message.contains("json.loads(text)"), "{}", e.message);
    let e = failed("import time\ntime.sleep(1)", GRAPH);
    assert!(e.message.contains("no time.sleep"), "{}", e.message);
    let e = failed("tools.memory.read_graph()", GRAPH);
    assert!(
        e.message.contains("a coroutine") && e.message.contains("add `await`"),
        "{}",
        e.message
    );
}

#[test]
fn remembered_results_are_bounded() {
    let mut r = super::Remembered::default();
    r.record("a.big", "x".repeat(super::MAX_REMEMBERED_RESULT + 1));
    assert_eq!(r.bytes, 0);
    for i in 0..20 {
        r.record(&format!("a.t{i}"), "y".repeat(super::MAX_REMEMBERED_RESULT));
    }
    assert!(r.bytes <= super::MAX_REMEMBERED_BYTES);
    // A later result replaces the earlier one's bytes.
    r.record("a.t0", "{}".to_owned());
    assert!(r.bytes <= super::MAX_REMEMBERED_BYTES - super::MAX_REMEMBERED_RESULT + 2);
    for i in 0..300 {
        r.record(&format!("b.t{i}"), "1".to_owned());
    }
    assert!(r.latest.len() <= super::MAX_TOOLS);
}

#[test]
fn a_call_never_awaited_is_warned_of() {
    // No answer is sent: the program does not wait for one (and a reply racing the
    // worker's exit would end the fake supervisor before it reads the warning).
    let r = run_with(
        "tools.memory.create_entities(entities=[])\n1",
        limits(),
        |_| Vec::new(),
    );
    assert_eq!(r.value(), "1");
    let warned = r.messages.iter().any(|m| {
        matches!(m, airlock_proto::WorkerMessage::Console { level: airlock_proto::ConsoleLevel::Warn, text }
            if text.starts_with("RuntimeWarning: tools.memory.create_entities called but never awaited"))
    });
    assert!(warned, "{:?}", r.messages);
}

#[test]
fn format_specifications_on_tool_values() {
    let text = explanation(
        "t = await tools.a.b()\nx = f'{t[\"n\"]:.1f} units'",
        r#"{"n": "3"}"#,
    );
    assert!(
        text.starts_with("t[\"n\"]: ValueError — t[\"n\"] is [\"n\"] of the result of tools.a.b (line 1), a str; convert it first: float(t[\"n\"])"),
        "{text}"
    );
    let text = explanation(
        "t = await tools.a.b()\nx = 'now {:.1f}'.format(t)",
        r#"{"n": "3"}"#,
    );
    assert!(
        text.contains(
            "t is the result of tools.a.b (line 1), a dict with keys n; format one of its values"
        ),
        "{text}"
    );
}

#[test]
fn long_expressions_are_quoted_cut() {
    let text = explanation(
        "a_rather_long_name_for_a_graph_result = await tools.memory.read_graph()\nx = a_rather_long_name_for_a_graph_result['nodes_that_are_not_there_at_all']",
        GRAPH,
    );
    assert!(
        text.starts_with(
            "a_rather_long_name_for_a_graph_result['nodes_that_are_not_t…: KeyError — "
        ),
        "{text}"
    );
}

#[test]
fn deep_programs_are_walked_within_bounds() {
    const DEPTH: usize = 20;
    // Brackets nested about as deep as monty compiles (it refuses some 30 levels as a
    // SyntaxError); the walks' own bounds hold whatever the depth.
    let code = format!(
        "r = await tools.memory.read_graph()\nx = {}r['nodes']{}",
        "[".repeat(DEPTH),
        "]".repeat(DEPTH)
    );
    let e = failed(&code, GRAPH);
    assert_eq!(e.name.as_deref(), Some("KeyError"));
    let text = e.explanation.unwrap();
    assert!(text.starts_with("r['nodes']: KeyError"), "{text}");
}
