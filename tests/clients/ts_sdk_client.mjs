// The official TypeScript SDK client (the one most desktop apps embed), driven by tests/test_clients.py:
// connect, list tools, call purchase_free_bundle twice with one key and list_bundles once, print everything as
// one JSON line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, email, key] = process.argv.slice(2);
const client = new Client({ name: "storefront-tests", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const tools = await client.listTools();
const args = { email, idempotency_key: key };
const first = await client.callTool({ name: "purchase_free_bundle", arguments: args });
const second = await client.callTool({ name: "purchase_free_bundle", arguments: args });
const refused = await client.callTool({ name: "purchase_free_bundle", arguments: { email: "not-an-email" } });
// The SDK checks structuredContent against the outputSchema listTools gave it.
const listed = await client.callTool({ name: "list_bundles", arguments: {} });
console.log(
  JSON.stringify({
    server: client.getServerVersion(),
    protocolVersion: transport.protocolVersion ?? null,
    tools: tools.tools,
    first,
    second,
    refused,
    listed,
  }),
);
await client.close();
