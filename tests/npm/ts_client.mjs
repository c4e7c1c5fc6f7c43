// Drives `jigcmd serve` with the TypeScript SDK v2 client: connect in the given negotiation
// mode, list the tools, run four calls in parallel, read what the first one links (a
// 2026-07-28 read is a CacheableResult the SDK checks), print one JSON summary line.
// Usage: node ts_client.mjs <legacy|auto|pin> <command> [args...]  (NODE_PATH names the SDK)
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.JIGCMD_TS_SDK_PREFIX, "package.json"));
const { Client } = await import(require.resolve("@modelcontextprotocol/client"));
const { StdioClientTransport } = await import(require.resolve("@modelcontextprotocol/client/stdio"));

const [mode, command, ...args] = process.argv.slice(2);
const negotiation = mode === "pin" ? { pin: "2026-07-28" } : mode;
const client = new Client(
  { name: "jigcmd-ts-test", version: "1.0.0" },
  { versionNegotiation: { mode: negotiation } },
);
await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
const tools = (await client.listTools()).tools.map((tool) => tool.name);
const source = 'console.log("ts " + process.argv[2]);\n';
const tokens = ["t1", "t2", "t3", "t4"];
const results = await Promise.all(
  tokens.map((token) =>
    client.callTool({ name: "cli", arguments: { files: { "src/cli.ts": source }, args: [token] } }),
  ),
);
const reads = [];
for (const link of results[0].content.filter((block) => block.type === "resource_link")) {
  const read = await client.readResource({ uri: link.uri });
  reads.push([link.name, read.contents[0].text?.length ?? read.contents[0].blob?.length]);
}
const templates = (await client.listResourceTemplates()).resourceTemplates;
console.log(
  JSON.stringify({
    reads,
    templates: templates.map((template) => template.uriTemplate),
    listed: (await client.listResources()).resources.length,
    version: client.getNegotiatedProtocolVersion(),
    tools,
    outputs: results.map((result) => result.structuredContent?.stdout?.head),
    errors: results.map((result) => result.isError),
  }),
);
await client.close();
