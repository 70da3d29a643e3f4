// End-to-end: a real Prometheus (Debian's `prometheus`) scrapes llmgate's
// /metrics while simulated traffic flows, and its query API must show the
// TTFT histogram and the router's gauges for the routed deployment; it also
// loads deploy/prometheus/rules.yaml, whose every rule must evaluate cleanly
// against the live series.
// Run by run.sh (through ctest). Skips, saying why, if prometheus is absent.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually as eventuallyEvery, freePort, which } from "../support/node_support.mjs";

const eventually = (check, what, ms = 60000) => eventuallyEvery(check, what, ms, 250);

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-prom-"));
const children = [];
const prometheusPath = which("prometheus");
const RULES = fileURLToPath(new URL("../../deploy/prometheus/rules.yaml", import.meta.url));

function spawnLogged(cmd, args) {
  const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  child.stderrText = "";
  child.stderr.on("data", (d) => (child.stderrText = (child.stderrText + d).slice(-8000)));
  children.push(child);
  return child;
}

function waitForPortFile(child, name, portFile) {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 15000;
    const poll = () => {
      if (existsSync(portFile)) return resolve(Number(readFileSync(portFile, "utf8").trim()));
      if (child.exitCode !== null) return reject(new Error(`${name} exited: ${child.stderrText}`));
      if (Date.now() > deadline) return reject(new Error(`${name} did not start: ${child.stderrText}`));
      setTimeout(poll, 20);
    };
    poll();
  });
}

let gwPort, promPort;

before(async () => {
  if (!prometheusPath) return;
  const sim = spawnLogged(join(BIN, "llmgate-sim"), [
    "--listen", "127.0.0.1:0", "--port-file", join(dir, "sim.port"),
    "--model", `good=${JSON.stringify({ ttft_ms: 20, tps: 2000, output_tokens: 8 })}`,
  ]);
  const simPort = await waitForPortFile(sim, "llmgate-sim", join(dir, "sim.port"));
  writeFileSync(join(dir, "llmgate.yaml"), `
server:
  listeners: [{address: 127.0.0.1, port: 0}]
  workers: 1
providers:
  - {name: sim, base_url: "http://127.0.0.1:${simPort}/v1", region: local}
models:
  - name: chat
    deployments: [{provider: sim, model: good}]
`);
  const gw = spawnLogged(join(BIN, "llmgate"), [
    "--config", join(dir, "llmgate.yaml"), "--port-file", join(dir, "gw.port"), "--log-level", "warn",
  ]);
  gwPort = await waitForPortFile(gw, "llmgate", join(dir, "gw.port"));
  promPort = await freePort();
  writeFileSync(join(dir, "prometheus.yml"), `
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["${RULES}"]
scrape_configs:
  - job_name: llmgate
    static_configs: [{targets: ["127.0.0.1:${gwPort}"]}]
`);
  spawnLogged(prometheusPath, [
    `--config.file=${join(dir, "prometheus.yml")}`,
    `--storage.tsdb.path=${join(dir, "tsdb")}`,
    `--web.listen-address=127.0.0.1:${promPort}`,
    "--log.level=warn",
  ]);
});

after(() => {
  for (const c of children) c.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

async function query(expr) {
  const res = await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = await res.json();
  if (body.status !== "success") throw new Error(JSON.stringify(body));
  return body.data.result;
}

test("Prometheus scrapes the TTFT histogram and the router's gauges", async (t) => {
  if (!prometheusPath) {
    t.skip("prometheus is not installed (tools/setup.sh installs Debian's prometheus package)");
    return;
  }
  for (let i = 0; i < 10; i++) {
    const res = await fetch(`http://127.0.0.1:${gwPort}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "chat", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /\[DONE\]/);
  }
  const count = await eventually(async () => {
    const r = await query('gen_ai_server_time_to_first_token_seconds_count{gen_ai_request_model="chat",deployment="sim/good"}');
    return r.length === 1 && Number(r[0].value[1]) >= 10 ? r : null;
  }, "the TTFT histogram count to reach 10");
  assert.equal(count[0].metric.gen_ai_provider_name, "sim");
  // A histogram quantile Prometheus computes itself: about the sim's 20 ms.
  const p50 = await query('histogram_quantile(0.5, sum by (le) (gen_ai_server_time_to_first_token_seconds_bucket{gen_ai_request_model="chat"}))');
  assert.ok(Number(p50[0].value[1]) > 0.005 && Number(p50[0].value[1]) < 1, `p50 ${p50[0].value[1]}`);
  const est = await eventually(async () => {
    const r = await query('llmgate_router_ttft_estimate_seconds{deployment="sim/good"}');
    return r.length === 1 && Number(r[0].value[1]) < 0.5 ? r : null;
  }, "the router's TTFT estimate to reflect the traffic");
  assert.ok(Number(est[0].value[1]) > 0);
  const state = await query('llmgate_router_deployment_state{deployment="sim/good",state="healthy"}');
  assert.equal(Number(state[0].value[1]), 1);
  await eventually(async () => {
    const r = await query('llmgate_requests_total{gen_ai_operation_name="chat",model="chat",outcome="success"}');
    return r.length === 1 && Number(r[0].value[1]) === 10;
  }, "llmgate_requests_total to reach 10");
});

test("the shipped recording rules and alerts evaluate cleanly against the live gateway", async (t) => {
  if (!prometheusPath) {
    t.skip("prometheus is not installed (tools/setup.sh installs Debian's prometheus package)");
    return;
  }
  // Every rule has been evaluated, and none failed (bad PromQL at run time,
  // many-to-many matches, label clashes all show up as health "err").
  const groups = await eventually(async () => {
    const res = await fetch(`http://127.0.0.1:${promPort}/api/v1/rules`);
    const body = await res.json();
    const rules = body.data.groups.flatMap((g) => g.rules);
    const evaluated = rules.length > 0 && rules.every((r) => r.health !== "unknown");
    return evaluated ? body.data.groups : null;
  }, "every rule to be evaluated");
  const rules = groups.flatMap((g) => g.rules);
  const broken = rules.filter((r) => r.health !== "ok").map((r) => `${r.name}: ${r.lastError}`);
  assert.deepEqual(broken, []);
  assert.ok(rules.length >= 20, `only ${rules.length} rules loaded`);
  // The dashboard's recorded quantile sees the traffic (the sim's TTFT is 20 ms):
  // a rate needs two scrapes around an increase, so keep traffic flowing.
  const p50 = await eventually(async () => {
    const res = await fetch(`http://127.0.0.1:${gwPort}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "chat", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    await res.text();
    const r = await query('llmgate:ttft_seconds:p50_5m{model="chat",deployment="sim/good"}');
    return r.length === 1 && Number.isFinite(Number(r[0].value[1])) ? r : null;
  }, "the recorded TTFT p50");
  assert.ok(Number(p50[0].value[1]) > 0.005 && Number(p50[0].value[1]) < 1, `p50 ${p50[0].value[1]}`);
  // ... the one healthy deployment counts as available, and no alert fires.
  const available = await eventually(async () => {
    const r = await query('llmgate:model_available_deployments:min{model="chat"}');
    return r.length === 1 ? r : null;
  }, "the available-deployments rule");
  assert.equal(Number(available[0].value[1]), 1);
  const firing = await query('ALERTS{alertstate="firing"}');
  assert.deepEqual(firing.map((a) => a.metric.alertname), []);
});
