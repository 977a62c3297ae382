// Drives an MCP server over Streamable HTTP with the official TypeScript SDK's client, and
// prints what it saw as one JSON object, for the Rust end-to-end tests to check.
//
// usage: node ts_client.mjs URL CALLS
//
// CALLS is a JSON list of {"name": TOOL, "arguments": {...}}; the token is $MCP_TOKEN. The SDK
// is read from the node_modules directory $MCP_NODE_MODULES (ES modules ignore NODE_PATH).

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = (file) => import(pathToFileURL(join(process.env.MCP_NODE_MODULES, "@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const [url, callsText] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
});
const client = new Client({ name: "ts-e2e", version: "1.0.0" });
await client.connect(transport);
const report = {
  protocol_version: transport.protocolVersion ?? null,
  server_info: client.getServerVersion() ?? null,
  tools: (await client.listTools()).tools,
  calls: [],
};
for (const call of JSON.parse(callsText)) {
  try {
    const result = await client.callTool({ name: call.name, arguments: call.arguments });
    const texts = result.content.filter((b) => b.type === "text").map((b) => b.text);
    report.calls.push({ is_error: Boolean(result.isError), text: texts.join("\n"), structured: result.structuredContent ?? null });
  } catch (e) {
    report.calls.push({ protocol_error: { code: e.code ?? null, message: String(e.message) } });
  }
}
await transport.terminateSession().catch(() => {});
await client.close();
process.stdout.write(JSON.stringify(report) + "\n");
