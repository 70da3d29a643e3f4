// End-to-end: Gemini on Vertex AI with a service account, against Google's
// side played by Google's own library. The token endpoint checks the JWT
// llmgate signs with google-auth-library's verifier
// (OAuth2Client.verifySignedJwtWithCertsAsync: RS256 signature against the
// account's public key, iat/exp, issuer, audience) before it hands out an
// access token; the Vertex endpoint answers only requests that carry it.
// The client is the OpenAI SDK. A key file whose key is not the account's
// is refused by the verifier and its deployment fails over.
// Run by run.sh (through ctest as e2e.google_auth).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { OAuth2Client } from "google-auth-library";
import { startBinary } from "./procs.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-e2e-google-"));
const children = [];
const ACCOUNT = "llmgate-e2e@proj.iam.gserviceaccount.com";
const SCOPE = "https://www.googleapis.com/auth/cloud-platform";
const verifier = new OAuth2Client();
const seen = { verified: 0, refused: 0, errors: [], tokens: new Set(), answered: 0, unauthorized: 0 };
let server, client;

function rsaKey() {
  return generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
}
const key = rsaKey();
const other = rsaKey();

function sse(res, chunks) {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\r\n\r\n`);
  res.end();
}

before(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const port = server.address().port;
      if (req.url === "/token") {
        const form = new URLSearchParams(body);
        try {
          assert.equal(form.get("grant_type"), "urn:ietf:params:oauth:grant-type:jwt-bearer");
          // Google's own verifier: the account's key (by its kid), the
          // token endpoint as the audience, the account as the issuer.
          const ticket = await verifier.verifySignedJwtWithCertsAsync(
            form.get("assertion"), { k1: key.publicKey }, `http://127.0.0.1:${port}/token`, [ACCOUNT]);
          const claims = ticket.getPayload();
          assert.equal(claims.scope, SCOPE);
          assert.equal(claims.sub, ACCOUNT);
          assert.ok(claims.exp - claims.iat <= 3600);
          seen.verified++;
          const token = `ya29.e2e-${seen.verified}`;
          seen.tokens.add(token);
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ access_token: token, expires_in: 3599, token_type: "Bearer" }));
        } catch (e) {
          seen.refused++;
          seen.errors.push(String(e.message).slice(0, 120));
          res.writeHead(400, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: "invalid_grant", error_description: "Invalid JWT Signature." }));
        }
        return;
      }
      const bearer = (req.headers.authorization ?? "").replace(/^Bearer /, "");
      if (!seen.tokens.has(bearer)) {
        seen.unauthorized++;
        res.writeHead(401, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: 401, message: "Request had invalid authentication credentials.", status: "UNAUTHENTICATED" } }));
        return;
      }
      assert.match(req.url, /^\/v1\/projects\/proj\/locations\/us-central1\/publishers\/google\/models\/gemini-2\.5-flash:streamGenerateContent\?alt=sse$/);
      assert.equal(req.headers["x-goog-api-key"], undefined);
      seen.answered++;
      sse(res, [
        { candidates: [{ content: { role: "model", parts: [{ text: "Hello from " }] }, index: 0 }] },
        { candidates: [{ content: { role: "model", parts: [{ text: "Vertex" }] }, finishReason: "STOP", index: 0 }],
          usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 3, totalTokenCount: 7 } },
      ]);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const port = server.address().port;
  const keyFile = (privateKey, name) => {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify({
      type: "service_account", project_id: "proj", private_key_id: "k1", private_key: privateKey,
      client_email: ACCOUNT, token_uri: `http://127.0.0.1:${port}/token`,
    }));
    return path;
  };
  const base = `http://127.0.0.1:${port}/v1/projects/proj/locations/us-central1/publishers/google`;
  const config = `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
timeouts: {connect: 1s, ttft: 2s, idle: 2s, total: 10s}
routing: {exploration: 0, defaults: {policy: ordered}}
providers:
  - {name: vertex, protocol: gemini, base_url: "${base}", auth: {google_service_account_file: "${keyFile(key.privateKey, "sa.json")}"}}
  - {name: stale-key, protocol: gemini, base_url: "${base}", auth: {google_service_account_file: "${keyFile(other.privateKey, "old.json")}"}}
models:
  - name: gemini
    deployments: [{provider: vertex, model: gemini-2.5-flash}]
  - name: guarded
    deployments:
      - {provider: stale-key, model: gemini-2.5-flash}
      - {provider: vertex, model: gemini-2.5-flash}
`;
  writeFileSync(join(dir, "llmgate.yaml"), config);
  const gwPort = await startBinary(children, BIN, "llmgate", [
    "--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "gw.port"), "--log-level", "error",
  ], join(dir, "gw.port"));
  client = new OpenAI({ baseURL: `http://127.0.0.1:${gwPort}/v1`, apiKey: "x", maxRetries: 0 });
  // Both key files have been tried at the token endpoint.
  const deadline = Date.now() + 10000;
  while (seen.verified < 1 || seen.refused < 1) {
    assert.ok(Date.now() < deadline, `token requests: ${JSON.stringify(seen)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
});

after(() => {
  for (const c of children) c.kill("SIGTERM");
  server?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("google-auth-library verifies the JWT llmgate signs, and Vertex gets its token", async () => {
  const stream = await client.chat.completions.create({
    model: "gemini", stream: true, messages: [{ role: "user", content: "Say hello" }],
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(text, "Hello from Vertex");
  assert.equal(seen.unauthorized, 0);
  assert.ok(seen.verified >= 1);
});

test("a key that is not the account's is refused by the verifier and fails over", async () => {
  assert.match(seen.errors[0], /Invalid token signature/);
  const answer = await client.chat.completions.create({
    model: "guarded", messages: [{ role: "user", content: "Say hello" }],
  });
  assert.equal(answer.choices[0].message.content, "Hello from Vertex");
  // Never sent without a token.
  assert.equal(seen.unauthorized, 0);
});
