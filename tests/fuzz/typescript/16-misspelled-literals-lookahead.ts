let t: number = 1;
let s = '\x1', u = "\u{110000}", n = 1_, m = 1_.5, b = 1_n;
let cons\u0020a = t << 2;
