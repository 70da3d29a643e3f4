// End-to-end: the official OpenAI Node SDK's Responses, embeddings and legacy
// completions calls against llmgate in front of llmgate-sim. Every model's
// first deployment holds its first token past the 300 ms deadline (or fails,
// for embeddings), so each call also goes through a failover and the client
// must see one clean answer. Run by run.sh (through ctest as e2e.openai_apis).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { streamText, tool, jsonSchema } from "ai";
import { ChatOpenAI } from "@langchain/openai";
import { startBinary } from "./procs.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-e2e-apis-"));
const children = [];
let client;
let gatewayUrl;

before(async () => {
  const fast = { ttft_ms: 5, tps: 2000, output_tokens: 6 };
  const simPort = await startBinary(children, BIN, "llmgate-sim", [
    "--listen", "127.0.0.1:0", "--api-key", "sim-key", "--port-file", join(dir, "sim.port"),
    "--model", `good=${JSON.stringify(fast)}`,
    // One stalled deployment per model: five missed deadlines in a row
    // would eject it (a configured deadline missed is a failure).
    ...["stalled", "stalled-tools", "stalled-legacy"].flatMap((name) => [
      "--model", `${name}=${JSON.stringify({ ...fast, stall_before_first_token_ms: 5000 })}`]),
    "--model", `tools=${JSON.stringify({ ...fast, output: "tool_call" })}`,
    "--model", `thinker=${JSON.stringify({ ...fast, reasoning_tokens: 3 })}`,
    "--model", `slow=${JSON.stringify({ ...fast, ttft_ms: 60000 })}`,
    "--model", `embed=${JSON.stringify({ ttft_ms: 5, embedding_dimensions: 8 })}`,
    "--model", `embed-down=${JSON.stringify({ ttft_ms: 5, error_rate: 1, error_status: 503 })}`,
  ], join(dir, "sim.port"));
  const all = "[chat, responses, completions]";
  const config = `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
timeouts: {connect: 1s, ttft: 300ms, idle: 2s, total: 10s}
routing: {exploration: 0, defaults: {policy: ordered}}
providers:
  - {name: sim, base_url: "http://127.0.0.1:${simPort}/v1", api_key_env: E2E_SIM_KEY}
models:
  - name: gpt
    deployments: [{provider: sim, model: stalled, operations: ${all}}, {provider: sim, model: good, operations: ${all}}]
  - name: legacy
    deployments: [{provider: sim, model: stalled-legacy, operations: ${all}}, {provider: sim, model: good, operations: ${all}}]
  - name: tools
    deployments: [{provider: sim, model: stalled-tools, operations: ${all}}, {provider: sim, model: tools, operations: ${all}}]
  - name: thinker
    deployments: [{provider: sim, model: thinker, operations: ${all}}]
  - name: slow
    deployments: [{provider: sim, model: slow, operations: [responses]}]
  - name: embed
    deployments: [{provider: sim, model: embed-down, operations: [embeddings]}, {provider: sim, model: embed, operations: [embeddings]}]
  - name: json-only
    deployments: [{provider: sim, model: good, operations: ${all}, stream: false}]
  - name: json-tools
    deployments: [{provider: sim, model: tools, operations: ${all}, stream: false}]
`;
  writeFileSync(join(dir, "llmgate.yaml"), config);
  process.env.E2E_SIM_KEY = "sim-key";
  const gwPort = await startBinary(children, BIN, "llmgate", [
    "--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "gw.port"), "--log-level", "warn",
  ], join(dir, "gw.port"));
  gatewayUrl = `http://127.0.0.1:${gwPort}/v1`;
  client = new OpenAI({ baseURL: gatewayUrl, apiKey: "client-key", maxRetries: 0 });
});

after(() => {
  for (const c of children) c.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

test("responses.create, non-streamed, through a failover", async () => {
  const { data, response } = await client.responses
    .create({ model: "gpt", input: "Say hello" })
    .withResponse();
  assert.equal(data.object, "response");
  assert.equal(data.status, "completed");
  assert.equal(data.output_text, " lorem ipsum dolor sit amet, consectetur");
  assert.equal(data.usage.output_tokens, 6);
  assert.equal(response.headers.get("x-llmgate-attempts"), "2");
  assert.equal(response.headers.get("x-llmgate-deployment"), "sim/good");
});

test("responses.create, streamed, through a failover: one response, typed events, no [DONE]", async () => {
  const stream = await client.responses.create({ model: "gpt", input: "Say hello", stream: true });
  const types = [];
  let text = "";
  let completed = null;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === "response.output_text.delta") text += event.delta;
    if (event.type === "response.completed") completed = event.response;
  }
  assert.equal(types[0], "response.created");
  assert.equal(types.filter((t) => t === "response.created").length, 1);
  assert.equal(types.at(-1), "response.completed");
  assert.equal(text, " lorem ipsum dolor sit amet, consectetur");
  assert.equal(completed.usage.output_tokens, 6);
});

// A deployment that answers JSON (`stream: false`, set or learnt after a
// provider refused to stream) still gives stream clients the typed events
// their readers need: each SDK's own streaming call, as its users write it.
test("responses.stream() from a deployment that answers JSON", async () => {
  const stream = client.responses.stream({ model: "json-only", input: "Say hello" });
  const types = [];
  let text = "";
  stream.on("event", (event) => types.push(event.type));
  stream.on("response.output_text.delta", (event) => { text += event.delta; });
  const final = await stream.finalResponse();
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  assert.equal(text, " lorem ipsum dolor sit amet, consectetur");
  assert.equal(final.output_text, text);
  assert.equal(final.usage.output_tokens, 6);
});

test("the Vercel AI SDK's streamText (Responses) from a deployment that answers JSON", async () => {
  const openai = createOpenAI({ baseURL: gatewayUrl, apiKey: "client-key" });
  const plain = streamText({ model: openai("json-only"), prompt: "Say hello", maxRetries: 0 });
  assert.equal(await plain.text, " lorem ipsum dolor sit amet, consectetur");
  assert.equal(await plain.finishReason, "stop");
  const withTools = streamText({
    model: openai("json-tools"),
    prompt: "Look it up",
    maxRetries: 0,
    tools: {
      lookup: tool({
        description: "Looks a thing up",
        inputSchema: jsonSchema({ type: "object", properties: { query: { type: "string" } } }),
      }),
    },
  });
  const calls = await withTools.toolCalls;
  assert.equal(calls.length, 1, JSON.stringify(calls));
  assert.equal(calls[0].toolName, "lookup");
  assert.deepEqual(calls[0].input, { query: " lorem ipsum dolor sit amet, consectetur" });
  assert.equal(await withTools.finishReason, "tool-calls");
});

test("LangChain's ChatOpenAI with useResponsesApi streams from a deployment that answers JSON", async () => {
  const chat = new ChatOpenAI({
    model: "json-only",
    apiKey: "client-key",
    useResponsesApi: true,
    maxRetries: 0,
    configuration: { baseURL: gatewayUrl },
  });
  let text = "";
  for await (const chunk of await chat.stream("Say hello")) {
    text += typeof chunk.content === "string" ? chunk.content : chunk.content.map((p) => p.text ?? "").join("");
  }
  assert.equal(text, " lorem ipsum dolor sit amet, consectetur");
});

test("responses: reasoning summary streams before the answer", async () => {
  const stream = await client.responses.create({
    model: "thinker", input: "Think", stream: true, reasoning: { effort: "low", summary: "auto" },
  });
  let reasoning = "";
  let sawTextAfterReasoning = false;
  for await (const event of stream) {
    if (event.type === "response.reasoning_summary_text.delta") reasoning += event.delta;
    if (event.type === "response.output_text.delta" && reasoning) sawTextAfterReasoning = true;
  }
  assert.equal(reasoning, " lorem ipsum dolor");
  assert.ok(sawTextAfterReasoning);
});

test("responses: a function call round trip", async () => {
  const tools = [{ type: "function", name: "lookup", parameters: { type: "object", properties: { query: { type: "string" } } } }];
  const first = await client.responses.create({ model: "tools", input: "Look it up", tools });
  const call = first.output.find((o) => o.type === "function_call");
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, "lookup");
  assert.deepEqual(JSON.parse(call.arguments), { query: " lorem ipsum dolor sit amet, consectetur" });
  // Streamed, the arguments arrive as deltas that add up to the same call.
  const stream = await client.responses.create({ model: "tools", input: "Look it up", tools, stream: true });
  let args = "";
  for await (const event of stream) {
    if (event.type === "response.function_call_arguments.delta") args += event.delta;
  }
  assert.equal(args, call.arguments);
  // The result goes back as input; the conversation continues.
  const second = await client.responses.create({
    model: "gpt",
    input: [
      { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: "function_call_output", call_id: call.call_id, output: "42" },
    ],
  });
  assert.equal(second.status, "completed");
});

test("responses.retrieve, inputItems.list, stream replay and delete reach the provider that stored it", async () => {
  const created = await client.responses.create({ model: "gpt", input: "Remember this" });
  const got = await client.responses.retrieve(created.id);
  assert.equal(got.id, created.id);
  assert.equal(got.status, "completed");
  assert.equal(got.output_text, created.output_text);
  const items = await client.responses.inputItems.list(created.id);
  assert.equal(items.data.length, 1);
  assert.equal(items.data[0].content[0].text, "Remember this");
  const replay = await client.responses.retrieve(created.id, { stream: true });
  const types = [];
  for await (const ev of replay) types.push(ev.type);
  assert.deepEqual([types[0], types.at(-1)], ["response.created", "response.completed"]);
  await client.responses.delete(created.id);
  await assert.rejects(client.responses.retrieve(created.id), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, "response_not_found");
    return true;
  });
});

test("responses in the background: queued, polled and cancelled at the provider that runs it", async () => {
  const queued = await client.responses.create({ model: "slow", input: "A long job", background: true });
  assert.equal(queued.status, "queued");
  const polled = await client.responses.retrieve(queued.id);
  assert.equal(polled.status, "in_progress");
  const cancelled = await client.responses.cancel(queued.id);
  assert.equal(cancelled.status, "cancelled");
});

test("embeddings.create, float and base64, through a failover", async () => {
  const { data: floats, response } = await client.embeddings
    .create({ model: "embed", input: ["alpha", "beta"], encoding_format: "float" })
    .withResponse();
  assert.equal(response.headers.get("x-llmgate-attempts"), "2");
  assert.equal(floats.data.length, 2);
  assert.equal(floats.data[0].embedding.length, 8);
  // Asked for base64, the SDK hands the string over as it came: little-endian
  // float32s, the same vectors, so the bytes went through untouched.
  const b64 = await client.embeddings.create({ model: "embed", input: ["alpha", "beta"], encoding_format: "base64" });
  for (let i = 0; i < 2; i++) {
    const a = floats.data[i].embedding;
    const bytes = Buffer.from(b64.data[i].embedding, "base64");
    const b = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
    assert.equal(b.length, a.length);
    for (let k = 0; k < a.length; k++) assert.ok(Math.abs(a[k] - b[k]) < 1e-6, `${a[k]} vs ${b[k]}`);
  }
  // Deterministic by input.
  const again = await client.embeddings.create({ model: "embed", input: "alpha", encoding_format: "float" });
  assert.deepEqual(again.data[0].embedding, floats.data[0].embedding);
});

test("completions.create (legacy), non-streamed and streamed, through a failover", async () => {
  const { data, response } = await client.completions
    .create({ model: "legacy", prompt: "Say hello", max_tokens: 20 })
    .withResponse();
  assert.equal(data.object, "text_completion");
  assert.equal(data.choices[0].text, " lorem ipsum dolor sit amet, consectetur");
  assert.equal(response.headers.get("x-llmgate-attempts"), "2");
  const stream = await client.completions.create({ model: "legacy", prompt: "Say hello", stream: true });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
  assert.equal(text, data.choices[0].text);
});

test("a model not served at an endpoint is a BadRequestError naming it", async () => {
  await assert.rejects(
    client.embeddings.create({ model: "gpt", input: "x" }),
    (e) => e.status === 400 && /\/v1\/embeddings/.test(e.message),
  );
});
