// The sandbox's own globals, written in JavaScript on top of a few native functions.
//
// Evaluated once per worker, before lockdown and before any untrusted byte exists. The script
// is one function expression: the engine calls it with the natives, it installs `console`,
// `progress`, `tools`, `ToolError` and `crypto` on the global object, replaces `Date`,
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
  // Provenance of tool results (provenance.rs explains errors with it).
  //
  // A TypeError on a tool's result ("cannot read property 'map' of undefined") should say
  // where the value came from and what it really is. Reads that find a property are left
  // alone, at full speed; only a read that finds nothing anywhere is seen: each object and
  // array of a result gets a prototype that is a proxy, and its `get` trap, reached only when
  // the object itself lacks the key, notes the last read that found nothing on the whole
  // chain. A tool call's promise gets one too, for the missing `await`. The proxies' targets
  // inherit from the real prototypes, so methods, `instanceof`, `Array.isArray`, `constructor`,
  // JSON and spreading behave as before; `Object.getPrototypeOf`, `Reflect.getPrototypeOf` and
  // `__proto__` report the real prototypes, so the proxies stay out of the program's sight.
  // Nothing here changes a value the program computes or the order of its calls.

  const setPrototypeOf = Object.setPrototypeOf;
  const reflectGet = Reflect.get;
  const reflectGetPrototypeOf = Reflect.getPrototypeOf;
  const ObjectPrototype = Object.prototype;
  const ArrayPrototype = Array.prototype;
  const PromisePrototype = Promise.prototype;
  const StringPrototype = String.prototype;
  const NumberPrototype = Number.prototype;
  const symbolIterator = Symbol.iterator;

  // The last read that found nothing on a tagged value, and its key.
  let missReceiver;
  let missKey;
  // A handler with no prototype, so a program that adds `has` or `set` to Object.prototype
  // adds no trap here.
  const recording = ObjectCreate(null);
  recording.get = (target, key, receiver) => {
    if (!(key in target)) {
      missReceiver = receiver;
      missKey = key;
    }
    return reflectGet(target, key, receiver);
  };
  const objectProto = new ProxyCtor(ObjectCreate(ObjectPrototype), recording);
  const arrayProto = new ProxyCtor(ObjectCreate(ArrayPrototype), recording);
  const promiseProto = new ProxyCtor(ObjectCreate(PromisePrototype), recording);
  const realPrototype = (p) =>
    p === objectProto ? ObjectPrototype : p === arrayProto ? ArrayPrototype : p === promiseProto ? PromisePrototype : p;
  const protoAccessor = getOwnPropertyDescriptor(ObjectPrototype, "__proto__");
  defineProperty(Object, "getPrototypeOf", {
    value: { getPrototypeOf(o) { return realPrototype(getPrototypeOf(o)); } }.getPrototypeOf,
    writable: true,
    enumerable: false,
    configurable: true,
  });
  defineProperty(Reflect, "getPrototypeOf", {
    value: { getPrototypeOf(o) { return realPrototype(reflectGetPrototypeOf(o)); } }.getPrototypeOf,
    writable: true,
    enumerable: false,
    configurable: true,
  });
  if (protoAccessor && protoAccessor.get) {
    const protoGet = protoAccessor.get;
    defineProperty(ObjectPrototype, "__proto__", {
      get: getOwnPropertyDescriptor({ get __proto__() { return realPrototype(apply(protoGet, this, [])); } }, "__proto__").get,
      set: protoAccessor.set,
      enumerable: false,
      configurable: true,
    });
  }

  // A tool call: its name and the Error made where the program started it.
  function CallRecord(tool, site) {
    this.tool = tool;
    this.site = site;
  }
  const callRecordPrototype = CallRecord.prototype;
  // No setter the program adds to Object.prototype runs when a record is made.
  setPrototypeOf(callRecordPrototype, null);
  // Tagged value → the object or array it was found in, or the CallRecord of the call whose
  // result (or promise) it is. The methods are own properties of this private instance, so
  // the program's changes to WeakMap.prototype do not reach it.
  const origins = new WeakMapCtor();
  defineProperty(origins, "get", { value: weakMapGet });
  defineProperty(origins, "set", { value: weakMapSet });
  // Results are walked to this depth and this many objects and arrays each; beyond, values
  // are simply not explained.
  const MAX_TAG_DEPTH = 64;
  const MAX_TAGGED_NODES = 10000;
  // The walk's own stack: an array without a prototype, so no setter a program puts on
  // Array.prototype runs when it grows.
  const walk = [];
  setPrototypeOf(walk, null);

  // A read that found nothing before the latest call or result is no longer the one an error
  // is about (a program that caught it went on); forgetting it makes a stale explanation
  // less likely.
  function trackCall(promise, tool, site) {
    missReceiver = undefined;
    setPrototypeOf(promise, promiseProto);
    origins.set(promise, new CallRecord(tool, site));
  }

  function tagResult(value, tool, site) {
    missReceiver = undefined;
    if (value === null || typeof value !== "object") return;
    let top = 0;
    walk[top++] = value;
    walk[top++] = new CallRecord(tool, site);
    walk[top++] = 0;
    let budget = MAX_TAGGED_NODES;
    while (top > 0 && budget > 0) {
      const depth = walk[--top];
      const parent = walk[--top];
      const node = walk[--top];
      budget--;
      origins.set(node, parent);
      if (isArray(node)) {
        setPrototypeOf(node, arrayProto);
        if (depth >= MAX_TAG_DEPTH) continue;
        for (let i = node.length - 1; i >= 0; i--) {
          const child = node[i];
          if (child !== null && typeof child === "object") {
            walk[top++] = child;
            walk[top++] = node;
            walk[top++] = depth + 1;
          }
        }
      } else {
        setPrototypeOf(node, objectProto);
        if (depth >= MAX_TAG_DEPTH) continue;
        const keys = objectKeys(node);
        for (let i = keys.length - 1; i >= 0; i--) {
          const child = node[keys[i]];
          if (child !== null && typeof child === "object") {
            walk[top++] = child;
            walk[top++] = node;
            walk[top++] = depth + 1;
          }
        }
      }
    }
    // Let go of the rest of the walk (stack slots above 0 keep values alive otherwise).
    for (let i = 0; i < top; i++) walk[i] = undefined;
  }

  const MAX_SHAPE = 280;
  const MAX_KEY = 40;
  const shortKey = (k) => (k.length > MAX_KEY ? apply(stringSlice, k, [0, MAX_KEY - 1]) + "…" : k);
  /** An own property's value without running a getter the program may have added. */
  const ACCESSOR = ObjectCreate(null);
  function ownValue(o, k) {
    const d = getOwnPropertyDescriptor(o, k);
    return d === undefined ? undefined : d.get || d.set ? ACCESSOR : d.value;
  }
  /** A value's type in a few words; never its content. */
  function typeWord(v) {
    if (v === ACCESSOR) return "getter";
    if (v === null) return "null";
    if (isArray(v)) return v.length === 0 ? "empty array" : `array of ${v.length}`;
    if (getPrototypeOf(v) === promiseProto) return "Promise";
    return typeof v;
  }
  /** The shape of an object or array: keys, types, lengths; never a string's content. */
  function shapeOf(v) {
    if (isArray(v)) {
      const n = v.length;
      if (n === 0) return "an empty array";
      let kind = typeWord(ownValue(v, 0));
      for (let i = 1; i < n && i < MAX_ITEMS; i++) {
        if (typeWord(ownValue(v, i)) !== kind) {
          kind = "";
          break;
        }
      }
      if (kind === "object") {
        const keys = objectKeys(ownValue(v, 0));
        const first = [];
        let used = 0;
        for (let i = 0; i < keys.length && used < 120; i++) {
          push(first, shortKey(keys[i]));
          used += keys[i].length + 2;
        }
        const more = first.length < keys.length ? ", …" : "";
        return `an array of ${n} (the first an object with keys ${join(first, ", ")}${more})`;
      }
      return kind === "" ? `an array of ${n}` : `an array of ${n} (${kind})`;
    }
    const keys = objectKeys(v);
    if (keys.length === 0) return "an empty object";
    const parts = [];
    let used = 0;
    for (let i = 0; i < keys.length; i++) {
      const part = `${shortKey(keys[i])} (${typeWord(ownValue(v, keys[i]))})`;
      if (used + part.length > MAX_SHAPE - 40) {
        push(parts, `… ${keys.length} keys in all`);
        break;
      }
      push(parts, part);
      used += part.length + 2;
    }
    return `an object with keys ${join(parts, ", ")}`;
  }
  /** Where `child` sits in `parent`: an index, a key, or undefined if it moved. */
  function placeIn(parent, child) {
    if (isArray(parent)) {
      const n = parent.length;
      for (let i = 0; i < n && i < MAX_TAGGED_NODES; i++) {
        if (hasOwn(parent, i) && parent[i] === child) return i;
      }
      return undefined;
    }
    const keys = objectKeys(parent);
    for (let i = 0; i < keys.length && i < MAX_TAGGED_NODES; i++) {
      const d = getOwnPropertyDescriptor(parent, keys[i]);
      if (d !== undefined && d.value === child) return keys[i];
    }
    return undefined;
  }

  /**
   * The last read that found nothing on a tool's value, for the engine's explanation of an
   * uncaught TypeError: `null`, or { key, promise, tool, stack, path, shape, methodOf }.
   */
  function lastMiss() {
    const receiver = missReceiver;
    const key = missKey;
    if (receiver === undefined || receiver === null) return null;
    let keyText;
    if (typeof key === "string") keyText = key;
    else if (key === symbolIterator) keyText = "Symbol.iterator";
    else return null;
    try {
      let origin = origins.get(receiver);
      if (origin === undefined) return null;
      let path = "";
      let node = receiver;
      for (let steps = 0; getPrototypeOf(origin) !== callRecordPrototype; steps++) {
        const place = placeIn(origin, node);
        if (place === undefined || steps > MAX_TAG_DEPTH) return null;
        path = pathOf("", place) + path;
        node = origin;
        origin = origins.get(origin);
        if (origin === undefined) return null;
      }
      const promise = getPrototypeOf(receiver) === promiseProto;
      let methodOf = null;
      if (typeof key === "string" && !promise) {
        if (!isArray(receiver) && key in ArrayPrototype) methodOf = "an array";
        else if (key in StringPrototype) methodOf = "a string";
        else if (key in NumberPrototype) methodOf = "a number";
      }
      return {
        key: keyText,
        promise,
        tool: origin.tool,
        stack: origin.site instanceof ErrorCtor ? rawStackOf(origin.site) : undefined,
        path,
        shape: promise ? "a Promise" : shapeOf(receiver),
        methodOf,
      };
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
  globalValue("ToolError", ToolError);
  globalValue("Date", ProgramDate);
  globalValue("performance", performanceObject);
  globalValue("crypto", cryptoObject);
  defineProperty(globalThis, "tools", { value: tools, writable: false, enumerable: false, configurable: false });

  return freeze({ makeToolError, show, findNotJson, rawStackOf, trackCall, tagResult, lastMiss });
})
