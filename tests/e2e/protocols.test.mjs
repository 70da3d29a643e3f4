// End-to-end: the official OpenAI Node SDK against llmgate in front of one
// provider per upstream protocol (providers[].protocol: openai, anthropic,
// gemini), all three played by one llmgate-sim process (it answers OpenAI at
// …/chat/completions, Anthropic at …/messages and Gemini at
// …/models/M:streamGenerateContent, each with its vendor's key header). The
// client speaks OpenAI only and must not be able to tell the protocols apart:
// the same streams, answers, tool calls, failovers and errors through each.
// Run by run.sh (through ctest as e2e.protocols).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { lastSimRequest, startBinary } from "./procs.mjs";
import { ChatCompletionStream } from "openai/lib/ChatCompletionStream";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-e2e-protocols-"));
const children = [];

function start(cmd, args, portFile) {
  return startBinary(children, BIN, cmd, args, portFile);
}

// Each protocol, its provider in the gateway's config, and what its
// deployment answers when the sim injects an error (Anthropic's overload is
// 529, Gemini's and OpenAI's 503). `next` serves its failover model.
const PROTOCOLS = [
  { name: "openai", provider: "openai-sim", path: "/v1", down: "down-503", next: "anthropic" },
  { name: "anthropic", provider: "anthropic-sim", path: "/v1", down: "down-529", next: "gemini" },
  { name: "gemini", provider: "gemini-sim", path: "/v1beta", down: "down-503", next: "openai" },
];
const byName = Object.fromEntries(PROTOCOLS.map((p) => [p.name, p]));
const LOOKUP = {
  type: "function",
  function: {
    name: "lookup",
    description: "Look a query up",
    parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
  },
};

let client, simURL, expectedText;

before(async () => {
  const fast = { ttft_ms: 5, tps: 2000, output_tokens: 8 };
  const simPort = await start("llmgate-sim", [
    "--listen", "127.0.0.1:0", "--api-key", "sim-key", "--port-file", join(dir, "sim.port"),
    "--model", `good=${JSON.stringify(fast)}`,
    "--model", `tools=${JSON.stringify({ ...fast, output_tokens: 3, output: "tool_call" })}`,
    "--model", `thinker=${JSON.stringify({ ...fast, output_tokens: 4, reasoning_tokens: 3 })}`,
    "--model", `cached=${JSON.stringify({ ...fast, cached_tokens: 2 })}`,
    "--model", `down-529=${JSON.stringify({ ...fast, error_rate: 1, error_status: 529 })}`,
    "--model", `down-503=${JSON.stringify({ ...fast, error_rate: 1, error_status: 503 })}`,
  ], join(dir, "sim.port"));
  simURL = `http://127.0.0.1:${simPort}`;
  // Each protocol twice: streamed upstream (the default), and `stream: false`.
  const providers = PROTOCOLS.map(
    (p) => `  - {name: ${p.provider}, protocol: ${p.name}, base_url: "${simURL}${p.path}", api_key_env: E2E_SIM_KEY}
  - {name: ${p.provider}-json, protocol: ${p.name}, base_url: "${simURL}${p.path}", api_key_env: E2E_SIM_KEY, stream: false}`,
  ).join("\n");
  const models = PROTOCOLS.map((p) => `
  - name: ${p.name}-chat
    deployments: [{provider: ${p.provider}, model: good}]
  - name: ${p.name}-tools
    deployments: [{provider: ${p.provider}, model: tools}]
  - name: ${p.name}-thinker
    deployments: [{provider: ${p.provider}, model: thinker}]
  - name: ${p.name}-json
    deployments: [{provider: ${p.provider}-json, model: good}]
  - name: ${p.name}-cached
    deployments: [{provider: ${p.provider}, model: cached}]
  - name: ${p.name}-failover
    deployments: [{provider: ${p.provider}, model: ${p.down}}, {provider: ${byName[p.next].provider}, model: good}]`).join("");
  const config = `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
timeouts: {connect: 1s, ttft: 2s, idle: 2s, total: 10s}
routing: {exploration: 0, defaults: {policy: ordered}}
providers:
${providers}
models:${models}
  - name: mixed-chat
    deployments: [{provider: anthropic-sim, model: good}, {provider: gemini-sim, model: good}, {provider: openai-sim, model: good}]
`;
  writeFileSync(join(dir, "llmgate.yaml"), config);
  process.env.E2E_SIM_KEY = "sim-key";
  const gwPort = await start("llmgate", [
    "--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "gw.port"), "--log-level", "warn",
  ], join(dir, "gw.port"));
  client = new OpenAI({ baseURL: `http://127.0.0.1:${gwPort}/v1`, apiKey: "client-key-not-forwarded", maxRetries: 0 });
  // The profile's answer, straight from the sim: every protocol must carry this text.
  const direct = new OpenAI({ baseURL: `${simURL}/v1`, apiKey: "sim-key", maxRetries: 0 });
  const own = await direct.chat.completions.create({ model: "good", messages: [{ role: "user", content: "hi" }] });
  expectedText = own.choices[0].message.content;
  assert.ok(expectedText.trim().length > 0);
});

after(() => {
  for (const c of children) c.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

async function simJSON(path) {
  const r = await fetch(`${simURL}${path}`);
  assert.equal(r.status, 200, path);
  return r.json();
}
const simRequests = async () => (await simJSON("/admin/stats")).requests;
// The last model request the sim received, its body parsed.
const lastRequest = () => lastSimRequest(simURL);

// Reads a stream to its end: text, reasoning, finish reasons, usage, and
// whether the usage chunk came after the finish (as OpenAI sends it).
async function readStream(stream) {
  const out = { text: "", reasoning: "", finishes: [], usage: null, chunks: 0 };
  for await (const chunk of stream) {
    out.chunks++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) {
      assert.equal(out.usage, null, "one usage chunk");
      assert.deepEqual(chunk.choices, [], "the usage chunk has no choices");
      assert.ok(out.finishes.length > 0, "usage comes after the finish");
      out.usage = chunk.usage;
    }
    const choice = chunk.choices[0];
    if (!choice) continue;
    out.text += choice.delta?.content ?? "";
    out.reasoning += choice.delta?.reasoning_content ?? "";
    if (choice.finish_reason) out.finishes.push(choice.finish_reason);
  }
  return out;
}

function checkUsage(usage, completionTokens) {
  assert.ok(usage, "usage present");
  assert.ok(usage.prompt_tokens > 0, `prompt_tokens ${usage.prompt_tokens}`);
  assert.equal(usage.completion_tokens, completionTokens);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

for (const p of PROTOCOLS) {
  test(`${p.name}: a stream with include_usage`, async () => {
    const { data: stream, response } = await client.chat.completions
      .create({
        model: `${p.name}-chat`,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hello" }],
      })
      .withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${p.provider}/good`);
    assert.equal(response.headers.get("x-llmgate-attempts"), "1");
    const s = await readStream(stream);
    assert.equal(s.text, expectedText);
    assert.deepEqual(s.finishes, ["stop"]);
    checkUsage(s.usage, 8);
    // It went upstream in the protocol's own words, with its own key header.
    const last = await lastRequest();
    if (p.name === "anthropic") {
      assert.equal(last.target, "/v1/messages");
      assert.equal(last.headers["anthropic-version"], "2023-06-01");
      assert.equal(last.headers["x-api-key"], "sim-key");
      assert.equal(last.headers.authorization, undefined);
      assert.equal(last.body.system, "Be brief.");
      assert.equal(last.body.max_tokens, 4096); // the provider's default: Anthropic requires one
    } else if (p.name === "gemini") {
      assert.equal(last.target, "/v1beta/models/good:streamGenerateContent?alt=sse");
      assert.equal(last.headers["x-goog-api-key"], "sim-key");
      assert.equal(last.headers.authorization, undefined);
      assert.deepEqual(last.body.systemInstruction, { parts: [{ text: "Be brief." }] });
    } else {
      assert.equal(last.target, "/v1/chat/completions");
      assert.equal(last.headers.authorization, "Bearer sim-key");
    }
  });

  test(`${p.name}: a non-streamed call is one chat.completion with usage`, async () => {
    const { data, response } = await client.chat.completions
      .create({ model: `${p.name}-chat`, messages: [{ role: "user", content: "Say hello" }] })
      .withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${p.provider}/good`);
    assert.equal(data.object, "chat.completion");
    assert.equal(data.choices.length, 1);
    assert.equal(data.choices[0].message.role, "assistant");
    assert.equal(data.choices[0].message.content, expectedText);
    assert.equal(data.choices[0].finish_reason, "stop");
    checkUsage(data.usage, 8);
    // Upstream it was a stream (the gateway times the first token), assembled.
    const last = await lastRequest();
    if (p.name === "gemini") assert.equal(last.target, "/v1beta/models/good:streamGenerateContent?alt=sse");
    else assert.equal(last.body.stream, true);

    // A provider with `stream: false` is asked for the protocol's whole answer.
    const { data: whole, response: json } = await client.chat.completions
      .create({ model: `${p.name}-json`, messages: [{ role: "user", content: "Say hello" }] })
      .withResponse();
    assert.equal(json.headers.get("x-llmgate-deployment"), `${p.provider}-json/good`);
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.choices[0].message.content, expectedText);
    assert.equal(whole.choices[0].finish_reason, "stop");
    checkUsage(whole.usage, 8);
    const asked = await lastRequest();
    if (p.name === "gemini") assert.equal(asked.target, "/v1beta/models/good:generateContent");
    else assert.equal(asked.body.stream, false);
    // ... and a stream client gets that answer as a stream.
    const s = await readStream(
      await client.chat.completions.create({
        model: `${p.name}-json`,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "Say hello" }],
      }),
    );
    assert.equal(s.text, expectedText);
    assert.deepEqual(s.finishes, ["stop"]);
    checkUsage(s.usage, 8);
  });

  test(`${p.name}: prompt caching: cache_control and the cached tokens in usage`, async () => {
    const system = "You are a helpful assistant. ".repeat(8);
    const stream = await client.chat.completions.create({
      model: `${p.name}-cached`,
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: "system", content: [{ type: "text", text: system, cache_control: { type: "ephemeral" } }] },
        { role: "user", content: "hi" },
      ],
    });
    const s = await readStream(stream);
    checkUsage(s.usage, 8);
    assert.equal(s.usage.prompt_tokens_details?.cached_tokens, 2);
    const { body } = await lastRequest();
    if (p.name === "anthropic") {
      // Passed through onto the block: Anthropic caches the prefix up to it.
      assert.deepEqual(body.system, [{ type: "text", text: system, cache_control: { type: "ephemeral" } }]);
    } else if (p.name === "gemini") {
      // Gemini caches implicitly: the marker is not sent.
      assert.deepEqual(body.systemInstruction, { parts: [{ text: system }] });
    } else {
      assert.deepEqual(body.messages[0].content[0].cache_control, { type: "ephemeral" });
    }
  });

  test(`${p.name}: a tool call round trip`, async () => {
    const question = { role: "user", content: "Look up the weather in Paris" };
    const { data: stream, response } = await client.chat.completions
      .create({ model: `${p.name}-tools`, stream: true, tools: [LOOKUP], messages: [question] })
      .withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${p.provider}/tools`);
    // The SDK's own accumulation of the deltas (it checks ids, types and names).
    const final = await ChatCompletionStream.fromReadableStream(stream.toReadableStream()).finalChatCompletion();
    const choice = final.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, "function");
    assert.equal(call.function.name, "lookup");
    assert.ok(call.id.length > 0);
    const args = JSON.parse(call.function.arguments);
    assert.equal(typeof args.query, "string");
    assert.ok(args.query.length > 0);

    // The tool's result goes back as a `tool` message; the model answers.
    const { data: answer, response: second } = await client.chat.completions
      .create({
        model: `${p.name}-chat`,
        tools: [LOOKUP],
        messages: [
          question,
          { role: "assistant", content: null, tool_calls: [call] },
          { role: "tool", tool_call_id: call.id, content: JSON.stringify({ forecast: "sunny" }) },
        ],
      })
      .withResponse();
    assert.equal(second.headers.get("x-llmgate-deployment"), `${p.provider}/good`);
    assert.equal(answer.choices[0].message.content, expectedText);
    assert.equal(answer.choices[0].finish_reason, "stop");
    // Upstream, the call and its result were said in the protocol's own terms.
    const { body } = await lastRequest();
    if (p.name === "anthropic") {
      assert.deepEqual(body.messages[1].content, [{ type: "tool_use", id: call.id, name: "lookup", input: args }]);
      assert.equal(body.messages[2].role, "user");
      assert.deepEqual(body.messages[2].content, [
        { type: "tool_result", tool_use_id: call.id, content: JSON.stringify({ forecast: "sunny" }) },
      ]);
    } else if (p.name === "gemini") {
      assert.deepEqual(body.contents[1], { role: "model", parts: [{ functionCall: { name: "lookup", args } }] });
      assert.deepEqual(body.contents[2], {
        role: "user",
        parts: [{ functionResponse: { name: "lookup", response: { forecast: "sunny" } } }],
      });
    } else {
      assert.equal(body.messages[2].tool_call_id, call.id);
    }
  });

  test(`${p.name}: a failure before the first token fails over to another deployment`, async () => {
    const next = byName[p.next];
    const { data: stream, response } = await client.chat.completions
      .create({
        model: `${p.name}-failover`,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "Say hello" }],
      })
      .withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${next.provider}/good`);
    assert.equal(response.headers.get("x-llmgate-attempts"), "2");
    assert.match(response.headers.get("x-llmgate-failed") ?? "", new RegExp(`${p.provider}/${p.down}=upstream_status`));
    const s = await readStream(stream);
    assert.equal(s.text, expectedText);
    assert.deepEqual(s.finishes, ["stop"]);
    checkUsage(s.usage, 8);
  });

  test(`${p.name}: reasoning_effort streams the reasoning as reasoning_content`, async () => {
    const { data: stream, response } = await client.chat.completions
      .create({
        model: `${p.name}-thinker`,
        stream: true,
        reasoning_effort: "low",
        messages: [{ role: "user", content: "Think, then say hello" }],
      })
      .withResponse();
    assert.equal(response.headers.get("x-llmgate-deployment"), `${p.provider}/thinker`);
    const s = await readStream(stream);
    assert.ok(s.reasoning.trim().length > 0, "reasoning streamed");
    assert.ok(s.text.trim().length > 0, "then the answer");
    assert.deepEqual(s.finishes, ["stop"]);
    const { body } = await lastRequest();
    if (p.name === "anthropic") {
      assert.deepEqual(body.thinking, { type: "enabled", budget_tokens: 2048 }); // thinking_budgets.low
    } else if (p.name === "gemini") {
      assert.deepEqual(body.generationConfig.thinkingConfig, { thinkingBudget: 2048, includeThoughts: true });
    } else {
      assert.equal(body.reasoning_effort, "low");
    }
  });

  test(`${p.name}: logprobs`, async () => {
    if (p.name === "openai") {
      // OpenAI-compatible providers take it: it is forwarded as sent.
      const { response } = await client.chat.completions
        .create({ model: "openai-chat", logprobs: true, messages: [{ role: "user", content: "hi" }] })
        .withResponse();
      assert.equal(response.headers.get("x-llmgate-deployment"), "openai-sim/good");
      assert.equal((await lastRequest()).body.logprobs, true);
      return;
    }
    // No equivalent in the native API: a 400 naming the parameter, and nothing sent upstream.
    const before = await simRequests();
    await assert.rejects(
      client.chat.completions.create({ model: `${p.name}-chat`, logprobs: true, messages: [{ role: "user", content: "hi" }] }),
      (err) =>
        err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === "logprobs" &&
        err.code === "unsupported_parameter",
    );
    assert.equal(await simRequests(), before);
  });
}

test("a parameter the native deployments cannot say is served by one that can", async () => {
  // mixed-chat lists anthropic, gemini, then openai: logprobs passes the first two over.
  const { data, response } = await client.chat.completions
    .create({ model: "mixed-chat", logprobs: true, messages: [{ role: "user", content: "hi" }] })
    .withResponse();
  assert.equal(response.headers.get("x-llmgate-deployment"), "openai-sim/good");
  // Passed over, not tried: one attempt, and x-llmgate-failed says why.
  assert.equal(response.headers.get("x-llmgate-attempts"), "1");
  assert.equal(
    response.headers.get("x-llmgate-failed"),
    "anthropic-sim/good=unsupported(logprobs), gemini-sim/good=unsupported(logprobs)",
  );
  assert.equal(data.choices[0].message.content, expectedText);
  // Without it, the first in order serves.
  const { response: plain } = await client.chat.completions
    .create({ model: "mixed-chat", messages: [{ role: "user", content: "hi" }] })
    .withResponse();
  assert.equal(plain.headers.get("x-llmgate-deployment"), "anthropic-sim/good");
});
