export {};
{
  import type { T } from "./t";
}
1
