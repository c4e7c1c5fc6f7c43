// jigcmd's Binding evaluator, run by Bun inside an envelope: imports the Binding (and the
// project's jig.ts, when given) and writes one JSON line: the data its defineBinding (and
// defineJig) call snapshotted, or why there is none. Then it exits at once, so that
// nothing the module left behind (a timer, an exit handler's output) can follow the line.

import { definition } from "./index.js";

const [bindingPath, jigPath] = process.argv.slice(2);
const write = (message) => {
  process.stdout.write(`${JSON.stringify(message)}\n`);
  process.exit(0);
};

function describe(error, path) {
  const fields = { path, name: "Error", message: String(error), stack: "", position: null };
  try {
    if (error !== null && (typeof error === "object" || typeof error === "function")) {
      fields.name = String(error.name ?? "Error");
      fields.message = String(error.message ?? error);
      fields.stack = typeof error.stack === "string" ? error.stack : "";
      const position = error.position;
      if (position && typeof position === "object") {
        fields.position = {
          file: String(position.file ?? ""),
          line: Number(position.line ?? 0),
          column: Number(position.column ?? 0),
        };
      }
    }
  } catch {
    // An exotic thrown value: its string form is all there is.
  }
  return fields;
}

async function load(path, kind) {
  let namespace;
  try {
    namespace = await import(`${process.cwd()}/${path}`);
  } catch (error) {
    return { error: { kind: "threw", ...describe(error, path) } };
  }
  const names = Object.keys(namespace);
  const others = names.filter((name) => name !== "default");
  if (!names.includes("default")) {
    return { error: { kind: "export", path, message: "has no default export" } };
  }
  const defined = definition(namespace.default);
  if (defined === undefined || defined.kind !== kind) {
    const got = defined === undefined ? typeof namespace.default : `a define${defined.kind === "jig" ? "Jig" : "Binding"}(...) result`;
    return { error: { kind: "export", path, message: `its default export is ${got}, not a ${kind === "jig" ? "defineJig" : "defineBinding"}(...) result` } };
  }
  if (others.length > 0) {
    return { error: { kind: "export", path, message: `exports ${others.map((name) => `'${name}'`).join(", ")} beside its default; a Binding exports only its definition` } };
  }
  return { data: defined.data };
}

const binding = await load(bindingPath, "binding");
if (binding.error) write({ error: binding.error });
let jig = null;
if (jigPath) {
  const loaded = await load(jigPath, "jig");
  if (loaded.error) write({ error: loaded.error });
  jig = loaded.data;
}
write({ binding: binding.data, jig });
