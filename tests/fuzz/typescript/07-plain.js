#!/usr/bin/env node
const { a = 1, ...rest } = { b: 2 };
const o = { a, rest, get x() { return 1; }, ["k" + a]: 2 };
label: { o.a ||= 3; break label; }
using_ = o?.rest?.b;
o;
