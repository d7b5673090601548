// A first Airlock program: TypeScript, console output, a tool call, and a JSON result.
interface Planet {
  name: string;
  moons: number;
}

const planets: Planet[] = [
  { name: "Mercury", moons: 0 },
  { name: "Earth", moons: 1 },
  { name: "Mars", moons: 2 },
  { name: "Jupiter", moons: 95 },
];

const withMoons = planets.filter((p) => p.moons > 0);
console.log(`hello from the sandbox: ${withMoons.length} planets have moons`);

// Tool calls leave the sandbox only through the daemon, which checks each one against the
// policy. `tools.airlock` holds the daemon's own tools: this one searches the tools we may call.
const found = await tools.airlock.search_tools({ query: "search tools" });
const names = found.results.map((r) => r.tool);
console.log(`tools.airlock.search_tools found ${names.length} tool(s): ${names.join(", ")}`);

({
  planets: withMoons.map((p) => p.name),
  totalMoons: withMoons.reduce((sum, p) => sum + p.moons, 0),
  tools: names,
});
