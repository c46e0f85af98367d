// Node's fs with the one function Node 22 added that the conformance suite imports: globSync,
// for the patterns it uses (`*` within a name, `**` across folders, relative to `cwd`).
import fs from "node:fs";
import path from "node:path";

export * from "node:fs";
export default fs;

function matcher(pattern) {
  const parts = pattern.split("/").map((part) => {
    if (part === "**") return "(?:.*/)?";
    const escaped = part.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")
      .replace(/\?/g, "[^/]");
    return `${escaped}/`;
  });
  return new RegExp(`^${parts.join("").replace(/\/$/, "")}$`);
}

function walk(root, relative, found) {
  for (const entry of fs.readdirSync(path.join(root, relative), { withFileTypes: true })) {
    const name = relative ? `${relative}/${entry.name}` : entry.name;
    found.push(name);
    if (entry.isDirectory()) walk(root, name, found);
  }
  return found;
}

export function globSync(pattern, options = {}) {
  const cwd = options.cwd ?? process.cwd();
  const patterns = Array.isArray(pattern) ? pattern : [pattern];
  const tests = patterns.map(matcher);
  return walk(cwd, "", []).filter((name) => tests.some((test) => test.test(name)));
}
