const found = await tools.github.search_issues({ q: "is:open label:bug", per_page: 5 });
const ids: number[] = found.items.map((i: { number: number }) => i.number);
const details = await Promise.all(ids.map((n) => tools.github.get_issue({ owner: "o", repo: "r", issue_number: n })));
console.log(`${details.length} issues`);
({ ids, titles: details.map((d) => d.title) });
