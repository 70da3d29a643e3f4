// OpenTelemetry traces: llmgate configured only by the standard OTEL_*
// variables exports OTLP/HTTP JSON to a receiver in this test (no collector
// is packaged for Debian; the receiver checks the body as a collector's
// OTLP/HTTP JSON receiver would read it):
//   - a request that fails over and is then hedged gives one SERVER span
//     (child of the client's traceparent, its tracestate kept) and one
//     CLIENT span per attempt with the right outcome (500 -> error, the
//     slow attempt lost the hedge, the fast one won), GenAI attributes,
//     and nothing of the prompt or the answer;
//   - a collector that never answers (or is down) adds no latency to
//     requests, keeps memory bounded (the buffer holds at most
//     OTEL_BSP_MAX_QUEUE_SIZE spans) and counts the dropped spans.
// Run by run.sh (through ctest).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnLogged as spawnLoggedIn, startSim as startSimIn } from "./procs.mjs";
import { eventually, freePort } from "../support/node_support.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-tracing-"));
const children = [];
const servers = [];
const PROMPT = "the secret prompt text";

const spawnLogged = (cmd, args, env = {}) => spawnLoggedIn(children, cmd, args, env);

const startSim = (name, models) => startSimIn(children, BIN, dir, name, models);

// An OTLP/HTTP receiver: `mode` "ok" stores each export, "hang" reads the
// request and never answers.
async function startReceiver(mode) {
  const r = { exports: [], requests: 0, headers: [] };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      r.requests++;
      if (mode === "hang") return;
      r.headers.push(req.headers);
      assert.equal(req.method, "POST");
      assert.equal(req.url, "/v1/traces");
      assert.match(req.headers["content-type"], /^application\/json/);
      r.exports.push(JSON.parse(body));
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  r.url = `http://127.0.0.1:${server.address().port}`;
  r.spans = () => r.exports.flatMap((e) => e.resourceSpans.flatMap((rs) =>
    rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ ...s, resource: rs.resource })))));
  return r;
}

let simPorts;
function configText(apiPort) {
  return `
server:
  listeners: [{address: 127.0.0.1, port: ${apiPort}}]
  workers: 2
routing:
  exploration: 0
  defaults: {policy: ordered}
providers:
  - {name: broken, base_url: "http://127.0.0.1:${simPorts.broken}/v1"}
  - {name: slow, base_url: "http://127.0.0.1:${simPorts.slow}/v1"}
  - {name: fast, base_url: "http://127.0.0.1:${simPorts.fast}/v1"}
  - {name: cutter, base_url: "http://127.0.0.1:${simPorts.cutter}/v1"}
models:
  - name: chain
    routing:
      hedging: {enabled: true, delay: 100ms, max_extra_ratio: 1}
    deployments:
      - {provider: broken, model: m}
      - {provider: slow, model: m}
      - {provider: fast, model: m}
  - name: quick
    deployments: [{provider: fast, model: m}]
  - name: continued
    deployments: [{provider: cutter, model: m}, {provider: fast, model: m, continuation: prefix}]
  - name: stored
    deployments: [{provider: fast, model: m, operations: [responses]}]
`;
}

async function startGateway(name, env) {
  const api = await freePort();
  const cfg = join(dir, `${name}.yaml`);
  writeFileSync(cfg, configText(api));
  const portFile = join(dir, `${name}.port`);
  const child = spawnLogged(join(BIN, "llmgate"), ["--config", cfg, "--port-file", portFile], env);
  await eventually(() => existsSync(portFile), name);
  return { name, child, url: `http://127.0.0.1:${api}` };
}

async function chat(g, model, headers = {}, stream = true) {
  const started = performance.now();
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model, stream, messages: [{ role: "user", content: PROMPT }] }),
  });
  const text = await res.text();
  return { status: res.status, text, headers: res.headers, ms: performance.now() - started };
}

async function metric(g, name, labels = "") {
  const text = await (await fetch(`${g.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ""} `));
  return line ? Number(line.split(" ").pop()) : null;
}

const attr = (span, key) => {
  const a = span.attributes.find((x) => x.key === key);
  if (!a) return undefined;
  const v = a.value;
  if (v.arrayValue) return v.arrayValue.values.map((x) => x.stringValue);
  return v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.doubleValue ?? v.boolValue;
};

before(async () => {
  simPorts = {
    broken: await startSim("broken", { m: { error_rate: 1, error_status: 500 } }),
    slow: await startSim("slow", { m: { ttft_ms: 3000, tps: 200, output_tokens: 5 } }),
    fast: await startSim("fast", { m: { ttft_ms: 5, tps: 500, output_tokens: 5 } }),
    cutter: await startSim("cutter", { m: { ttft_ms: 5, tps: 500, output_tokens: 5, cut_after_tokens: 2 } }),
  };
});

after(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  for (const s of servers) s.closeAllConnections?.(), s.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a stream continued after a cut: the server span says where it broke and who continued it", async () => {
  const receiver = await startReceiver("ok");
  const g = await startGateway("continued", {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: "100",
  });
  const trace = "5bf92f3577b34da6a3ce929d0e0e4737";
  const r = await chat(g, "continued", { traceparent: `00-${trace}-00f067aa0ba902b8-01` });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.text.endsWith("data: [DONE]\n\n"), r.text);
  assert.ok(!r.text.includes('"error"'), r.text);
  await eventually(() => receiver.spans().some((s) => s.traceId === trace && s.kind === 2), "server span exported");
  const server = receiver.spans().find((s) => s.traceId === trace && s.kind === 2);
  assert.equal(attr(server, "llmgate.outcome"), "success");
  assert.equal(attr(server, "llmgate.stream.broken_at"), "cutter/m");
  assert.equal(attr(server, "llmgate.stream.broken_after_chunks"), 2);
  assert.deepEqual(attr(server, "llmgate.stream.continued_by"), ["fast/m"]);
  g.child.kill("SIGTERM");
});

test("a failed-over, hedged request: one server span under the client's, one span per attempt", async () => {
  const receiver = await startReceiver("ok");
  const g = await startGateway("traced", {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: "gateway-under-test",
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=e2e",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  });
  const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const clientSpan = "00f067aa0ba902b7";
  const r = await chat(g, "chain", {
    traceparent: `00-${clientTrace}-${clientSpan}-01`,
    tracestate: "vendor=abc",
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get("x-llmgate-deployment") ?? "fast/m", "fast/m");
  await eventually(() => receiver.spans().filter((s) => s.traceId === clientTrace).length >= 4, "4 spans exported");
  const spans = receiver.spans().filter((s) => s.traceId === clientTrace);
  const servers_ = spans.filter((s) => s.kind === 2);
  assert.equal(servers_.length, 1, "one server span");
  const server = servers_[0];
  assert.equal(server.parentSpanId, clientSpan, "the client's span is the parent");
  assert.equal(server.traceState, "vendor=abc");
  assert.equal(server.name, "chat chain");
  assert.equal(attr(server, "gen_ai.operation.name"), "chat");
  assert.equal(attr(server, "gen_ai.request.model"), "chain");
  assert.equal(attr(server, "llmgate.deployment"), "fast/m");
  assert.equal(attr(server, "llmgate.outcome"), "success");
  assert.equal(attr(server, "llmgate.attempts"), 3);
  assert.equal(attr(server, "llmgate.failover_reason"), "upstream_status");
  assert.equal(server.status, undefined, "the request succeeded");
  const resource = Object.fromEntries(server.resource.attributes.map((a) => [a.key, a.value.stringValue]));
  assert.equal(resource["service.name"], "gateway-under-test");
  assert.equal(resource["deployment.environment"], "e2e");

  const attempts = spans.filter((s) => s.kind === 3);
  assert.equal(attempts.length, 3, "one client span per attempt");
  for (const a of attempts) {
    assert.equal(a.parentSpanId, server.spanId);
    assert.equal(a.name, "chat m");
    assert.equal(attr(a, "gen_ai.request.model"), "m");
    assert.equal(attr(a, "server.address"), "127.0.0.1");
    assert.ok(BigInt(a.endTimeUnixNano) >= BigInt(a.startTimeUnixNano));
    assert.ok(BigInt(a.startTimeUnixNano) >= BigInt(server.startTimeUnixNano));
  }
  const by = Object.fromEntries(attempts.map((a) => [attr(a, "llmgate.deployment"), a]));
  assert.equal(attr(by["broken/m"], "llmgate.attempt.outcome"), "upstream_status");
  assert.equal(attr(by["broken/m"], "http.response.status_code"), 500);
  assert.equal(attr(by["broken/m"], "error.type"), "upstream_status");
  assert.equal(by["broken/m"].status.code, 2);
  assert.equal(attr(by["broken/m"], "llmgate.attempt.rank"), 1);
  assert.equal(attr(by["slow/m"], "llmgate.attempt.outcome"), "hedge_lost");
  assert.equal(attr(by["slow/m"], "llmgate.hedge.result"), "lost");
  assert.equal(by["slow/m"].status, undefined, "a lost hedge is not an error");
  assert.equal(attr(by["fast/m"], "llmgate.attempt.outcome"), "success");
  assert.equal(attr(by["fast/m"], "llmgate.hedge.result"), "won");
  assert.equal(attr(by["fast/m"], "llmgate.hedge.branch"), "hedge");
  assert.equal(attr(by["fast/m"], "gen_ai.usage.output_tokens"), 5);
  // The router's estimate of the prompt, beside what the provider counted.
  assert.ok(attr(by["fast/m"], "llmgate.input_tokens_estimate") > 0);
  // The answer's id and finish reason, as the client saw them in the stream.
  const chunks = r.text.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)));
  const finish = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f);
  assert.ok(chunks[0].id && finish.length === 1, r.text);
  for (const span of [by["fast/m"], server]) {
    assert.equal(attr(span, "gen_ai.response.id"), chunks[0].id);
    assert.deepEqual(attr(span, "gen_ai.response.finish_reasons"), finish);
  }
  assert.equal(attr(by["broken/m"], "gen_ai.response.id"), undefined);
  assert.ok(attr(by["fast/m"], "llmgate.ttft_seconds") > 0);
  // Prompts and completions are never exported.
  assert.ok(!JSON.stringify(receiver.exports).includes(PROMPT), "the prompt reached the collector");

  // No traceparent: a new trace, the server span a root.
  await chat(g, "quick");
  await eventually(() => receiver.spans().some((s) => s.kind === 2 && s.name === "chat quick"), "the root span");
  const root = receiver.spans().find((s) => s.kind === 2 && s.name === "chat quick");
  assert.equal(root.parentSpanId, undefined);
  assert.notEqual(root.traceId, clientTrace);
  assert.equal(await metric(g, "llmgate_trace_spans_dropped_total", 'reason="queue_full"'), 0);
  assert.ok((await metric(g, "llmgate_trace_spans_exported_total")) >= 6);

  // A stored response read back: a server span under the client's and a
  // client span for the exchange with the provider that stored it.
  const created = await fetch(`${g.url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "stored", input: PROMPT }),
  });
  assert.equal(created.status, 200);
  const id = (await created.json()).id;
  // The create's own spans name the response it made.
  await eventually(() => receiver.spans().some((s) => s.kind === 2 && s.name === "responses stored"), "the create's span");
  const create = receiver.spans().find((s) => s.kind === 2 && s.name === "responses stored");
  assert.equal(attr(create, "gen_ai.response.id"), id);
  const readTrace = "0af7651916cd43dd8448eb211c80319c";
  const got = await fetch(`${g.url}/v1/responses/${id}`, {
    headers: { traceparent: `00-${readTrace}-b7ad6b7169203331-01` },
  });
  assert.equal(got.status, 200);
  await got.text();
  await eventually(() => receiver.spans().filter((s) => s.traceId === readTrace).length >= 2, "the read's spans");
  const read = receiver.spans().filter((s) => s.traceId === readTrace);
  const readServer = read.find((s) => s.kind === 2);
  assert.equal(readServer.name, "GET /v1/responses/{response_id}");
  assert.equal(readServer.parentSpanId, "b7ad6b7169203331");
  assert.equal(attr(readServer, "gen_ai.response.id"), id);
  assert.equal(attr(readServer, "http.response.status_code"), 200);
  assert.equal(attr(readServer, "llmgate.provider"), "fast");
  const readClient = read.find((s) => s.kind === 3);
  assert.equal(readClient.parentSpanId, readServer.spanId);
  assert.equal(attr(readClient, "http.response.status_code"), 200);
  assert.equal(attr(readClient, "server.address"), "127.0.0.1");
  assert.equal(read.length, 2);
  assert.ok(!JSON.stringify(receiver.exports).includes(PROMPT), "the prompt reached the collector");
  g.child.kill("SIGTERM");
  await g.child.exited;
});

test("a collector that never answers adds no latency, keeps memory bounded and counts drops", async (t) => {
  const hang = await startReceiver("hang");
  const plain = await startGateway("untraced", {});
  const traced = await startGateway("hanging", {
    OTEL_EXPORTER_OTLP_ENDPOINT: hang.url,
    OTEL_BSP_SCHEDULE_DELAY: "50",
    OTEL_BSP_MAX_QUEUE_SIZE: "8",
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "4",
    OTEL_EXPORTER_OTLP_TIMEOUT: "5000",
  });
  // Interleaved, so that machine noise hits both alike.
  const times = { plain: [], traced: [] };
  for (let i = 0; i < 60; ++i) {
    for (const [k, g] of [["plain", plain], ["traced", traced]]) {
      const r = await chat(g, "quick", {}, false);
      assert.equal(r.status, 200, r.text);
      times[k].push(r.ms);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const p = median(times.plain), tr = median(times.traced);
  t.diagnostic(`median request: ${tr.toFixed(2)} ms traced (collector hanging) vs ${p.toFixed(2)} ms untraced`);
  // Behaviour, not a tight timing: a request never waits for the exporter
  // (which here waits 5 s per batch); the medians stay alike.
  assert.ok(tr < p + 50, `median ${tr.toFixed(1)} ms traced vs ${p.toFixed(1)} ms untraced`);
  assert.ok(Math.max(...times.traced) < 2000, "no request waited for the collector");
  assert.ok(hang.requests >= 1, "the exporter did try the collector");
  const dropped = await metric(traced, "llmgate_trace_spans_dropped_total", 'reason="queue_full"');
  assert.ok(dropped >= 60 - 8 - 4, `spans beyond the bounded buffer are dropped and counted (${dropped})`);
  // Shutdown does not hang on the collector either (one export timeout at most).
  const stopping = Date.now();
  traced.child.kill("SIGTERM");
  await traced.child.exited;
  assert.ok(Date.now() - stopping < 15000);
  plain.child.kill("SIGTERM");
  await plain.child.exited;
});
