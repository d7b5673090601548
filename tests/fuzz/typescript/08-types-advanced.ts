type Keys<T> = keyof T;
type Mapped<T> = { readonly [K in keyof T as `get${Capitalize<string & K>}`]-?: () => T[K] };
type Cond<T> = T extends (infer U)[] ? U : T extends Promise<infer V> ? V : never;
declare function assertIsString(v: unknown): asserts v is string;
function isNum(v: unknown): v is number { return typeof v === "number"; }
let u: unique symbol;
const tuple: [a: string, b?: number, ...rest: boolean[]] = ["x"];
const fn = <T,>(t: T): T => t;
fn<number>(tuple.length);
