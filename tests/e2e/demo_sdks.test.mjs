// The demo as a newcomer's SDK finds it: tools/demo.sh (on free ports, no
// background traffic), then the defaults of the SDKs people start with —
// the Vercel AI SDK's `openai(model)` and the OpenAI Agents SDK (both the
// Responses API), LangChain's ChatOpenAI with useResponsesApi — plus
// embeddings, legacy completions and the operations /v1/models lists.
// Run by run.sh (through ctest as e2e.demo_sdks).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";
import { ChatOpenAI } from "@langchain/openai";
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from "@openai/agents";
import { eventually } from "../support/node_support.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
let demo, baseURL;

before(async () => {
  demo = spawn(join(ROOT, "tools/demo.sh"), ["--port", "0"], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LLMGATE_DEMO_NO_SETUP: "1", LLMGATE_DEMO_TRAFFIC: "0", BUILD_DIR: dirname(resolve(BIN)) },
  });
  demo.out = "";
  demo.stdout.on("data", (d) => (demo.out = (demo.out + d).slice(-40000)));
  demo.stderr.on("data", (d) => (demo.out = (demo.out + d).slice(-40000)));
  demo.exited = new Promise((r) => demo.on("exit", r));
  // The demo says where it listens once it is ready, and is done with its
  // own sample requests when it says how to stop it.
  const port = await eventually(() => {
    if (demo.exitCode !== null) throw new Error("the demo exited: " + demo.out.slice(-3000));
    const m = demo.out.match(/llmgate is listening on http:\/\/127\.0\.0\.1:(\d+)/);
    return m && demo.out.includes("Press Ctrl-C to stop.") && Number(m[1]);
  }, "the demo to start and send its samples", 120000, 200);
  baseURL = `http://127.0.0.1:${port}/v1`;
});

after(async () => {
  if (demo && demo.exitCode === null) {
    process.kill(-demo.pid, "SIGTERM"); // the demo and everything it started
    await Promise.race([demo.exited, new Promise((r) => setTimeout(r, 5000))]);
  }
});

test("the Vercel AI SDK's default provider (the Responses API) against the demo", async () => {
  const openai = createOpenAI({ baseURL, apiKey: "unused" });
  const { text, finishReason } = await generateText({ model: openai("fast-chat"), prompt: "Say hello", maxRetries: 0 });
  assert.ok(text.trim().length > 0);
  assert.ok(["stop", "length"].includes(finishReason), finishReason);
  const stream = streamText({ model: openai("fast-chat"), prompt: "Say hello", maxRetries: 0 });
  assert.ok((await stream.text).trim().length > 0);
});

test("the OpenAI Agents SDK (the Responses API) against the demo", async () => {
  setTracingDisabled(true);
  setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 }));
  setOpenAIAPI("responses");
  const agent = new Agent({ name: "greeter", instructions: "Say hello.", model: "fast-chat" });
  const result = await run(agent, "Hello");
  assert.ok(String(result.finalOutput).trim().length > 0);
});

test("LangChain's ChatOpenAI with useResponsesApi against the demo", async () => {
  const chat = new ChatOpenAI({ model: "fast-chat", apiKey: "unused", useResponsesApi: true, maxRetries: 0, configuration: { baseURL } });
  let text = "";
  for await (const chunk of await chat.stream("Say hello")) {
    text += typeof chunk.content === "string" ? chunk.content : chunk.content.map((p) => p.text ?? "").join("");
  }
  assert.ok(text.trim().length > 0);
});

test("embeddings, legacy completions, and what /v1/models says each model serves", async () => {
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  const e = await client.embeddings.create({ model: "embed", input: ["hello", "world"] });
  assert.equal(e.data.length, 2);
  assert.ok(e.data[0].embedding.length > 0);
  const c = await client.completions.create({ model: "fast-chat", prompt: "Say hello", max_tokens: 8 });
  assert.ok(c.choices[0].text.trim().length > 0);
  const models = Object.fromEntries((await client.models.list()).data.map((m) => [m.id, m.operations]));
  assert.deepEqual(models["fast-chat"], ["chat", "responses", "completions"]);
  assert.deepEqual(models["embed"], ["embeddings"]);
  assert.deepEqual(models["mixed-chat"], ["chat", "responses", "completions"]);
});
