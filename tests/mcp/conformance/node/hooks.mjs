// Resolve hook: `fs` imported from a package resolves to fs-glob.mjs (Node's fs plus globSync).
const shim = new URL("./fs-glob.mjs", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const fromPackage = (context.parentURL ?? "").includes("/node_modules/");
  if ((specifier === "fs" || specifier === "node:fs") && fromPackage) {
    return { url: shim, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
