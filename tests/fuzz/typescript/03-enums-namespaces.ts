enum Color { Red = 1, Green = Red << 1, Blue = "blue".length }
const enum Flag { A, B }
namespace Geometry {
  export const unit = 1;
  export function area(w: number, h: number = unit): number { return w * h; }
}
declare const external: unknown;
Geometry.area(Color.Green, Flag.B);
