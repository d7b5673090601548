abstract class Shape<T = number> {
  #id = 0;
  static count = 0;
  protected constructor(public readonly name: string, private size?: T) { Shape.count++; }
  abstract area(): number;
  get id(): number { return this.#id; }
}
class Square extends Shape {
  constructor(private side: number) { super("square"); }
  override area(): number { return this.side ** 2; }
}
new Square(3).area();
