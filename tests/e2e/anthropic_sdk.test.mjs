// End-to-end: the official Anthropic TypeScript SDK (npm @anthropic-ai/sdk)
// against llmgate's POST /v1/messages, one public model per upstream
// protocol, all played by one llmgate-sim. Through an Anthropic deployment
// the client's document goes as it came (the model renamed); through an
// OpenAI-compatible or a Gemini one it is translated both ways. The client
// must get Anthropic's API either way: messages.create and messages.stream
// with text, tool use, extended thinking, images, prompt caching and usage,
// countTokens, models, Anthropic's errors, an invisible failover before the
// first token and an error the SDK raises after it. Run by run.sh (ctest:
// e2e.anthropic_sdk).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { lastSimRequest, startBinary } from "./procs.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-e2e-anthropic-"));
const children = [];
const KEY = "sk-llmgate-anthropic-e2e";

const PROTOCOLS = [
  { name: "anthropic", provider: "anthropic-sim", path: "/v1", down: "down-529", next: "openai" },
  { name: "openai", provider: "openai-sim", path: "/v1", down: "down-503", next: "gemini" },
  { name: "gemini", provider: "gemini-sim", path: "/v1beta", down: "down-503", next: "anthropic" },
];
const byName = Object.fromEntries(PROTOCOLS.map((p) => [p.name, p]));
const LOOKUP = {
  name: "lookup",
  description: "Look a query up",
  input_schema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
};
// A 1x1 PNG.
const PIXEL =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

let client, gatewayURL, simURL, expectedText;

before(async () => {
  const fast = { ttft_ms: 5, tps: 2000, output_tokens: 8 };
  const simPort = await startBinary(children, BIN, "llmgate-sim", [
    "--listen", "127.0.0.1:0", "--api-key", "sim-key", "--port-file", join(dir, "sim.port"),
    "--model", `good=${JSON.stringify(fast)}`,
    "--model", `tools=${JSON.stringify({ ...fast, output_tokens: 3, output: "tool_call" })}`,
    "--model", `thinker=${JSON.stringify({ ...fast, output_tokens: 8, reasoning_tokens: 3 })}`,
    "--model", `cached=${JSON.stringify({ ...fast, cached_tokens: 2 })}`,
    "--model", `cut=${JSON.stringify({ ...fast, output_tokens: 12, cut_after_tokens: 4 })}`,
    "--model", `down-529=${JSON.stringify({ ...fast, error_rate: 1, error_status: 529 })}`,
    "--model", `down-503=${JSON.stringify({ ...fast, error_rate: 1, error_status: 503 })}`,
  ], join(dir, "sim.port"));
  simURL = `http://127.0.0.1:${simPort}`;
  const providers = PROTOCOLS.map(
    (p) => `  - {name: ${p.provider}, protocol: ${p.name}, base_url: "${simURL}${p.path}", api_key_env: E2E_SIM_KEY}`,
  ).join("\n");
  const models = PROTOCOLS.map((p) => `
  - {name: ${p.name}-chat, deployments: [{provider: ${p.provider}, model: good}]}
  - {name: ${p.name}-tools, deployments: [{provider: ${p.provider}, model: tools}]}
  - {name: ${p.name}-thinker, deployments: [{provider: ${p.provider}, model: thinker}]}
  - {name: ${p.name}-cached, deployments: [{provider: ${p.provider}, model: cached}]}
  - {name: ${p.name}-cut, deployments: [{provider: ${p.provider}, model: cut}]}
  - {name: ${p.name}-failover, deployments: [{provider: ${p.provider}, model: ${p.down}}, {provider: ${byName[p.next].provider}, model: good}]}`).join("");
  const config = `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
timeouts: {connect: 1s, ttft: 2s, idle: 2s, total: 10s}
routing: {exploration: 0, defaults: {policy: ordered}}
auth:
  keys:
    - {name: agents, explain: true, sha256: ${createHash("sha256").update(KEY).digest("hex")}}
providers:
${providers}
models:${models}
  - name: mixed
    deployments: [{provider: openai-sim, model: good}, {provider: gemini-sim, model: good}, {provider: anthropic-sim, model: good}]
  - name: agent
    deployments: [{provider: anthropic-sim, model: thinker}, {provider: openai-sim, model: thinker}, {provider: gemini-sim, model: thinker}]
`;
  writeFileSync(join(dir, "llmgate.yaml"), config);
  process.env.E2E_SIM_KEY = "sim-key";
  const gwPort = await startBinary(children, BIN, "llmgate", [
    "--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "gw.port"), "--log-level", "warn",
  ], join(dir, "gw.port"));
  gatewayURL = `http://127.0.0.1:${gwPort}`;
  // ANTHROPIC_BASE_URL is the gateway's root: the SDK adds /v1/messages.
  client = new Anthropic({ baseURL: gatewayURL, apiKey: KEY, maxRetries: 0 });
  const direct = new OpenAI({ baseURL: `${simURL}/v1`, apiKey: "sim-key", maxRetries: 0 });
  const own = await direct.chat.completions.create({ model: "good", messages: [{ role: "user", content: "hi" }] });
  expectedText = own.choices[0].message.content;
  assert.ok(expectedText.trim().length > 0);
});

after(() => {
  for (const c of children) c.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

const lastRequest = () => lastSimRequest(simURL);

const textOf = (message) =>
  message.content.filter((b) => b.type === "text").map((b) => b.text).join("");

for (const p of PROTOCOLS) {
  test(`${p.name}: messages.create answers one Message`, async () => {
    const params = {
      model: `${p.name}-chat`,
      max_tokens: 256,
      system: "Be brief.",
      messages: [{ role: "user", content: "Say hello" }],
      metadata: { user_id: "user-42" },
      stop_sequences: ["\n\nHuman:"],
    };
    const { data: message, response } = await client.messages.create(params).withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${p.provider}/good`);
    assert.equal(message.type, "message");
    assert.equal(message.role, "assistant");
    assert.match(message.id, /^msg_/);
    assert.equal(textOf(message), expectedText);
    assert.equal(message.stop_reason, "end_turn");
    assert.equal(message.usage.output_tokens, 8);
    assert.ok(message.usage.input_tokens > 0);
    const last = await lastRequest();
    if (p.name === "anthropic") {
      // As the client sent it: the deployment's model, streamed upstream (the
      // gateway times the first token), nothing else changed.
      assert.equal(last.target, "/v1/messages");
      assert.deepEqual(last.body, { ...params, model: "good", stream: true });
      assert.equal(last.headers["x-api-key"], "sim-key", "the provider's key, never the client's");
    } else if (p.name === "openai") {
      assert.equal(last.target, "/v1/chat/completions");
      assert.equal(last.headers.authorization, "Bearer sim-key");
      assert.deepEqual(last.body.messages, [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Say hello" },
      ]);
      assert.equal(last.body.max_completion_tokens, 256);
      assert.deepEqual(last.body.stop, ["\n\nHuman:"]);
      assert.equal(last.body.user, "user-42");
    } else {
      assert.equal(last.target, "/v1beta/models/good:streamGenerateContent?alt=sse");
      assert.deepEqual(last.body.systemInstruction, { parts: [{ text: "Be brief." }] });
      assert.equal(last.body.generationConfig.maxOutputTokens, 256);
    }
  });

  test(`${p.name}: messages.stream gives Anthropic's event sequence`, async () => {
    const stream = client.messages.stream({
      model: `${p.name}-chat`,
      max_tokens: 256,
      messages: [{ role: "user", content: "Say hello" }],
    });
    const types = [];
    stream.on("streamEvent", (e) => types.push(e.type));
    let streamed = "";
    stream.on("text", (t) => (streamed += t));
    const message = await stream.finalMessage();
    assert.equal(streamed, expectedText);
    assert.equal(textOf(message), expectedText);
    assert.equal(message.stop_reason, "end_turn");
    assert.equal(message.usage.output_tokens, 8);
    assert.ok(message.usage.input_tokens > 0, "input tokens from message_delta");
    const events = types.filter((t) => t !== "ping");
    assert.equal(events[0], "message_start");
    assert.equal(events[1], "content_block_start");
    assert.ok(events.includes("content_block_delta"));
    assert.deepEqual(events.slice(-3), ["content_block_stop", "message_delta", "message_stop"]);
  });

  test(`${p.name}: a tool use round trip`, async () => {
    const question = { role: "user", content: "Look up the weather in Paris" };
    const message = await client.messages
      .stream({ model: `${p.name}-tools`, max_tokens: 256, tools: [LOOKUP], messages: [question] })
      .finalMessage();
    assert.equal(message.stop_reason, "tool_use");
    const use = message.content.find((b) => b.type === "tool_use");
    assert.ok(use, JSON.stringify(message.content));
    assert.equal(use.name, "lookup");
    assert.ok(use.id.length > 0);
    assert.equal(typeof use.input.query, "string");
    assert.ok(use.input.query.length > 0);

    const answer = await client.messages.create({
      model: `${p.name}-chat`,
      max_tokens: 256,
      tools: [LOOKUP],
      messages: [
        question,
        { role: "assistant", content: message.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] },
      ],
    });
    assert.equal(textOf(answer), expectedText);
    const { body } = await lastRequest();
    if (p.name === "openai") {
      assert.equal(body.tools[0].function.name, "lookup");
      assert.deepEqual(body.tools[0].function.parameters, LOOKUP.input_schema);
      assert.equal(body.messages[1].tool_calls[0].id, use.id);
      assert.deepEqual(JSON.parse(body.messages[1].tool_calls[0].function.arguments), use.input);
      assert.deepEqual(body.messages[2], { role: "tool", tool_call_id: use.id, content: "sunny" });
    } else if (p.name === "gemini") {
      assert.deepEqual(body.contents[1].parts.at(-1), { functionCall: { name: "lookup", args: use.input } });
      assert.equal(body.contents[2].parts[0].functionResponse.name, "lookup");
    } else {
      assert.deepEqual(body.messages[2].content[0], { type: "tool_result", tool_use_id: use.id, content: "sunny" });
    }
  });

  test(`${p.name}: extended thinking streams thinking blocks`, async () => {
    const message = await client.messages
      .stream({
        model: `${p.name}-thinker`,
        max_tokens: 4096,
        thinking: { type: "enabled", budget_tokens: 2048 },
        messages: [{ role: "user", content: "Think, then say hello" }],
      })
      .finalMessage();
    const thinking = message.content.find((b) => b.type === "thinking");
    assert.ok(thinking, JSON.stringify(message.content));
    assert.ok(thinking.thinking.trim().length > 0);
    assert.ok(textOf(message).trim().length > 0, "then the answer");
    // Anthropic signs its reasoning; the signature passes through.
    if (p.name === "anthropic") assert.ok(thinking.signature.length > 0);
    const { body } = await lastRequest();
    if (p.name === "anthropic") assert.deepEqual(body.thinking, { type: "enabled", budget_tokens: 2048 });
    else if (p.name === "openai") assert.equal(body.reasoning_effort, "low");
  });

  test(`${p.name}: an image, and prompt caching with cache_control`, async () => {
    const system = [{ type: "text", text: "You are a helpful assistant. ".repeat(8), cache_control: { type: "ephemeral" } }];
    const user = {
      role: "user",
      content: [
        { type: "image", source: { type: "base64", media_type: "image/png", data: PIXEL } },
        { type: "text", text: "What is this?" },
      ],
    };
    const message = await client.messages.create({
      model: `${p.name}-cached`,
      max_tokens: 256,
      system,
      messages: [user],
    });
    assert.equal(textOf(message), expectedText);
    assert.equal(message.usage.cache_read_input_tokens, 2);
    const { body } = await lastRequest();
    if (p.name === "anthropic") {
      assert.deepEqual(body.system, system, "cache_control passed through");
      assert.deepEqual(body.messages[0], user);
    } else if (p.name === "openai") {
      assert.equal(body.messages[1].content[0].image_url.url, `data:image/png;base64,${PIXEL}`);
    } else {
      assert.deepEqual(body.contents[0].parts[0], { inlineData: { mimeType: "image/png", data: PIXEL } });
    }
  });

  test(`${p.name}: countTokens`, async () => {
    const { data, response } = await client.messages
      .countTokens({ model: `${p.name}-chat`, messages: [{ role: "user", content: "Count these words, please" }] })
      .withResponse();
    assert.ok(data.input_tokens > 0);
    if (p.name === "anthropic") {
      // Counted by the Anthropic deployment itself: the client's document,
      // its model, at Anthropic's count_tokens.
      assert.equal(response.headers.get("x-llmgate-token-count"), "counted by deployment anthropic-sim/good");
      const last = await lastRequest();
      assert.equal(last.target, "/v1/messages/count_tokens");
      assert.deepEqual(last.body, { model: "good", messages: [{ role: "user", content: "Count these words, please" }] });
      assert.equal(last.headers["x-api-key"], "sim-key");
    } else {
      assert.match(response.headers.get("x-llmgate-token-count"), /^estimate/);
    }
  });

  test(`${p.name}: a failure before the first token fails over invisibly`, async () => {
    const next = byName[p.next];
    const { data: stream, response } = await client.messages
      .create({ model: `${p.name}-failover`, max_tokens: 256, stream: true, messages: [{ role: "user", content: "hi" }] })
      .withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${next.provider}/good`);
    assert.equal(response.headers.get("x-llmgate-attempts"), "2");
    let text = "";
    for await (const e of stream) {
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") text += e.delta.text;
    }
    assert.equal(text, expectedText);
  });

  test(`${p.name}: a stream cut after its first token ends in an error the SDK raises`, async () => {
    const stream = client.messages.stream({ model: `${p.name}-cut`, max_tokens: 256, messages: [{ role: "user", content: "hi" }] });
    let text = "";
    stream.on("text", (t) => (text += t));
    await assert.rejects(stream.finalMessage(), (err) => {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      assert.equal(err.error?.type, "error");
      assert.equal(err.error?.error?.type, "api_error");
      return true;
    });
    assert.ok(text.length > 0, "the first tokens came");
  });

  test(`${p.name}: a Claude-Code-shaped request`, async () => {
    // A large cached system prompt, many tools, thinking, beta headers, a stream.
    const tools = Array.from({ length: 24 }, (_, i) => ({
      name: `tool_${i}`,
      description: `Tool number ${i}. `.repeat(20),
      input_schema: { type: "object", properties: { path: { type: "string" }, n: { type: "integer" } }, required: ["path"] },
    }));
    tools.at(-1).cache_control = { type: "ephemeral" };
    const system = [
      { type: "text", text: "You are Claude Code, Anthropic's official CLI for Claude." },
      { type: "text", text: "Instructions. ".repeat(2000), cache_control: { type: "ephemeral" } },
    ];
    const stream = client.beta.messages.stream(
      {
        model: `${p.name}-thinker`,
        max_tokens: 32000,
        system,
        tools,
        thinking: { type: "enabled", budget_tokens: 2048 },
        metadata: { user_id: "user_abc_account__session_1234" },
        messages: [
          { role: "user", content: [{ type: "text", text: "Fix the bug in main.cpp", cache_control: { type: "ephemeral" } }] },
        ],
        betas: ["interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14"],
      },
    );
    const message = await stream.finalMessage();
    assert.ok(textOf(message).trim().length > 0);
    const last = await lastRequest();
    if (p.name === "anthropic") {
      assert.equal(last.headers["anthropic-beta"], "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14");
      assert.deepEqual(last.body.system, system);
      assert.deepEqual(last.body.tools, tools);
    } else if (p.name === "openai") {
      assert.equal(last.body.tools.length, 24);
      assert.equal(last.body.reasoning_effort, "low");
    } else {
      assert.equal(last.body.tools[0].functionDeclarations.length, 24);
    }
  });
}

test("one public model: the same conversation through each of its protocols", async () => {
  // A tool-using, thinking agent's turn, pinned to each deployment in turn
  // (x-llmgate-providers): the client cannot tell them apart.
  for (const p of PROTOCOLS) {
    const pinned = new Anthropic({
      baseURL: gatewayURL, apiKey: KEY, maxRetries: 0, defaultHeaders: { "x-llmgate-providers": p.provider },
    });
    const { data: stream, response } = await pinned.messages
      .create({
        model: "agent",
        max_tokens: 4096,
        stream: true,
        thinking: { type: "enabled", budget_tokens: 1024 },
        tools: [LOOKUP],
        system: [{ type: "text", text: "You are an agent.", cache_control: { type: "ephemeral" } }],
        messages: [{ role: "user", content: "hi" }],
      })
      .withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${p.provider}/thinker`, p.name);
    const types = new Set();
    let text = "", thinking = "";
    for await (const e of stream) {
      types.add(e.type);
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") text += e.delta.text;
      if (e.type === "content_block_delta" && e.delta.type === "thinking_delta") thinking += e.delta.thinking;
    }
    assert.ok(text.trim().length > 0 && thinking.trim().length > 0, p.name);
    for (const t of ["message_start", "content_block_start", "content_block_stop", "message_delta", "message_stop"])
      assert.ok(types.has(t), `${p.name}: ${t}`);
  }
});

test("errors come in Anthropic's shape with its status codes", async () => {
  const stranger = new Anthropic({ baseURL: gatewayURL, apiKey: "sk-not-a-key", maxRetries: 0 });
  await assert.rejects(
    stranger.messages.create({ model: "openai-chat", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
    (err) => err instanceof Anthropic.AuthenticationError && err.status === 401 && err.error.error.type === "authentication_error",
  );
  await assert.rejects(
    client.messages.create({ model: "no-such-model", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
    (err) => err instanceof Anthropic.NotFoundError && err.error.error.type === "not_found_error",
  );
  // Anthropic's own check, in its words: max_tokens is required.
  const r = await fetch(`${gatewayURL}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ model: "openai-chat", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 400);
  assert.deepEqual(await r.json(), {
    type: "error",
    error: { type: "invalid_request_error", message: "max_tokens: Field required" },
  });
});

test("what only Anthropic can say is served by an Anthropic deployment, never dropped", async () => {
  // mixed lists openai, gemini, then anthropic: a document block passes the first two over.
  const { data, response } = await client.messages
    .create({
      model: "mixed",
      max_tokens: 64,
      messages: [
        {
          role: "user",
          content: [
            { type: "document", source: { type: "text", media_type: "text/plain", data: "A short note." } },
            { type: "text", text: "Summarise it" },
          ],
        },
      ],
    })
    .withResponse();
  assert.equal(response.headers.get("x-llmgate-deployment"), "anthropic-sim/good");
  assert.equal(textOf(data), expectedText);
  const plain = await client.messages
    .create({ model: "mixed", max_tokens: 64, messages: [{ role: "user", content: "hi" }] })
    .withResponse();
  assert.equal(plain.response.headers.get("x-llmgate-deployment"), "openai-sim/good");
});

test("the models list in Anthropic's shape", async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.ok(ids.includes("anthropic-chat") && ids.includes("gemini-chat"), ids.join());
  assert.equal(page.data[0].type, "model");
  const one = await client.models.retrieve("openai-chat");
  assert.equal(one.id, "openai-chat");
});
