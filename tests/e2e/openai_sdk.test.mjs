// End-to-end: the official OpenAI Node SDK against llmgate in front of
// llmgate-sim processes, all on loopback. Run by run.sh (through ctest).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startBinary } from "./procs.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-e2e-"));
const children = [];

function start(cmd, args, portFile) {
  return startBinary(children, BIN, cmd, args, portFile);
}

let client, noRetry, simURL;

before(async () => {
  const fast = { ttft_ms: 5, tps: 2000, output_tokens: 8 };
  const simPort = await start("llmgate-sim", [
    "--listen", "127.0.0.1:0", "--api-key", "sim-key", "--port-file", join(dir, "sim.port"),
    "--model", `good=${JSON.stringify(fast)}`,
    "--model", `cut=${JSON.stringify({ ...fast, output_tokens: 10, cut_after_tokens: 3 })}`,
    "--model", `good10=${JSON.stringify({ ...fast, output_tokens: 10 })}`,
    "--model", `down=${JSON.stringify({ ...fast, error_rate: 1, error_status: 503 })}`,
    "--model", `tools=${JSON.stringify({ ...fast, output: "tool_call", ratelimit_headers: true })}`,
    "--model", `thinker=${JSON.stringify({ ...fast, reasoning_tokens: 4 })}`,
    "--model", `verified-only=${JSON.stringify({ ...fast, reject_stream: true })}`,
    "--model", `o3ish=${JSON.stringify({ ttft_ms: 5, tps: 100, output_tokens: 6, reasoning_tokens: 60, reasoning_hidden: true })}`,
    "--model", `cited=${JSON.stringify({ ...fast, annotations: true, cached_tokens: 2, reasoning_tokens: 3, reasoning_field: "reasoning" })}`,
  ], join(dir, "sim.port"));
  simURL = `http://127.0.0.1:${simPort}`;
  const config = `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
timeouts: {connect: 1s, ttft: 2s, idle: 2s, total: 10s}
routing: {exploration: 0, defaults: {policy: ordered}}
providers:
  - {name: sim, base_url: "http://127.0.0.1:${simPort}/v1", api_key_env: E2E_SIM_KEY, region: local}
  - {name: strict, base_url: "http://127.0.0.1:${simPort}/v1", api_key_env: E2E_SIM_KEY, timeouts: {ttft: 300ms}}
models:
  - name: chat
    deployments: [{provider: sim, model: down}, {provider: sim, model: good}]
  - name: cut-chat
    deployments: [{provider: sim, model: cut}]
  - name: continued-chat
    deployments: [{provider: sim, model: cut}, {provider: sim, model: good10, continuation: prefix}]
  - name: whole-chat
    deployments: [{provider: sim, model: good10}]
  - name: down-chat
    deployments: [{provider: sim, model: down}]
  - name: tools-chat
    deployments: [{provider: sim, model: tools}]
  - name: thinker-chat
    deployments: [{provider: sim, model: thinker}]
  - name: verified-chat
    deployments: [{provider: sim, model: verified-only}, {provider: sim, model: good}]
  - name: reasoning-chat
    deployments: [{provider: strict, model: o3ish, ttft_timeout: none}, {provider: sim, model: good}]
  - name: cited-chat
    deployments: [{provider: sim, model: cited}]
`;
  writeFileSync(join(dir, "llmgate.yaml"), config);
  process.env.E2E_SIM_KEY = "sim-key";
  const gwPort = await start("llmgate", [
    "--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "gw.port"), "--log-level", "warn",
  ], join(dir, "gw.port"));
  const baseURL = `http://127.0.0.1:${gwPort}/v1`;
  client = new OpenAI({ baseURL, apiKey: "client-key-not-forwarded" });
  noRetry = new OpenAI({ baseURL, apiKey: "client-key-not-forwarded", maxRetries: 0 });
});

after(() => {
  for (const c of children) c.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

test("non-streaming completion through a failover", async () => {
  const { data, response } = await client.chat.completions
    .create({ model: "chat", messages: [{ role: "user", content: "Say hello" }] })
    .withResponse();
  assert.equal(data.object, "chat.completion");
  assert.equal(data.choices[0].message.role, "assistant");
  assert.ok(data.choices[0].message.content.length > 0);
  assert.equal(data.choices[0].finish_reason, "stop");
  assert.equal(data.usage.completion_tokens, 8);
  assert.equal(data.model, "good");
  assert.equal(response.headers.get("x-llmgate-deployment"), "sim/good");
  assert.equal(response.headers.get("x-llmgate-attempts"), "2");
});

test("streaming completion with usage", async () => {
  const stream = await client.chat.completions.create({
    model: "chat",
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content: "Say hello" }],
  });
  let text = "";
  let contentChunks = 0;
  let usage = null;
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta?.content;
    if (delta) {
      text += delta;
      contentChunks++;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(contentChunks, 8);
  assert.ok(text.trim().length > 0);
  assert.equal(usage.completion_tokens, 8);
});

test("a route override passes through the SDK as a body field", async () => {
  const { data, response } = await client.chat.completions
    .create({
      model: "chat",
      messages: [{ role: "user", content: "Say hello" }],
      route: { order: ["sim/good"], allow_fallbacks: false },
    })
    .withResponse();
  assert.equal(data.model, "good");
  assert.equal(response.headers.get("x-llmgate-attempts"), "1");
  assert.equal(response.headers.get("x-llmgate-policy"), "ordered");
  assert.match(response.headers.get("x-llmgate-route"), /sim\/down=skip\(not in route\.order/);
  await assert.rejects(
    noRetry.chat.completions.create({
      model: "chat",
      messages: [{ role: "user", content: "x" }],
      route: { policy: "fastest" },
    }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === "route" && /route\.policy/.test(err.message),
  );
});

test("an unknown model surfaces as the SDK's NotFoundError", async () => {
  await assert.rejects(
    noRetry.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === "model_not_found",
  );
});

test("a bad request surfaces as the SDK's BadRequestError", async () => {
  await assert.rejects(
    noRetry.chat.completions.create({ model: "chat", messages: [] }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === "messages",
  );
});

test("all deployments down surfaces as an APIError with the gateway's status", async () => {
  await assert.rejects(
    noRetry.chat.completions.create({ model: "down-chat", messages: [{ role: "user", content: "x" }] }),
    // How the attempt failed (the upstream's status), never the upstream's own text.
    (err) => err instanceof OpenAI.InternalServerError && err.status === 502 &&
      /upstream_status\(503\)/.test(err.message) && err.code === "upstream_unavailable",
  );
});

test("a stream cut upstream is an error in the SDK, never a clean end", async () => {
  const stream = await noRetry.chat.completions.create({
    model: "cut-chat",
    stream: true,
    messages: [{ role: "user", content: "Say hello" }],
  });
  let chunks = 0;
  await assert.rejects(
    (async () => {
      for await (const _ of stream) chunks++;
    })(),
    (err) => err instanceof OpenAI.APIError && /truncated|cut/.test(err.message),
  );
  assert.ok(chunks >= 3, `saw ${chunks} chunks before the error`);
});

test("a stream cut mid-answer is continued by a deployment that can: the SDK reads one whole answer", async () => {
  // The unbroken answer, for comparison.
  const whole = await client.chat.completions.create({
    model: "whole-chat", messages: [{ role: "user", content: "Say hello" }],
  });
  // The same answer, cut after 3 tokens on `cut` and continued by `good10`
  // (DeepSeek's prefix way), through the SDK's stream helper.
  const stream = client.chat.completions.stream({
    model: "continued-chat",
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content: "Say hello" }],
  });
  let text = "";
  const ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    text += chunk.choices[0]?.delta?.content ?? "";
  }
  const final = await stream.finalChatCompletion();
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(final.choices[0].message.content, whole.choices[0].message.content);
  assert.equal(final.choices[0].finish_reason, "stop");
  assert.equal(ids.size, 1, "one answer, one id");
  assert.ok(final.usage && final.usage.completion_tokens > 0);
});

// An error's headers: a Headers object (SDK v5) or a plain record (v4).
function header(headers, name) {
  return typeof headers?.get === "function" ? headers.get(name) : headers?.[name];
}

async function simRequests() {
  const r = await fetch(`${simURL}/admin/stats`, { headers: { authorization: "Bearer sim-key" } });
  return (await r.json()).requests;
}

test("when every candidate failed, the SDK's own retries do not repeat them", async () => {
  const before = await simRequests();
  await assert.rejects(
    client.chat.completions.create({ model: "down-chat", messages: [{ role: "user", content: "x" }] }),
    (err) => err instanceof OpenAI.InternalServerError && header(err.headers, "x-should-retry") === "false",
  );
  // The default client would retry twice: one call, one upstream attempt.
  assert.equal((await simRequests()) - before, 1);
});

test("a tool-call stream: TTFT at the first tool-call delta, the provider's rate-limit headers", async () => {
  const { data: stream, response } = await client.chat.completions
    .create({ model: "tools-chat", stream: true, messages: [{ role: "user", content: "look it up" }] })
    .withResponse();
  assert.ok(Number(response.headers.get("x-llmgate-ttft-ms")) >= 0);
  assert.equal(response.headers.get("x-ratelimit-remaining-requests"), "9999");
  const firstOutput = [];
  let args = "";
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.tool_calls || d.content) firstOutput.push(d);
    if (d.tool_calls) args += d.tool_calls[0].function?.arguments ?? "";
  }
  // The first event with output (the one the TTFT was measured at) is the tool call's first delta.
  assert.equal(firstOutput[0].tool_calls[0].function.name, "lookup");
  assert.equal(JSON.parse(args).query.length > 0, true);
});

test("a non-streamed answer is the provider's own, field for field", async () => {
  for (const [model, upstream] of [["tools-chat", "tools"], ["thinker-chat", "thinker"], ["cited-chat", "cited"]]) {
    const via = await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] });
    const direct = new OpenAI({ baseURL: `${simURL}/v1`, apiKey: "sim-key" });
    const own = await direct.chat.completions.create({ model: upstream, messages: [{ role: "user", content: "hi" }] });
    const comparable = (c) => {
      const out = structuredClone(c);
      delete out.id;
      delete out.created;
      for (const ch of out.choices) for (const t of ch.message.tool_calls ?? []) delete t.id;
      return out;
    };
    assert.deepEqual(comparable(via), comparable(own), model);
  }
});

test("a non-stream call to a deployment that may not stream works through the gateway", async () => {
  // Like OpenAI's o3 for an unverified organisation: a 400 naming "stream"
  // to any streaming request. The gateway asks for JSON instead (and
  // remembers it); the SDK sees one clean answer from that deployment.
  const { data, response } = await noRetry.chat.completions
    .create({ model: "verified-chat", messages: [{ role: "user", content: "hi" }] })
    .withResponse();
  assert.equal(data.object, "chat.completion");
  assert.equal(data.model, "verified-only");
  assert.equal(response.headers.get("x-llmgate-deployment"), "sim/verified-only");
  assert.equal(response.headers.get("x-llmgate-attempts"), "1");
  // And a stream client gets a real stream, made from the JSON answer.
  const stream = await noRetry.chat.completions.create({
    model: "verified-chat", stream: true, messages: [{ role: "user", content: "hi" }],
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(text, data.choices[0].message.content);
});

test("a reasoning stream: no first-token deadline fires while the model thinks", async () => {
  // o3ish thinks 60 hidden tokens at 100/s (~0.6 s) on a provider whose
  // first-token timeout is 300 ms; its deployment says ttft_timeout: none.
  const { data: stream, response } = await noRetry.chat.completions
    .create({
      model: "reasoning-chat", stream: true, reasoning_effort: "high",
      stream_options: { include_usage: true }, messages: [{ role: "user", content: "think" }],
    })
    .withResponse();
  assert.equal(response.headers.get("x-llmgate-deployment"), "strict/o3ish");
  assert.equal(response.headers.get("x-llmgate-attempts"), "1");
  assert.ok(Number(response.headers.get("x-llmgate-ttft-ms")) >= 500, response.headers.get("x-llmgate-ttft-ms"));
  let text = "";
  let usage = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(text.length > 0);
  assert.equal(usage.completion_tokens_details.reasoning_tokens, 60);
  assert.equal(usage.completion_tokens, 66);
});
