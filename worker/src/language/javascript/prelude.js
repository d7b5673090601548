// The sandbox's own globals, written in JavaScript on top of a few native functions.
//
// Evaluated once per worker, before lockdown and before any untrusted byte exists. The script
// is one function expression: the engine calls it with the natives, it installs `console`,
// `progress`, `tools`, `store`, `ToolError` and `crypto` on the global object, replaces `Date`,
// `Math.random` and `performance` with ones that read the supervisor's clock and seed
// (determinism.rs), and it returns the hooks the engine itself uses. The natives are only
// ever reachable through this function's closures: nothing on the global object leads to
// them.
//
// Every built-in the bridge relies on is captured here, first, so a program that replaces
// `JSON`, `Reflect`, `Map.prototype.get` or `Array.prototype.join` changes only what its own
// code sees.
(function airlockPrelude(natives) {
  "use strict";

  const { toolCall, consoleWrite, progressWrite, mapStack } = natives;
  const { clockNow, clockOrigin, mathRandom, randomBytes, randomUUID: nativeRandomUUID } = natives;

  const ObjectCreate = Object.create;
  const defineProperty = Object.defineProperty;
  const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const getPrototypeOf = Object.getPrototypeOf;
  const objectKeys = Object.keys;
  const preventExtensions = Object.preventExtensions;
  const freeze = Object.freeze;
  const isArray = Array.isArray;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const ownKeys = Reflect.ownKeys;
  const JSONStringify = JSON.stringify;
  const objectToString = Object.prototype.toString;
  const functionToString = Function.prototype.toString;
  const hasOwn = Object.hasOwn;
  const StringCtor = String;
  const MapCtor = Map;
  const SetCtor = Set;
  const WeakSetCtor = WeakSet;
  const WeakMapCtor = WeakMap;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const DOMExceptionCtor = DOMException;
  const Uint8ArrayCtor = Uint8Array;
  const DateCtor = Date;
  const RegExpCtor = RegExp;
  const ProxyCtor = Proxy;
  const mapGet = Map.prototype.get;
  const mapSet = Map.prototype.set;
  const mapEntries = Map.prototype.entries;
  const mapSize = getOwnPropertyDescriptor(Map.prototype, "size").get;
  const setValues = Set.prototype.values;
  const setSize = getOwnPropertyDescriptor(Set.prototype, "size").get;
  const weakSetHas = WeakSet.prototype.has;
  const weakSetAdd = WeakSet.prototype.add;
  const weakMapGet = WeakMap.prototype.get;
  const weakMapSet = WeakMap.prototype.set;
  const iteratorNext = getPrototypeOf(new Map().entries()).next;
  const setIteratorNext = getPrototypeOf(new Set().values()).next;
  const arrayPush = Array.prototype.push;
  const arrayJoin = Array.prototype.join;
  const arrayIncludes = Array.prototype.includes;
  const arrayPop = Array.prototype.pop;
  const stringSlice = String.prototype.slice;
  const stringReplace = String.prototype.replace;
  const regexpTest = RegExp.prototype.test;
  const dateToISOString = Date.prototype.toISOString;
  const dateGetTime = Date.prototype.getTime;
  const dateToString = Date.prototype.toString;
  const setHas = Set.prototype.has;
  const regexpToString = RegExp.prototype.toString;
  const symbolToString = Symbol.prototype.toString;
  const numberIsNaN = Number.isNaN;
  const objectIs = Object.is;
  const typedArrayProto = getPrototypeOf(Uint8Array.prototype);
  const typedArrayLength = getOwnPropertyDescriptor(typedArrayProto, "length").get;
  const typedArrayTag = getOwnPropertyDescriptor(typedArrayProto, Symbol.toStringTag).get;
  const typedArrayBuffer = getOwnPropertyDescriptor(typedArrayProto, "buffer").get;
  const typedArrayByteOffset = getOwnPropertyDescriptor(typedArrayProto, "byteOffset").get;
  const typedArrayByteLength = getOwnPropertyDescriptor(typedArrayProto, "byteLength").get;
  const typedArraySet = typedArrayProto.set;
  const arrayBufferByteLength = getOwnPropertyDescriptor(ArrayBuffer.prototype, "byteLength").get;

  const push = (array, value) => apply(arrayPush, array, [value]);
  const join = (array, sep) => apply(arrayJoin, array, [sep]);
  const tag = (value) => apply(objectToString, value, []);

  // ---------------------------------------------------------------------------------------
  // Error stacks: QuickJS records positions in the generated script; the `stack` getter
  // reports them in the code the agent sent (and hides the bridge's own frames).

  // A ToolError is created when the supervisor answers, with no program frame on the stack;
  // its stack is that of an Error made where the program started the call.
  const callSites = new WeakMapCtor();
  const stackDescriptor = getOwnPropertyDescriptor(ErrorCtor.prototype, "stack");
  const engineStack = stackDescriptor && stackDescriptor.get;
  /** The engine's stack string of an error (positions in the generated script). */
  const rawStackOf = (error) => {
    if (!engineStack) return undefined;
    const site = apply(weakMapGet, callSites, [error]);
    return apply(engineStack, site !== undefined ? site : error, []);
  };
  if (engineStack) {
    defineProperty(ErrorCtor.prototype, "stack", {
      get: function stack() {
        const s = rawStackOf(this);
        return typeof s === "string" ? mapStack(s) : s;
      },
      set: stackDescriptor.set,
      enumerable: false,
      configurable: true,
    });
  }

  // ---------------------------------------------------------------------------------------
  // ToolError: how a failed tool call reaches the program.

  class ToolError extends ErrorCtor {
    constructor(tool, code, message, hint) {
      super(`${tool}: ${message}`);
      defineProperty(this, "tool", { value: tool, writable: true, enumerable: true, configurable: true });
      defineProperty(this, "code", { value: code, writable: true, enumerable: true, configurable: true });
      defineProperty(this, "hint", {
        value: hint === null ? undefined : hint,
        writable: true,
        enumerable: true,
        configurable: true,
      });
    }
  }
  defineProperty(ToolError.prototype, "name", {
    value: "ToolError",
    writable: true,
    enumerable: false,
    configurable: true,
  });
  const makeToolError = (tool, code, message, hint, site) => {
    const error = new ToolError(tool, code, message, hint);
    if (site instanceof ErrorCtor) apply(weakMapSet, callSites, [error, site]);
    return error;
  };

  // ---------------------------------------------------------------------------------------
  // tools.<namespace>.<name>(args): a proxy of proxies. Names that generic code probes for
  // (`await tools` looks up `then`, JSON.stringify looks up `toJSON`, …) are not tools.

  const notTools = new SetCtor([
    "then", "catch", "finally", "toJSON", "constructor", "prototype", "__proto__", "valueOf",
    "toString", "toLocaleString", "inspect", "asymmetricMatch", "nodeType", "$$typeof",
    "@@__IMMUTABLE_ITERABLE__@@", "@@__IMMUTABLE_RECORD__@@",
  ]);
  const isToolName = (key) => typeof key === "string" && !apply(Set.prototype.has, notTools, [key]);
  const toolProxies = new WeakMapCtor(); // proxy -> label for console output
  const namespaces = new MapCtor();
  const toolFunctions = new MapCtor();

  const frozenTarget = () => preventExtensions(ObjectCreate(null));
  const readOnlyTraps = {
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
    setPrototypeOf: () => false,
    has: () => false,
    ownKeys: () => [],
    getOwnPropertyDescriptor: () => undefined,
  };

  function toolFunction(namespace, name) {
    const full = `${namespace}.${name}`;
    let fn = apply(mapGet, toolFunctions, [full]);
    if (fn === undefined) {
      // A method (not a constructor), named after the tool.
      fn = { [name](args) { return toolCall(full, args, new ErrorCtor()); } }[name];
      apply(mapSet, toolFunctions, [full, fn]);
    }
    return fn;
  }

  function namespaceProxy(namespace) {
    let proxy = apply(mapGet, namespaces, [namespace]);
    if (proxy === undefined) {
      proxy = new ProxyCtor(frozenTarget(), {
        ...readOnlyTraps,
        get: (_, key) => (isToolName(key) ? toolFunction(namespace, key) : undefined),
      });
      apply(weakMapSet, toolProxies, [proxy, `[tools.${namespace}]`]);
      apply(mapSet, namespaces, [namespace, proxy]);
    }
    return proxy;
  }

  const tools = new ProxyCtor(frozenTarget(), {
    ...readOnlyTraps,
    get: (_, key) => (isToolName(key) ? namespaceProxy(key) : undefined),
  });
  apply(weakMapSet, toolProxies, [tools, "[tools]"]);

  // ---------------------------------------------------------------------------------------
  // store.get(key) / store.set(key, value): the session store. Both send a call of a reserved
  // name (`$` is in no tool namespace) that the supervisor answers itself, and both return a
  // promise: `await store.get(key)` for the value (null when none), `await store.set(key,
  // value)` to see a refusal where it happens.

  const store = freeze({
    get(key) { return toolCall("$store.get", { key }, new ErrorCtor()); },
    set(key, value) { return toolCall("$store.set", { key, value }, new ErrorCtor()); },
  });
  apply(weakMapSet, toolProxies, [store, "[store]"]);

  // ---------------------------------------------------------------------------------------
  // console: Node-like formatting of any value, one message per call.

  const MAX_DEPTH = 8;
  const MAX_ITEMS = 100;
  const identifierKey = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

  const quote = (s) => JSONStringify(s);
  const keyText = (k) => (apply(regexpTest, identifierKey, [k]) ? k : quote(k));

  function functionText(fn) {
    let source = "";
    try {
      source = apply(functionToString, fn, []);
    } catch {
      // Proxies of functions and the like.
    }
    const name = typeof fn.name === "string" ? fn.name : "";
    if (apply(stringSlice, source, [0, 5]) === "class") {
      return name ? `[class ${name}]` : "[class (anonymous)]";
    }
    return name ? `[Function: ${name}]` : "[Function (anonymous)]";
  }

  function errorText(err, seen, depth) {
    let head;
    try {
      const name = err.name;
      const message = err.message;
      head = message === undefined || message === "" ? StringCtor(name) : `${name}: ${message}`;
    } catch {
      head = "Error";
    }
    let stack = "";
    try {
      const s = err.stack;
      if (typeof s === "string" && s !== "") stack = "\n" + apply(stringReplace, s, [/\n$/, ""]);
    } catch {
      // A throwing stack getter: print without it.
    }
    const keys = objectKeys(err);
    let extra = "";
    if (keys.length > 0) {
      const parts = [];
      for (const k of keys) push(parts, `${keyText(k)}: ${inspect(err[k], seen, depth + 1)}`);
      extra = ` { ${join(parts, ", ")} }`;
    }
    return head + stack + extra;
  }

  function constructorPrefix(value) {
    const proto = getPrototypeOf(value);
    if (proto === null || proto === Object.prototype) return "";
    const ctor = proto && hasOwn(proto, "constructor") ? proto.constructor : undefined;
    const name = typeof ctor === "function" && typeof ctor.name === "string" ? ctor.name : "";
    return name && name !== "Object" ? `${name} ` : "";
  }

  function propertyText(value, key, seen, depth) {
    const d = getOwnPropertyDescriptor(value, key);
    if (d === undefined) return "undefined";
    if (d.get || d.set) {
      return d.get && d.set ? "[Getter/Setter]" : d.get ? "[Getter]" : "[Setter]";
    }
    return inspect(d.value, seen, depth + 1);
  }

  function inspect(value, seen, depth) {
    switch (typeof value) {
      case "string":
        return quote(value);
      case "number":
        return objectIs(value, -0) ? "-0" : StringCtor(value);
      case "bigint":
        return `${value}n`;
      case "boolean":
        return value ? "true" : "false";
      case "undefined":
        return "undefined";
      case "symbol":
        return apply(symbolToString, value, []);
      case "function": {
        const label = apply(weakMapGet, toolProxies, [value]);
        return label !== undefined ? label : functionText(value);
      }
    }
    if (value === null) return "null";
    const label = apply(weakMapGet, toolProxies, [value]);
    if (label !== undefined) return label;
    if (apply(arrayIncludes, seen, [value])) return "[Circular]";
    if (value instanceof ErrorCtor) {
      push(seen, value);
      try {
        return errorText(value, seen, depth);
      } finally {
        apply(arrayPop, seen, []);
      }
    }
    const kind = tag(value);
    if (kind === "[object Date]") {
      return numberIsNaN(apply(dateGetTime, value, [])) ? "Invalid Date" : apply(dateToISOString, value, []);
    }
    if (kind === "[object RegExp]") return apply(regexpToString, value, []);
    if (kind === "[object Promise]") return "Promise {}";
    if (kind === "[object WeakMap]" || kind === "[object WeakSet]" || kind === "[object WeakRef]") {
      return `${apply(stringSlice, kind, [8, -1])} {}`;
    }
    if (kind === "[object ArrayBuffer]") {
      return `ArrayBuffer { byteLength: ${apply(arrayBufferByteLength, value, [])} }`;
    }
    if (depth >= MAX_DEPTH) {
      return isArray(value) ? "[Array]" : "[Object]";
    }
    push(seen, value);
    try {
      if (isArray(value)) {
        const parts = [];
        const n = value.length;
        for (let i = 0; i < n && i < MAX_ITEMS; i++) {
          push(parts, hasOwn(value, i) ? propertyText(value, i, seen, depth) : "<empty>");
        }
        if (n > MAX_ITEMS) push(parts, `... ${n - MAX_ITEMS} more items`);
        return `${constructorPrefix(value) === "Array " ? "" : constructorPrefix(value)}[${join(parts, ", ")}]`;
      }
      let typedTag;
      try {
        typedTag = apply(typedArrayTag, value, []);
      } catch {
        typedTag = undefined;
      }
      if (typedTag !== undefined) {
        const n = apply(typedArrayLength, value, []);
        const parts = [];
        for (let i = 0; i < n && i < MAX_ITEMS; i++) push(parts, inspect(value[i], seen, depth + 1));
        if (n > MAX_ITEMS) push(parts, `... ${n - MAX_ITEMS} more items`);
        return `${typedTag}(${n}) [${join(parts, ", ")}]`;
      }
      if (kind === "[object Map]") {
        const parts = [];
        const it = apply(mapEntries, value, []);
        for (let r = apply(iteratorNext, it, []); !r.done; r = apply(iteratorNext, it, [])) {
          if (parts.length >= MAX_ITEMS) {
            push(parts, "...");
            break;
          }
          push(parts, `${inspect(r.value[0], seen, depth + 1)} => ${inspect(r.value[1], seen, depth + 1)}`);
        }
        return `Map(${apply(mapSize, value, [])}) {${parts.length ? ` ${join(parts, ", ")} ` : ""}}`;
      }
      if (kind === "[object Set]") {
        const parts = [];
        const it = apply(setValues, value, []);
        for (let r = apply(setIteratorNext, it, []); !r.done; r = apply(setIteratorNext, it, [])) {
          if (parts.length >= MAX_ITEMS) {
            push(parts, "...");
            break;
          }
          push(parts, inspect(r.value, seen, depth + 1));
        }
        return `Set(${apply(setSize, value, [])}) {${parts.length ? ` ${join(parts, ", ")} ` : ""}}`;
      }
      const parts = [];
      const keys = objectKeys(value);
      for (let i = 0; i < keys.length; i++) {
        if (i >= MAX_ITEMS) {
          push(parts, `... ${keys.length - MAX_ITEMS} more properties`);
          break;
        }
        push(parts, `${keyText(keys[i])}: ${propertyText(value, keys[i], seen, depth)}`);
      }
      return `${constructorPrefix(value)}{${parts.length ? ` ${join(parts, ", ")} ` : ""}}`;
    } finally {
      apply(arrayPop, seen, []);
    }
  }

  /** Any value as text: strings as they are, everything else inspected. */
  function show(value) {
    if (typeof value === "string") return value;
    try {
      return inspect(value, [], 0);
    } catch {
      return "[uninspectable value]";
    }
  }

  /** Node's printf-style placeholders in a first string argument: %s %d %i %f %j %o %O %c %%. */
  function format(args) {
    const parts = [];
    let rest = 0;
    if (typeof args[0] === "string" && args.length > 1) {
      const fmt = args[0];
      let out = "";
      let next = 1;
      let i = 0;
      while (i < fmt.length) {
        const c = fmt[i];
        if (c === "%" && i + 1 < fmt.length) {
          const p = fmt[i + 1];
          if (p === "%") {
            out += "%";
            i += 2;
            continue;
          }
          if (next < args.length && "sdifjoOc".includes(p)) {
            const a = args[next++];
            if (p === "s") out += typeof a === "string" ? a : show(a);
            else if (p === "d" || p === "i") {
              out += typeof a === "bigint" ? `${a}n` : StringCtor(p === "i" ? Math.trunc(Number(a)) : Number(a));
            } else if (p === "f") out += StringCtor(Number(a));
            else if (p === "j") {
              try {
                out += StringCtor(JSONStringify(a));
              } catch {
                out += "[Circular]";
              }
            } else if (p === "c") {
              // CSS styling: ignored, as in Node.
            } else out += show(a);
            i += 2;
            continue;
          }
        }
        out += c;
        i += 1;
      }
      push(parts, out);
      rest = next;
    }
    for (let i = rest; i < args.length; i++) push(parts, show(args[i]));
    return join(parts, " ");
  }

  const consoleObject = {};
  const levels = ["log", "info", "warn", "error", "debug"];
  for (let level = 0; level < levels.length; level++) {
    const name = levels[level];
    defineProperty(consoleObject, name, {
      value: { [name](...args) { consoleWrite(level, format(args)); } }[name],
      writable: true,
      enumerable: true,
      configurable: true,
    });
  }

  const progress = { progress(value) { progressWrite(value); } }.progress;

  // ---------------------------------------------------------------------------------------
  // Result diagnostics: where JSON.stringify found a BigInt or a cycle.

  function pathOf(path, key) {
    return typeof key === "number" ? `${path}[${key}]` : apply(regexpTest, identifierKey, [key]) ? `${path}.${key}` : `${path}[${quote(key)}]`;
  }

  function findNotJson(root) {
    const ancestors = [];
    function visit(key, value, path) {
      if (value !== null && (typeof value === "object" || typeof value === "bigint")) {
        const toJSON = value.toJSON;
        if (typeof toJSON === "function") value = apply(toJSON, value, [StringCtor(key)]);
      }
      if (typeof value === "bigint") return ["a BigInt", path];
      if (value === null || typeof value !== "object") return null;
      const kind = tag(value);
      if (kind === "[object BigInt]") return ["a BigInt", path];
      if (kind === "[object Number]" || kind === "[object String]" || kind === "[object Boolean]") return null;
      if (apply(arrayIncludes, ancestors, [value])) return ["a cycle", path];
      push(ancestors, value);
      if (isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const found = visit(i, value[i], pathOf(path, i));
          if (found) return found;
        }
      } else {
        for (const k of objectKeys(value)) {
          const found = visit(k, value[k], pathOf(path, k));
          if (found) return found;
        }
      }
      apply(arrayPop, ancestors, []);
      return null;
    }
    try {
      return visit("", root, "$");
    } catch {
      return null;
    }
  }

  // ---------------------------------------------------------------------------------------
  // The clock and randomness: the supervisor's (determinism.rs), never the system's.
  //
  // QuickJS's `Date` reads the system clock for `Date.now()`, `new Date()` and `Date()`, and
  // has no hook to change that; its `Math.random` is seeded from the time; its `performance`
  // reads a monotonic clock. The program gets none of them: each is replaced below, and
  // nothing left on the global object leads back to the originals.

  // `Date` is a wrapper that gives the engine's own constructor every argument list but the
  // empty one (that one gets the program's clock), so parsing, fields, the prototype's
  // methods and subclassing stay the engine's. Its prototype is the original's, whose
  // `constructor` now points here; `new.target` passes through, so `class D extends Date`
  // makes `D` instances.
  const ProgramDate = function Date(year, monthIndex, day, hours, minutes, seconds, ms) {
    if (new.target === undefined) return apply(dateToString, new DateCtor(clockNow()), []);
    return arguments.length === 0
      ? construct(DateCtor, [clockNow()], new.target)
      : construct(DateCtor, arguments, new.target);
  };
  for (const key of ownKeys(DateCtor)) {
    if (key !== "prototype" && key !== "length" && key !== "name") {
      defineProperty(ProgramDate, key, getOwnPropertyDescriptor(DateCtor, key));
    }
  }
  defineProperty(ProgramDate, "now", {
    value: { now() { return clockNow(); } }.now,
    writable: true,
    enumerable: false,
    configurable: true,
  });
  defineProperty(ProgramDate, "prototype", {
    value: DateCtor.prototype,
    writable: false,
    enumerable: false,
    configurable: false,
  });
  defineProperty(DateCtor.prototype, "constructor", {
    value: ProgramDate,
    writable: true,
    enumerable: false,
    configurable: true,
  });

  defineProperty(Math, "random", {
    value: { random() { return mathRandom(); } }.random,
    writable: true,
    enumerable: false,
    configurable: true,
  });

  // `performance.now()` counts the program's clock from the start of the run.
  const performanceObject = {
    now() { return clockNow() - clockOrigin(); },
    get timeOrigin() { return clockOrigin(); },
  };

  // `crypto`: the two Web Crypto functions that need no keys, with Web Crypto's rules.
  const MAX_RANDOM_BYTES = 65536;
  const integerArrays = new SetCtor([
    "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array",
    "Uint32Array", "BigInt64Array", "BigUint64Array",
  ]);
  const kindOf = (value) => {
    if (value === null) return "null";
    if (typeof value !== "object") return typeof value;
    try {
      return apply(stringSlice, tag(value), [8, -1]);
    } catch {
      return "object";
    }
  };
  const cryptoObject = {
    getRandomValues(array) {
      // The internal slot, not the prototype chain: a look-alike object is not an array.
      const kind = apply(typedArrayTag, array, []);
      if (kind === undefined || !apply(setHas, integerArrays, [kind])) {
        throw new TypeErrorCtor(
          `crypto.getRandomValues: the argument must be an integer typed array (Int8Array, ` +
            `Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, ` +
            `BigInt64Array or BigUint64Array), not ${kind !== undefined ? kind : kindOf(array)}`,
        );
      }
      const length = apply(typedArrayByteLength, array, []);
      if (length > MAX_RANDOM_BYTES) {
        throw new DOMExceptionCtor(
          `crypto.getRandomValues: the array is ${length} bytes, over the ${MAX_RANDOM_BYTES}-byte limit`,
          "QuotaExceededError",
        );
      }
      if (length > 0) {
        const target = new Uint8ArrayCtor(
          apply(typedArrayBuffer, array, []),
          apply(typedArrayByteOffset, array, []),
          length,
        );
        apply(typedArraySet, target, [new Uint8ArrayCtor(randomBytes(length))]);
      }
      return array;
    },
    randomUUID() {
      return nativeRandomUUID();
    },
  };
  defineProperty(cryptoObject, Symbol.toStringTag, { value: "Crypto", configurable: true });

  // ---------------------------------------------------------------------------------------
  // Install the globals.

  const globalValue = (name, value) =>
    defineProperty(globalThis, name, { value, writable: true, enumerable: false, configurable: true });
  globalValue("console", consoleObject);
  globalValue("progress", progress);
  globalValue("store", store);
  globalValue("ToolError", ToolError);
  globalValue("Date", ProgramDate);
  globalValue("performance", performanceObject);
  globalValue("crypto", cryptoObject);
  defineProperty(globalThis, "tools", { value: tools, writable: false, enumerable: false, configurable: false });

  return freeze({ makeToolError, show, findNotJson, rawStackOf });
})
