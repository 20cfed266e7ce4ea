// The official TypeScript client 2.x (@modelcontextprotocol/client) in its negotiating mode ('auto': it
// probes server/discover and speaks 2026-07-28 when the server offers it), driven by
// tests/test_clients_2026.py. It declares form elicitation, so a purchase without an email is asked for one.
//
//   node ts_client_2026.mjs URL buy EMAIL KEY ANSWER   list the tools, buy twice with KEY, list the bundles,
//                                                      then buy without an email and answer the form with ANSWER
//   node ts_client_2026.mjs URL decline                buy without an email and decline the form
//
// Prints one JSON line: the results, the forms the handler saw, and every HTTP exchange the client made.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, mode, email, key, answerEmail] = process.argv.slice(2);
const HEADERS = ["mcp-protocol-version", "mcp-method", "mcp-name", "accept"];

// What went over the wire: the request's method, headers and params, and what the server answered.
function recordingFetch(wire) {
  return async (input, init = {}) => {
    const headers = new Headers(init.headers);
    const body = typeof init.body === "string" ? JSON.parse(init.body) : null;
    const response = await fetch(input, init);
    const text = await response.clone().text();
    let answer = null;
    try {
      answer = JSON.parse(text);
    } catch {
      answer = text || null;
    }
    wire.push({
      httpMethod: init.method ?? "GET",
      id: body?.id ?? null,
      method: body?.method ?? null,
      headers: Object.fromEntries(HEADERS.filter((h) => headers.has(h)).map((h) => [h, headers.get(h)])),
      params: body?.params ?? null,
      status: response.status,
      result: answer?.result ?? null,
      error: answer?.error ?? null,
    });
    return response;
  };
}

async function connect(answer) {
  const wire = [];
  const forms = [];
  const client = new Client(
    { name: "storefront-tests", version: "2.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: "auto" } },
  );
  client.setRequestHandler("elicitation/create", async (request) => {
    forms.push(request.params);
    return answer;
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch(wire) }));
  return { client, wire, forms };
}

function session(client) {
  return {
    era: client.getProtocolEra() ?? null,
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    server: client.getServerVersion() ?? null,
    discover: client.getDiscoverResult() ?? null,
  };
}

async function buy() {
  const { client, wire, forms } = await connect({ action: "accept", content: { email: answerEmail } });
  const tools = await client.listTools();
  const args = { email, idempotency_key: key };
  const first = await client.callTool({ name: "purchase_free_bundle", arguments: args });
  const second = await client.callTool({ name: "purchase_free_bundle", arguments: args });
  const listed = await client.callTool({ name: "list_bundles", arguments: {} });
  const elicited = await client.callTool({
    name: "purchase_free_bundle",
    arguments: { idempotency_key: `${key}-asked` },
  });
  const out = { ...session(client), tools: tools.tools, first, second, listed, elicited, forms, wire };
  await client.close();
  return out;
}

async function decline() {
  const { client, wire, forms } = await connect({ action: "decline" });
  const declined = await client.callTool({ name: "purchase_free_bundle", arguments: {} });
  const out = { ...session(client), declined, forms, wire };
  await client.close();
  return out;
}

const modes = { buy, decline };
if (!modes[mode]) {
  console.error(`unknown mode ${mode}: buy or decline`);
  process.exit(2);
}
console.log(JSON.stringify(await modes[mode]()));
