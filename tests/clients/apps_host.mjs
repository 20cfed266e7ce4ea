// A minimal MCP Apps host, run in Debian's Chromium by tests/app/test_mcp_apps_browser.py (bundled
// for the browser with esbuild first). It is what a chat client does with the store's view: the
// official TypeScript client declares the extension and calls a tool, the tool's _meta names its
// view, the client reads that ui:// resource, and ext-apps' own AppBridge runs it in a sandboxed
// iframe (scripts only: no same origin, no forms, no popups) under the CSP the resource asks for,
// passing it the call's input and result and carrying the view's own tool calls to the server.
//
//   window.startHost({ mode: "legacy" | "auto", tool, args }) resolves once the view is running;
//   window.hostLog records every tool call and link the view asked the host for. Options a test
//   sets to play a host that is not ideal: `caps` (the host capabilities offered), `theme`,
//   `result` (sent to the view instead of the tool's own), `loseAnswers` (the number of the view's
//   purchases whose answer is lost after the store ran them, as on a host's timeout).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";

const EXTENSION = "io.modelcontextprotocol/ui";
const MIME_TYPE = "text/html;profile=mcp-app";
window.hostLog = [];

function policy(csp) {
  const sources = (list, none = "'none'") => (list && list.length ? list.join(" ") : none);
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${(csp.resourceDomains || []).join(" ")}`.trim(),
    `style-src 'unsafe-inline' ${(csp.resourceDomains || []).join(" ")}`.trim(),
    `img-src data: ${(csp.resourceDomains || []).join(" ")}`.trim(),
    `connect-src ${sources(csp.connectDomains)}`,
    `frame-src ${sources(csp.frameDomains)}`,
    `base-uri ${sources(csp.baseUriDomains, "'self'")}`, // the spec's default when none is named
  ].join("; ");
}

const CAPS = { openLinks: {}, serverTools: {} };

window.startHost = async ({ mode, tool, args, caps = CAPS, theme = "light", result, loseAnswers = 0 }) => {
  let lose = loseAnswers;
  const client = new Client(
    { name: "apps-test-host", version: "1.0.0" },
    { capabilities: { extensions: { [EXTENSION]: { mimeTypes: [MIME_TYPE] } } }, versionNegotiation: { mode } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
  const { tools } = await client.listTools();
  const uri = getToolUiResourceUri(tools.find((t) => t.name === tool));
  const { contents } = await client.readResource({ uri });
  const [view] = contents;
  if (view.mimeType !== MIME_TYPE) throw new Error(`not an MCP App: ${view.mimeType}`);
  const csp = (view._meta && view._meta.ui && view._meta.ui.csp) || {};

  const frame = document.createElement("iframe");
  frame.id = "view";
  frame.title = "Storefront";
  frame.setAttribute("sandbox", "allow-scripts");
  document.body.append(frame);

  // No client handed to the bridge: this host carries the view's calls itself, to log them.
  const bridge = new AppBridge(
    null,
    { name: "apps-test-host", version: "1.0.0" },
    caps,
    { hostContext: { theme, displayMode: "inline", availableDisplayModes: ["inline"] } },
  );
  bridge.oncalltool = async (params) => {
    window.hostLog.push({ call: params.name, arguments: params.arguments });
    const answer = await client.callTool(params);
    if (params.name === "purchase_free_bundle" && lose > 0) {
      lose -= 1;
      throw new Error("Request timed out"); // the store ran it; the answer never came back
    }
    return answer;
  };
  bridge.onopenlink = async ({ url }) => {
    window.hostLog.push({ link: url });
    return {};
  };
  bridge.onsizechange = ({ height }) => {
    if (height) frame.height = String(Math.min(height + 4, 2000));
  };
  const started = new Promise((resolve, reject) => {
    bridge.oninitialized = async () => {
      try {
        await bridge.sendToolInput({ arguments: args });
        await bridge.sendToolResult(result ?? (await client.callTool({ name: tool, arguments: args })));
        resolve({ era: client.getProtocolEra() ?? null, uri, csp });
      } catch (error) {
        reject(error);
      }
    };
  });
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(csp)}">`;
  frame.srcdoc = view.text.replace("<head>", `<head>${meta}`);
  // A view that never initializes (its script blocked, say) fails the test instead of hanging it.
  const stalled = new Promise((_, reject) =>
    setTimeout(() => reject(new Error("the view never initialized")), 15_000),
  );
  return Promise.race([started, stalled]);
};
