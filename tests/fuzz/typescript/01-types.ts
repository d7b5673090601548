interface Issue { id: number; title: string; labels?: string[] }
type Page<T> = { items: T[]; next?: string };
const page: Page<Issue> = { items: [{ id: 1, title: "bug" }] };
function first<T extends { id: number }>(xs: readonly T[]): T | undefined {
  return xs[0];
}
const x = first(page.items)!;
x.title as string satisfies string;
