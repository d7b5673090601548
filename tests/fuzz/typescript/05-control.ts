import type { Thing } from "./things";
export type { Thing };
let total = 0;
outer: for (const [k, v] of Object.entries({ a: 1, b: 2 } as Record<string, number>)) {
  if (k === "b") continue outer;
  total += v ?? 0;
}
try {
  JSON.parse("{");
} catch (e: unknown) {
  total = -1;
} finally {
  total;
}
if (total > 0) { total } else { "none" }
