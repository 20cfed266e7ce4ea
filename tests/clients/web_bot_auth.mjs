// A request signed by Cloudflare's Web Bot Auth signer (npm `web-bot-auth`), sent with fetch.
// node web_bot_auth.mjs <url> <Signature-Agent origin> <private JWK as JSON> <body as JSON>
// Prints {"status", "body", "signatureInput"} as JSON.
import { signatureHeaders } from "web-bot-auth";
import { signerFromJWK } from "web-bot-auth/crypto";

const [url, agent, jwk, body] = process.argv.slice(2);
const headers = { "Content-Type": "application/json", "Signature-Agent": JSON.stringify(agent) };
const request = new Request(url, { method: "POST", headers, body });
const now = new Date();
const signed = await signatureHeaders(request, await signerFromJWK(JSON.parse(jwk)), {
  created: now,
  expires: new Date(now.getTime() + 300_000),
});
const response = await fetch(url, {
  method: "POST",
  headers: { ...headers, Signature: signed.Signature, "Signature-Input": signed["Signature-Input"] },
  body,
});
console.log(JSON.stringify({
  status: response.status,
  body: await response.text(),
  signatureInput: signed["Signature-Input"],
}));
