// Loaded with `node --import`: the conformance suite imports `globSync` from `fs`, which Node
// gained in 22; on an older Node its `fs` imports are answered by fs-glob.mjs instead.
import { register } from "node:module";
import fs from "node:fs";

if (typeof fs.globSync !== "function") {
  register("./hooks.mjs", import.meta.url);
}
