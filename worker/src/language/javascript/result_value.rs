//! The program's value as JSON text.
//!
//! Conversion follows `JSON.stringify` (the engine's own, whatever the program did to the
//! global `JSON`), with these documented rules:
//!
//! - top-level `undefined` (no value) becomes `null`;
//! - `NaN` and `±Infinity` become `null`; `undefined`, functions and symbols inside objects
//!   are dropped, inside arrays they become `null`; `toJSON` methods are honoured (so a
//!   `Date` becomes its ISO string); a `Map` or `Set` becomes `{}`;
//! - a top-level function or symbol, a BigInt anywhere and a cycle are errors of kind
//!   `ResultNotJson` whose message names the JSON path (`$.a.b[2]`);
//! - a Promise (which would be `{}`) as an element of the result, or as a key's value or one of
//!   its elements, is a `ResultNotJson` error that says how to wait for it: it is an async
//!   call's value the program did not await (`xs.map(async …)` without `Promise.all`);
//! - an exception thrown by a `toJSON` method or a getter is a `Runtime` error;
//! - the JSON text may be at most [`super::MAX_RESULT_BYTES`] (16 MiB less the envelope).

use super::{Engine, MAX_RESULT_BYTES, Phase, internal};
use airlock_proto::{ErrorKind, ExecError};
use rquickjs::{Ctx, Value};

impl Engine {
    pub(super) fn convert_result<'js>(
        &self,
        ctx: &Ctx<'js>,
        value: Value<'js>,
    ) -> Result<String, ExecError> {
        if value.is_undefined() {
            return Ok("null".to_owned());
        }
        if value.is_function() || value.is_symbol() {
            let what = if value.is_function() {
                "a function"
            } else {
                "a symbol"
            };
            return Err(not_json(format!(
                "the program's result is {what}, which has no JSON form; return data (objects, \
                 arrays, strings, numbers, booleans or null)"
            )));
        }
        match ctx.json_stringify(value.clone()) {
            Ok(Some(text)) => {
                let text = text
                    .to_string()
                    .map_err(|e| internal(format!("the result's JSON text is unreadable: {e}")))?;
                if text.len() > MAX_RESULT_BYTES {
                    return Err(not_json(format!(
                        "the program's result is {} bytes of JSON, over the 16 MiB limit; return \
                         less data (filter or summarise it)",
                        text.len()
                    )));
                }
                // A Promise is `{}` in JSON: an async call's value the program did not wait for.
                if text.contains("{}")
                    && let Some(message) = promises_in(&value)
                {
                    return Err(not_json(message));
                }
                Ok(text)
            }
            Ok(None) => Ok("null".to_owned()),
            Err(rquickjs::Error::Exception) => {
                let thrown = ctx.catch();
                if self.bridge.stop_reason().is_none()
                    && !super::bridge::is_out_of_memory(&thrown)
                    && let Some((what, path)) = self.find_not_json(ctx, &value)
                {
                    let advice = if what == "a BigInt" {
                        "convert it with Number() or String()"
                    } else {
                        "return a tree: copy the data without the back-reference"
                    };
                    let message = if path == "$" {
                        format!("the program's result is {what}; {advice}")
                    } else {
                        format!("the program's result contains {what} at {path}; {advice}")
                    };
                    return Err(not_json(message));
                }
                Err(self.classify(ctx, thrown, Phase::Result))
            }
            Err(e) => Err(internal(format!(
                "converting the result to JSON failed: {e}"
            ))),
        }
    }

    /// Asks the prelude where `value` stops being JSON: `("a BigInt" | "a cycle", "$.path")`.
    fn find_not_json<'js>(&self, ctx: &Ctx<'js>, value: &Value<'js>) -> Option<(String, String)> {
        let finder = self.bridge.hook(|h| &h.find_not_json)?.restore(ctx).ok()?;
        match finder.call::<_, Option<Vec<String>>>((value.clone(),)) {
            Ok(Some(found)) => match <[String; 2]>::try_from(found) {
                Ok([what, path]) => Some((what, path)),
                Err(_) => None,
            },
            Ok(None) => None,
            Err(_) => {
                // An exception inside the finder (interrupt, memory): not a diagnosis.
                let _ = ctx.catch();
                None
            }
        }
    }
}

/// Elements (or keys) looked at for Promises in a result.
const MAX_PROMISE_LOOK: usize = 1000;

/// Where the result holds Promises (`xs.map(async …)` returned without `Promise.all`): the
/// result itself, its elements, or its keys and their elements, one level down.
fn promises_in(value: &Value<'_>) -> Option<String> {
    const WAIT: &str = "an async call's value that was not awaited; wait for them: \
                        `await Promise.all(xs.map(async …))`, or `await` each call";
    let in_array = |value: &Value<'_>| -> Option<(usize, usize)> {
        let array = value.as_array()?;
        let mut first = None;
        let mut n = 0;
        for i in 0..array.len().min(MAX_PROMISE_LOOK) {
            if array.get::<Value>(i).is_ok_and(|v| v.is_promise()) {
                first.get_or_insert(i);
                n += 1;
            }
        }
        first.map(|first| (first, n))
    };
    if let Some((first, n)) = in_array(value) {
        return Some(format!(
            "the program's result is an array holding {n} Promise(s) (the first at $[{first}]), \
             each {WAIT}"
        ));
    }
    let object = value.as_object().filter(|_| !value.is_array())?;
    for (key, v) in object
        .props::<String, Value>()
        .take(MAX_PROMISE_LOOK)
        .flatten()
    {
        let plain = !key.is_empty()
            && !key.starts_with(|c: char| c.is_ascii_digit())
            && key
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '$');
        let path = if plain {
            format!("$.{key}")
        } else {
            format!("$[{key:?}]")
        };
        if v.is_promise() {
            return Some(format!(
                "the program's result holds a Promise at {path}, {WAIT}"
            ));
        }
        if let Some((first, n)) = in_array(&v) {
            return Some(format!(
                "the program's result holds {n} Promise(s) in {path} (the first at \
                 {path}[{first}]), each {WAIT}"
            ));
        }
    }
    None
}

fn not_json(message: String) -> ExecError {
    ExecError::new(ErrorKind::ResultNotJson, message)
}
