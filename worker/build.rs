//! Compiles the sandbox prelude (`src/language/javascript/prelude.js`) to QuickJS bytecode at build time.
//!
//! Parsing the 18 KB prelude costs every new worker about 0.8 ms of its start-up; loading
//! bytecode skips the parser. The bytecode is made by the same QuickJS sources (the same
//! `rquickjs` version and features) that the worker links, from a file in this crate, so the
//! worker only ever reads bytecode it was built with.

#[cfg(feature = "engine")]
fn main() {
    use rquickjs::{Context, Runtime, qjs};
    use std::ffi::CString;

    println!("cargo:rerun-if-changed=src/language/javascript/prelude.js");
    let source = std::fs::read_to_string("src/language/javascript/prelude.js")
        .expect("read src/language/javascript/prelude.js");
    let out =
        std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("prelude.bc");

    let runtime = Runtime::new().expect("quickjs runtime");
    let context = Context::full(&runtime).expect("quickjs context");
    let bytes = context.with(|ctx| {
        let len = source.len();
        // JS_Eval needs a NUL after the source.
        let code = CString::new(source).expect("prelude.js contains a NUL byte");
        // Must match PRELUDE_FILENAME in src/language/javascript/bridge.rs: stack frames with this name are
        // recognised as the prelude's own and hidden from programs.
        let filename = CString::new("<airlock>").expect("filename");
        let raw = ctx.as_raw().as_ptr();
        let flags =
            qjs::JS_EVAL_TYPE_GLOBAL | qjs::JS_EVAL_FLAG_STRICT | qjs::JS_EVAL_FLAG_COMPILE_ONLY;
        // SAFETY: `raw` is the live context of this closure; `code` is NUL-terminated and
        // `len` excludes the NUL; the compiled function is freed below.
        let compiled = unsafe {
            qjs::JS_Eval(
                raw,
                code.as_ptr(),
                len as _,
                filename.as_ptr(),
                flags as i32,
            )
        };
        // SAFETY: inspecting the tag of a value returned by QuickJS.
        if unsafe { qjs::JS_IsException(compiled) } {
            panic!(
                "src/language/javascript/prelude.js does not compile: {:?}",
                ctx.catch()
            );
        }
        let mut size: qjs::size_t = 0;
        // SAFETY: `compiled` is a live bytecode object; QuickJS allocates the buffer, which is
        // copied and freed with the context's allocator.
        unsafe {
            let buf =
                qjs::JS_WriteObject(raw, &mut size, compiled, qjs::JS_WRITE_OBJ_BYTECODE as i32);
            assert!(!buf.is_null(), "JS_WriteObject failed for the prelude");
            let bytes = std::slice::from_raw_parts(buf, size as usize).to_vec();
            qjs::js_free(raw, buf.cast());
            qjs::JS_FreeValue(raw, compiled);
            bytes
        }
    });
    std::fs::write(&out, bytes).expect("write prelude bytecode");
}

#[cfg(not(feature = "engine"))]
fn main() {}
