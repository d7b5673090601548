// A first Airlock program: TypeScript, console output, and a JSON result.
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

({
  planets: withMoons.map((p) => p.name),
  totalMoons: withMoons.reduce((sum, p) => sum + p.moons, 0),
});
