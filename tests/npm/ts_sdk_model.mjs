// What a model reads, through the TypeScript SDK (@modelcontextprotocol/sdk v1) and the real
// `jigcmd serve`: a 2 x 200 KB run's result sizes, its stdout read back through resources/read
// with its SHA-256, and the progress a 3 s run with a token hears. Prints one JSON line.
// Usage: node ts_sdk_model.mjs <command> [args...]  (JIGCMD_TS_SDK_PREFIX names the install)
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.JIGCMD_TS_SDK_PREFIX, "package.json"));
const { Client } = await import(require.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StdioClientTransport } = await import(
  require.resolve("@modelcontextprotocol/sdk/client/stdio.js")
);

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "jigcmd-ts-sdk-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
const bytes = (value) => Buffer.byteLength(JSON.stringify(value), "utf8");

const chatty = 'process.stdout.write("o".repeat(200_000));\nprocess.stderr.write("e".repeat(200_000));\n';
const ran = await client.callTool({ name: "cli", arguments: { files: { "src/cli.ts": chatty } } });
const stdout = ran.structuredContent.stdout;
const read = await client.readResource({ uri: stdout.uri });
const text = read.contents[0].text;

const ticking = "for (let i = 1; i <= 15; i++) { console.log(`tick ${i}`); await Bun.sleep(200); }\n";
const heard = [];
const ticked = await client.callTool(
  { name: "cli", arguments: { files: { "src/cli.ts": ticking } } },
  undefined,
  { onprogress: (progress) => heard.push(progress), timeout: 60_000 },
);

console.log(
  JSON.stringify({
    version: client.getServerVersion()?.name,
    isError: ran.isError,
    structuredBytes: bytes(ran.structuredContent),
    totalBytes: bytes(ran.structuredContent) + bytes(ran.content),
    budget: ran.structuredContent.budgetBytes,
    captured: stdout.capturedBytes,
    sha256: stdout.sha256,
    readSha256: "sha256:" + createHash("sha256").update(text, "utf8").digest("hex"),
    readLength: Buffer.byteLength(text, "utf8"),
    links: ran.content.filter((block) => block.type === "resource_link").map((b) => b.name),
    tickedError: ticked.isError,
    progress: heard,
  }),
);
await client.close();
