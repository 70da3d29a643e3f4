// End-to-end: llmgate's protocol: bedrock against a Bedrock runtime played by
// AWS's own libraries. The server checks every request's AWS Signature
// Version 4 the way AWS does -- signing it again with the SDK for
// JavaScript's signer (@aws-sdk/signature-v4) over the headers the request
// says it signed, at the time it says it was signed -- and answers a
// ConverseStream in frames encoded by AWS's event-stream codec
// (@aws-sdk/eventstream-codec). The client is the OpenAI SDK: it must get
// the answer; a request signed with a secret the server does not accept is
// refused with AWS's 403 and fails over to the next deployment. And the
// other way round: the simulator's Bedrock mode (llmgate's event-stream
// encoder, its signature check) against AWS's signer and codec.
// Run by run.sh (through ctest as e2e.bedrock).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { SignatureV4 } from "@aws-sdk/signature-v4";
import { EventStreamCodec } from "@aws-sdk/eventstream-codec";
import { Sha256 } from "@aws-crypto/sha256-js";
import { fromUtf8, toUtf8 } from "@aws-sdk/util-utf8";
import { startBinary } from "./procs.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-e2e-bedrock-"));
const children = [];
const CREDS = {
  accessKeyId: "AKIDE2EEXAMPLE",
  secretAccessKey: "e2e/SECRET+key/for/bedrock",
  sessionToken: "e2e-session-token",
};
const codec = new EventStreamCodec(toUtf8, fromUtf8);
const seen = { verified: 0, refused: 0, models: [] };
let server, client;

// "20150830T123600Z" as a Date.
function amzDate(s) {
  return new Date(Date.UTC(+s.slice(0, 4), +s.slice(4, 6) - 1, +s.slice(6, 8), +s.slice(9, 11),
    +s.slice(11, 13), +s.slice(13, 15)));
}

// What AWS does with a signed request: sign it again with the secret it
// knows for the access key, over the headers the request lists as signed.
async function verify(req, body, secret) {
  const auth = req.headers.authorization ?? "";
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m || m[1] !== CREDS.accessKeyId) return false;
  const [, , , region, service, signedHeaders] = m;
  const headers = {};
  for (const name of signedHeaders.split(";")) headers[name] = req.headers[name];
  const url = new URL(req.url, "http://x");
  const signer = new SignatureV4({
    credentials: { ...CREDS, secretAccessKey: secret }, region, service, sha256: Sha256,
  });
  const again = await signer.sign(
    { method: req.method, protocol: "http:", hostname: req.headers.host.split(":")[0],
      port: Number(req.headers.host.split(":")[1]), path: url.pathname,
      query: Object.fromEntries(url.searchParams), headers, body },
    { signingDate: amzDate(req.headers["x-amz-date"]) });
  return again.headers.authorization === auth;
}

function frame(type, payload) {
  return codec.encode({
    headers: {
      ":event-type": { type: "string", value: type },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "event" },
    },
    body: fromUtf8(JSON.stringify(payload)),
  });
}

before(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const model = decodeURIComponent(req.url.split("/")[2] ?? "");
      seen.models.push(model);
      // The "wrong-secret" model's requests are checked against another
      // secret: a signature this account would not accept.
      const secret = model === "wrong-secret" ? "not-the-secret" : CREDS.secretAccessKey;
      if (!(await verify(req, body, secret))) {
        seen.refused++;
        res.writeHead(403, { "content-type": "application/json", "x-amzn-errortype": "InvalidSignatureException" });
        res.end(JSON.stringify({ message: "The request signature we calculated does not match the signature you provided." }));
        return;
      }
      seen.verified++;
      const converse = JSON.parse(body);
      assert.equal(converse.messages[0].content[0].text, "Say hello");
      res.writeHead(200, { "content-type": "application/vnd.amazon.eventstream" });
      for (const f of [
        frame("messageStart", { role: "assistant" }),
        frame("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Hello from " }, p: "abcdef" }),
        frame("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Bedrock" } }),
        frame("contentBlockStop", { contentBlockIndex: 0 }),
        frame("messageStop", { stopReason: "end_turn" }),
        frame("metadata", { usage: { inputTokens: 7, outputTokens: 3, totalTokens: 10 }, metrics: { latencyMs: 12 } }),
      ]) res.write(Buffer.from(f));
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const port = server.address().port;
  const config = `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
timeouts: {connect: 1s, ttft: 2s, idle: 2s, total: 10s}
routing: {exploration: 0, defaults: {policy: ordered}}
providers:
  - {name: bedrock, protocol: bedrock, aws_region: us-west-2, base_url: "http://127.0.0.1:${port}"}
models:
  - name: claude
    deployments: [{provider: bedrock, model: "anthropic.claude-3-5-sonnet-20240620-v1:0"}]
  - name: guarded
    deployments:
      - {provider: bedrock, model: wrong-secret}
      - {provider: bedrock, model: "us.amazon.nova-pro-v1:0"}
`;
  writeFileSync(join(dir, "llmgate.yaml"), config);
  const gwPort = await startBinary(children, BIN, "llmgate", [
    "--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "gw.port"), "--log-level", "warn",
  ], join(dir, "gw.port"));
  client = new OpenAI({ baseURL: `http://127.0.0.1:${gwPort}/v1`, apiKey: "x", maxRetries: 0 });
});

after(() => {
  for (const c of children) c.kill("SIGTERM");
  server?.close();
  rmSync(dir, { recursive: true, force: true });
});

// The gateway reads its credentials from the environment it starts in.
process.env.AWS_ACCESS_KEY_ID = CREDS.accessKeyId;
process.env.AWS_SECRET_ACCESS_KEY = CREDS.secretAccessKey;
process.env.AWS_SESSION_TOKEN = CREDS.sessionToken;

test("AWS's signer agrees with llmgate's signature, and llmgate reads AWS's frames", async () => {
  const stream = await client.chat.completions.create({
    model: "claude", stream: true, stream_options: { include_usage: true },
    messages: [{ role: "user", content: "Say hello" }],
  });
  let text = "";
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (c?.delta?.content) text += c.delta.content;
    if (c?.finish_reason) finish = c.finish_reason;
  }
  assert.equal(text, "Hello from Bedrock");
  assert.equal(finish, "stop");
  assert.deepEqual([usage.prompt_tokens, usage.completion_tokens], [7, 3]);
  assert.equal(seen.verified, 1);
  assert.equal(seen.models.at(-1), "anthropic.claude-3-5-sonnet-20240620-v1:0");
});

test("a signature AWS refuses fails over to the next deployment", async () => {
  const answer = await client.chat.completions.create({
    model: "guarded", messages: [{ role: "user", content: "Say hello" }],
  });
  assert.equal(answer.choices[0].message.content, "Hello from Bedrock");
  assert.equal(seen.refused, 1);
  assert.deepEqual(seen.models.slice(-2), ["wrong-secret", "us.amazon.nova-pro-v1:0"]);
});

// The other direction: llmgate-sim's Bedrock mode (the frames llmgate's
// event-stream encoder writes, the signature check llmgate's SigV4 code
// makes) against AWS's libraries -- a request signed by AWS's signer is
// accepted, and every frame of the answer decodes with AWS's codec (which
// checks both CRCs).
test("AWS's codec decodes the simulator's frames, and the simulator accepts AWS's signature", async () => {
  const portFile = join(dir, "bedrock-sim.port");
  const simPort = await startBinary(children, BIN, "llmgate-sim", [
    "--listen", "127.0.0.1:0", "--port-file", portFile,
    "--aws-key", `${CREDS.accessKeyId}:${CREDS.secretAccessKey}`,
    "--model", 'nova={"ttft_ms":1,"tps":5000,"output_tokens":4}',
  ], portFile);
  const body = JSON.stringify({ messages: [{ role: "user", content: [{ text: "Say hello" }] }] });
  const signer = new SignatureV4({ credentials: CREDS, region: "us-east-1", service: "bedrock", sha256: Sha256 });
  const signed = await signer.sign({
    method: "POST", protocol: "http:", hostname: "127.0.0.1", port: simPort,
    path: "/model/nova/converse-stream", query: {},
    headers: { host: `127.0.0.1:${simPort}`, "content-type": "application/json" }, body,
  });
  const res = await fetch(`http://127.0.0.1:${simPort}/model/nova/converse-stream`, {
    method: "POST", headers: signed.headers, body,
  });
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(res.headers.get("content-type"), "application/vnd.amazon.eventstream");
  let bytes = new Uint8Array(await res.arrayBuffer());
  const types = [];
  let text = "";
  while (bytes.length > 0) {
    const length = new DataView(bytes.buffer, bytes.byteOffset).getUint32(0);
    const message = codec.decode(bytes.subarray(0, length));  // throws on a bad CRC
    types.push(message.headers[":event-type"].value);
    const payload = JSON.parse(toUtf8(message.body));
    if (payload.delta?.text) text += payload.delta.text;
    bytes = bytes.subarray(length);
  }
  assert.equal(types[0], "messageStart");
  assert.ok(types.includes("contentBlockDelta"));
  assert.deepEqual(types.slice(-2), ["messageStop", "metadata"]);
  assert.ok(text.length > 0);
  // A signature by another secret is AWS's 403.
  const forged = await new SignatureV4({
    credentials: { ...CREDS, secretAccessKey: "not-the-secret" }, region: "us-east-1", service: "bedrock", sha256: Sha256,
  }).sign({
    method: "POST", protocol: "http:", hostname: "127.0.0.1", port: simPort,
    path: "/model/nova/converse-stream", query: {},
    headers: { host: `127.0.0.1:${simPort}`, "content-type": "application/json" }, body,
  });
  const refused = await fetch(`http://127.0.0.1:${simPort}/model/nova/converse-stream`, {
    method: "POST", headers: forged.headers, body,
  });
  assert.equal(refused.status, 403);
  assert.equal(refused.headers.get("x-amzn-errortype"), "InvalidSignatureException");
});

