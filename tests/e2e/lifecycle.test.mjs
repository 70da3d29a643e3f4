// End-to-end lifecycle of the real binaries: SIGTERM drains (a stream in
// flight finishes, readiness fails, exit 0), a config file change and SIGHUP
// hot-reload (a bad file is rejected and counted), JSON request logs carry
// the routing facts and never the prompt or a key, and llmgate as PID 1 of
// its own PID namespace (as in a container) still drains on SIGTERM.
// Run by run.sh (through ctest).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually, freePort } from "../support/node_support.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const dir = mkdtempSync(join(tmpdir(), "llmgate-life-"));
const children = [];
const SECRET = "sk-lifecycle-secret-key";
const PROMPT = "the secret prompt words";

function spawnLogged(cmd, args, env = {}) {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  child.stderrText = "";
  child.stdoutText = "";
  child.stderr.on("data", (d) => (child.stderrText += d));
  child.stdout.on("data", (d) => (child.stdoutText += d));
  child.exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  children.push(child);
  return child;
}

let simPort;

before(async () => {
  const sim = spawnLogged(join(BIN, "llmgate-sim"), [
    "--listen", "127.0.0.1:0", "--port-file", join(dir, "sim.port"), "--api-key", SECRET,
    // About 1.5 s of output per request: long enough to be in flight during a drain.
    "--model", `slow=${JSON.stringify({ ttft_ms: 20, tps: 40, output_tokens: 60 })}`,
    "--model", `fast=${JSON.stringify({ ttft_ms: 5, tps: 5000, output_tokens: 5 })}`,
  ]);
  simPort = Number(await eventually(() => existsSync(join(dir, "sim.port")) && readFileSync(join(dir, "sim.port"), "utf8").trim(), "llmgate-sim"));
});

after(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

function configText(api, admin, models) {
  return `
server:
  listeners: [{address: 127.0.0.1, port: ${api}}]
  admin_listener: {address: 127.0.0.1, port: ${admin}}
  workers: 2
  drain: {delay: 200ms, timeout: 20s}
providers:
  - {name: sim, base_url: "http://127.0.0.1:${simPort}/v1", api_key_env: LIFECYCLE_KEY}
models:
${models.map((m) => `  - {name: ${m}, deployments: [{provider: sim, model: ${m === "chat" ? "slow" : "fast"}}]}`).join("\n")}
`;
}

// Writes the config the way a Kubernetes ConfigMap update does: a new file
// renamed over the old, so a reader never sees half of it.
function writeConfig(path, text) {
  writeFileSync(path + ".new", text);
  renameSync(path + ".new", path);
}

async function startGateway(name, { pid1 = false, watch = "100ms" } = {}) {
  const api = await freePort();
  const admin = await freePort();
  const cfg = join(dir, `${name}.yaml`);
  writeConfig(cfg, configText(api, admin, ["chat", "quick"]));
  const args = ["--config", cfg, "--log-format", "json", "--watch-interval", watch];
  const env = { LIFECYCLE_KEY: SECRET };
  const child = pid1
    ? spawnLogged("unshare", ["--fork", "--pid", "--mount-proc", join(BIN, "llmgate"), ...args], env)
    : spawnLogged(join(BIN, "llmgate"), args, env);
  await eventually(async () => (await fetch(`http://127.0.0.1:${admin}/readyz`)).status === 200, `${name} ready`);
  return { child, api, admin, cfg };
}

async function metric(admin, series) {
  const text = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line ? Number(line.split(" ").pop()) : undefined;
}

async function models(api) {
  const body = await (await fetch(`http://127.0.0.1:${api}/v1/models`)).json();
  return body.data.map((m) => m.id).sort();
}

function chat(api, model, stream) {
  return fetch(`http://127.0.0.1:${api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer client-token" },
    body: JSON.stringify({ model, stream, messages: [{ role: "user", content: PROMPT }] }),
  });
}

// Starts a stream and resolves once its first event has arrived; `done` then
// resolves with the whole body.
async function startStream(api) {
  const res = await chat(api, "chat", true);
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("data:")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const done = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { done };
}

test("SIGTERM drains: readiness fails, the stream in flight ends with [DONE], exit 0", async () => {
  const gw = await startGateway("drain");
  const stream = await startStream(gw.api);
  gw.child.kill("SIGTERM");
  await eventually(async () => (await fetch(`http://127.0.0.1:${gw.admin}/readyz`)).status === 503, "readyz 503");
  const body = await stream.done;
  assert.match(body, /data: \[DONE\]\n\n$/);
  assert.doesNotMatch(body, /"error"/);
  const { code, signal } = await gw.child.exited;
  assert.equal(signal, null);
  assert.equal(code, 0, gw.child.stderrText);
  assert.match(gw.child.stderrText, /"msg":"drained: every request finished; stopping"/);
});

test("a changed config file and SIGHUP reload; a bad file is rejected and the old config stays", async () => {
  const gw = await startGateway("reload");
  assert.deepEqual(await models(gw.api), ["chat", "quick"]);
  // The file changes (as a ConfigMap update does): picked up by the watch.
  writeConfig(gw.cfg, configText(gw.api, gw.admin, ["chat", "quick", "extra"]));
  await eventually(async () => (await models(gw.api)).includes("extra"), "the watched change to apply");
  // Counted once every worker has the new config: just after it serves.
  await eventually(async () => (await metric(gw.admin, 'llmgate_config_reloads_total{result="success"}')) === 1, "the reload to count");
  // A broken file: rejected, counted, and the running config serves on.
  writeConfig(gw.cfg, "models: [");
  await eventually(async () => (await metric(gw.admin, 'llmgate_config_reloads_total{result="failure"}')) === 1, "the failure to count");
  assert.equal(await metric(gw.admin, "llmgate_config_last_reload_successful"), 0);
  assert.deepEqual(await models(gw.api), ["chat", "extra", "quick"]);
  const ok = await chat(gw.api, "quick", false);
  assert.equal(ok.status, 200);
  await ok.json();
  writeConfig(gw.cfg, configText(gw.api, gw.admin, ["chat", "quick"]));
  await eventually(async () => !(await models(gw.api)).includes("extra"), "the fixed file to apply");
  await eventually(async () => (await metric(gw.admin, "llmgate_config_last_reload_successful")) === 1, "the flag to clear");
  gw.child.kill("SIGTERM");
  assert.equal((await gw.child.exited).code, 0);

  // With the watch off, only SIGHUP reloads.
  const hup = await startGateway("sighup", { watch: "0" });
  writeConfig(hup.cfg, configText(hup.api, hup.admin, ["chat", "quick", "extra"]));
  hup.child.kill("SIGHUP");
  await eventually(async () => (await models(hup.api)).includes("extra"), "the SIGHUP reload");
  await eventually(async () => (await metric(hup.admin, 'llmgate_config_reloads_total{result="success"}')) === 1, "the reload to count");
  hup.child.kill("SIGTERM");
  assert.equal((await hup.child.exited).code, 0);
});

test("JSON request logs carry the routing facts, never the prompt, the completion or a key", async () => {
  const gw = await startGateway("logs");
  const res = await chat(gw.api, "quick", false);
  assert.equal(res.status, 200);
  const completion = (await res.json()).choices[0].message.content;
  const id = res.headers.get("x-request-id");
  gw.child.kill("SIGTERM");
  assert.equal((await gw.child.exited).code, 0);
  const lines = gw.child.stderrText.trim().split("\n");
  const parsed = lines.map((l) => JSON.parse(l));  // every line is one JSON object
  const req = parsed.find((l) => l.msg === "request" && l.request_id === id);
  assert.ok(req, gw.child.stderrText);
  assert.equal(req.model, "quick");
  assert.equal(req.deployment, "sim/fast");
  assert.equal(req.attempts, 1);
  assert.equal(req.result, "success");
  assert.equal(req.outcome, "success");
  assert.equal(typeof req.ttft_ms, "number");
  assert.equal(req.output_tokens, 5);
  for (const secret of [PROMPT, completion, SECRET, "client-token"]) {
    assert.ok(!gw.child.stderrText.includes(secret), `the log contains ${JSON.stringify(secret)}`);
  }
});

test("as PID 1 of its own PID namespace, SIGTERM still drains and exits 0", async (t) => {
  let canUnshare = false;
  try {
    execFileSync("unshare", ["--fork", "--pid", "--mount-proc", "true"], { stdio: "ignore" });
    canUnshare = true;
  } catch {}
  if (!canUnshare) {
    t.skip("unshare --pid is not permitted here (needs root or user namespaces)");
    return;
  }
  const gw = await startGateway("pid1", { pid1: true });
  // The gateway is the forked child of unshare; inside its namespace it is PID 1.
  const pid = Number(execFileSync("pgrep", ["-P", String(gw.child.pid)]).toString().trim());
  const nspid = readFileSync(`/proc/${pid}/status`, "utf8").match(/^NSpid:\s+(.*)$/m)[1].trim().split(/\s+/);
  assert.equal(nspid[nspid.length - 1], "1");
  const stream = await startStream(gw.api);
  process.kill(pid, "SIGTERM");
  assert.match(await stream.done, /data: \[DONE\]\n\n$/);
  const { code } = await gw.child.exited;  // unshare exits with its child's status
  assert.equal(code, 0, gw.child.stderrText);
});

test("--check-config validates a file without its secrets; --require-env wants them", () => {
  // The demo's config, as a CI pipeline without the keys checks it.
  const file = fileURLToPath(new URL("../../deploy/demo/llmgate.yaml", import.meta.url));
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
  let out = "";
  try {
    out = execFileSync(join(BIN, "llmgate"), ["--check-config", file], { env, encoding: "utf8", stdio: "pipe" });
  } catch (e) {
    assert.fail(`exit ${e.status}: ${e.stdout}${e.stderr}`);
  }
  assert.match(out, /: OK \(7 providers/);
  const r = spawnSync(join(BIN, "llmgate"), ["--check-config", file], { env, encoding: "utf8" });
  assert.equal(r.status, 0);
  assert.match(r.stderr, /warning: environment variable "DEMO_GROQ_KEY" is not set/);
  const strict = spawnSync(join(BIN, "llmgate"), ["--check-config", file, "--require-env"], { env, encoding: "utf8" });
  assert.equal(strict.status, 1);
  assert.match(strict.stderr, /environment variable "DEMO_GROQ_KEY" is not set/);
  // A real error is still one.
  const bad = join(dir, "bad.yaml");
  writeFileSync(bad, readFileSync(file, "utf8").replace("policy: cost", "policy: cheapest"));
  const broken = spawnSync(join(BIN, "llmgate"), ["--check-config", bad], { env, encoding: "utf8" });
  assert.equal(broken.status, 1);
  assert.match(broken.stderr, /cheapest/);
});
