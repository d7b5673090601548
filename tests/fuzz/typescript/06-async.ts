async function* pages(n: number): AsyncGenerator<number> {
  for (let i = 0; i < n; i++) yield i;
}
const seen: number[] = [];
for await (const p of pages(3)) seen.push(p);
const re = /[\p{L}--[a-z]]/v;
const r = await new Promise<string>((resolve) => resolve(re.source));
return { seen, r, tag: String.raw`a\nb`, big: 10n ** 20n };
