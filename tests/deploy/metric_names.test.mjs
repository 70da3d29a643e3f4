// Every metric that deploy/grafana/llmgate.json and deploy/prometheus/rules.yaml
// read must be exported by the real gateway: starts build/bin/llmgate with a
// one-model config, reads GET /metrics and checks each referenced metric name,
// its type, its labels and every literal label value the queries match on
// (le="2.5", outcome="rejected", state="ejected", ...).
//
// The catalogue of llmgate's metrics is lib/metrics_catalogue.mjs, the PromQL
// selector scanner lib/promql.mjs (shared with grafana.test.mjs and
// prometheus_rules.test.mjs).
// Run by run.sh (through ctest), which sets LLMGATE_BIN_DIR and LLMGATE_SOURCE_DIR.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import YAML from "yaml";
import { GATEWAY_METRICS, resolveMetric } from "./lib/metrics_catalogue.mjs";
import { promqlSelectors, literalValues, selectorProblems, dashboardExpressions, ruleExpressions, recordingRuleNames }
  from "./lib/promql.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
const SRC = process.env.LLMGATE_SOURCE_DIR;
assert.ok(BIN && SRC, "LLMGATE_BIN_DIR and LLMGATE_SOURCE_DIR must be set (run through tests/deploy/run.sh)");
const dashboard = JSON.parse(readFileSync(join(SRC, "deploy/grafana/llmgate.json"), "utf8"));
const rules = YAML.parse(readFileSync(join(SRC, "deploy/prometheus/rules.yaml"), "utf8"));
const recordNames = recordingRuleNames(rules);

// Parses the Prometheus text format: families (name -> type) and samples.
function parseExposition(text) {
  const types = new Map();
  const samples = [];
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(/\s+/);
      types.set(name, type);
      continue;
    }
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/.exec(line);
    assert.ok(m, `unparseable /metrics line: ${line}`);
    const labels = {};
    const body = m[2] ?? "";
    let i = 0;
    while (i < body.length) {
      const l = /^\s*([A-Za-z_][A-Za-z0-9_]*)="/.exec(body.slice(i));
      assert.ok(l, `unparseable labels in /metrics line: ${line}`);
      i += l[0].length;
      let v = "";
      while (body[i] !== '"') {
        if (body[i] === "\\") { v += body[i + 1] === "n" ? "\n" : body[i + 1]; i += 2; } else v += body[i++];
        assert.ok(i < body.length, `unterminated label value in /metrics line: ${line}`);
      }
      i++;
      labels[l[1]] = v;
      if (body[i] === ",") i++;
    }
    samples.push({ name: m[1], labels });
  }
  return { types, samples };
}

// Every selector of the dashboard and the rules that names an llmgate metric.
function referencedSelectors() {
  const out = [];
  for (const { where, expr } of [...dashboardExpressions(dashboard), ...ruleExpressions(rules)]) {
    for (const sel of promqlSelectors(expr)) if (sel.name && !recordNames.has(sel.name)) out.push({ where, sel });
  }
  return out;
}

test("the queries of the dashboard and the rules name only catalogued llmgate metrics", () => {
  const refs = referencedSelectors();
  assert.ok(refs.length > 40, `only ${refs.length} metric selectors found: the scanner is broken`);
  const problems = refs.flatMap(({ where, sel }) => selectorProblems(sel, recordNames).map((p) => `${where}: ${p}`));
  assert.deepEqual(problems, []);
  // Every catalogued metric is shown or alerted on somewhere.
  const used = new Set(refs.map(({ sel }) => resolveMetric(sel.name)?.family));
  assert.deepEqual(Object.keys(GATEWAY_METRICS).filter((f) => !used.has(f)), []);
});

test("the selector scanner finds metrics, matchers and nothing else", () => {
  assert.deepEqual(
    promqlSelectors('sum by (le, deployment) (rate(foo_bucket{le="2.5", a=~"x|y"}[5m] offset 1m)) / on (model) group_left () bar'),
    [{ name: "foo_bucket", matchers: [{ label: "le", op: "=", value: "2.5" }, { label: "a", op: "=~", value: "x|y" }] },
      { name: "bar", matchers: [] }]);
  assert.deepEqual(promqlSelectors('label_replace(up, "model", "$1", "gen_ai_request_model", "(.*)") or vector(0) * 1e-3'),
    [{ name: "up", matchers: [] }]);
  assert.deepEqual(promqlSelectors("count(x{a!='b'} == 0) by (c) > bool 2 and time() - min(y[10m:1m])"),
    [{ name: "x", matchers: [{ label: "a", op: "!=", value: "b" }] }, { name: "y", matchers: [] }]);
  assert.throws(() => promqlSelectors("rtae(x[5m])"), /unknown function rtae/);
  const none = new Set();
  assert.deepEqual(selectorProblems(promqlSelectors('llmgate_requests_total{outcome="errors"}')[0], none),
    ['llmgate_requests_total: outcome="errors" is not one of success, error, rejected, client_error, client_gone, unauthenticated, ' +
      'model_not_allowed, rate_limited, budget_exhausted, shared_state_unavailable, invalid_request, not_found, loop_detected']);
  assert.deepEqual(selectorProblems(promqlSelectors('llmgate_requests_total{deployment="x"}')[0], none),
    ["llmgate_requests_total: has no label deployment"]);
  assert.deepEqual(selectorProblems(promqlSelectors("gen_ai_server_time_to_first_token_seconds")[0], none),
    ["gen_ai_server_time_to_first_token_seconds: not a metric llmgate exports"]);
  assert.deepEqual(selectorProblems(promqlSelectors("llmgate:nope:rate5m")[0], none),
    ["llmgate:nope:rate5m: not a recording rule of deploy/prometheus/rules.yaml"]);
});

// --- Against the real binary ---------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "llmgate-metric-names-"));
let gateway = null;
let stderrText = "";

before(async () => {
  // shared_state and tracing (a Redis and a collector that are not there:
  // their metrics exist all the same).
  writeFileSync(join(dir, "llmgate.yaml"), `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
shared_state: {url: "redis://127.0.0.1:9", connect_timeout: 100ms}
tracing: {endpoint: "http://127.0.0.1:9"}
providers:
  - {name: p1, base_url: "http://127.0.0.1:9/v1"}
models:
  - name: m1
    deployments: [{provider: p1, model: up-1}]
`);
  const bin = join(BIN, "llmgate");
  if (!existsSync(bin)) return; // the tests that need it say so
  gateway = spawn(bin, ["--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "port"), "--log-level", "warn"],
    { stdio: ["ignore", "ignore", "pipe"] });
  gateway.stderr.on("data", (d) => (stderrText = (stderrText + d).slice(-8000)));
});

after(() => {
  if (gateway && gateway.exitCode === null && gateway.signalCode === null) gateway.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function waitForPort() {
  if (!gateway) throw new Error(`${join(BIN, "llmgate")} does not exist: build the gateway first`);
  const portFile = join(dir, "port");
  const deadline = Date.now() + 15000;
  for (;;) {
    if (existsSync(portFile)) {
      const text = readFileSync(portFile, "utf8").trim();
      if (/^[0-9]+$/.test(text)) return Number(text);
    }
    if (gateway.exitCode !== null) throw new Error(`llmgate exited with ${gateway.exitCode}: ${stderrText}`);
    if (Date.now() > deadline) throw new Error(`llmgate wrote no port file within 15 s: ${stderrText}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("llmgate exports every metric, label and label value the dashboard and the rules use", async () => {
  const port = await waitForPort();
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(res.status, 200);
  const { types, samples } = parseExposition(await res.text());
  assert.ok(samples.length > 0, "GET /metrics returned no samples");

  const missing = new Set();
  const problems = [];
  for (const { where, sel } of referencedSelectors()) {
    const r = resolveMetric(sel.name);
    const own = samples.filter((s) => s.name === sel.name);
    if (own.length === 0) { missing.add(sel.name); continue; }
    if (!r) continue; // not catalogued: the first test reports it
    if (types.get(r.family) !== r.spec.type) problems.push(`${r.family}: # TYPE is ${types.get(r.family)}, expected ${r.spec.type}`);
    for (const label of Object.keys(r.spec.labels)) {
      if (!own.every((s) => label in s.labels)) problems.push(`${sel.name}: samples without label ${label}`);
    }
    for (const m of sel.matchers) {
      if (m.op === "!=" || m.op === "!~") continue;
      for (const v of literalValues(m) ?? []) {
        if (!own.some((s) => s.labels[m.label] === v)) problems.push(`${where}: no ${sel.name}{${m.label}="${v}"} sample`);
      }
    }
  }
  assert.deepEqual({ missing: [...missing].sort(), problems: [...new Set(problems)].sort() }, { missing: [], problems: [] },
    "metrics missing from GET /metrics, or exported differently");
});

test("llmgate exits on SIGTERM", async () => {
  await waitForPort();
  const exited = new Promise((resolve) => gateway.once("exit", (code, signal) => resolve({ code, signal })));
  gateway.kill("SIGTERM");
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error(`llmgate still running 30 s after SIGTERM: ${stderrText}`)), 30000).unref());
  assert.deepEqual(await Promise.race([exited, timeout]), { code: 0, signal: null });
});
