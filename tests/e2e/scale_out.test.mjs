// Scale-out through Redis (shared_state:), with a real redis-server and three
// llmgate processes in front of llmgate-sim:
//   - a key limited to 60 requests/minute gets about 60 successes across the
//     three replicas, not 180;
//   - a deployment with max_concurrent: 4 never has more than 4 streams open
//     at the upstream (the sim's max_in_flight), whichever replica sent them;
//   - a key's tokens per minute and daily spend budget hold across the three;
//   - one replica's upstream 429 + Retry-After, or its ejection of a failing
//     deployment, keeps the others off that deployment; a replica started
//     later learns the running ones;
//   - faults: Redis paused with SIGSTOP (requests wait at most about the
//     configured timeout, a stream in flight does not stall), killed
//     (on_failure: open serves on local limits; closed refuses with a clean
//     503), restarted (connections, leases and limits recover);
//   - prompt-cache affinity: a conversation begun on one replica continues,
//     on another, at the deployment whose prompt cache holds its prefix;
//   - rediss:// with an ACL user: TLS verified against the server name, AUTH
//     as that user; a wrong name or password never connects.
// Run by run.sh (through ctest); needs redis-server (tools/setup.sh installs it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnLogged as spawnLoggedIn, startSim as startSimIn } from "./procs.mjs";
import { eventually, freePort, which } from "../support/node_support.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const REDIS = which("redis-server");
assert.ok(REDIS, "redis-server is not installed (tools/setup.sh installs it)");
const dir = mkdtempSync(join(tmpdir(), "llmgate-scale-"));
const children = [];
const TEAM_KEY = "sk-team-key-0001";
const OPEN_KEY = "sk-open-key-0002";
const TOKENS_KEY = "sk-tokens-key-0003";
const BUDGET_KEY = "sk-budget-key-0004";
const OUTAGE_KEY = "sk-outage-key-0005";  // the same budget, spent through a Redis outage
const TOKENS_PER_MINUTE = 30;
const USD_PER_DAY = 30;  // 10 answers of "priced" ($3 each: 3 output tokens at $1 each)
const sha = (k) => createHash("sha256").update(k).digest("hex");
const TIMEOUT_MS = 100;  // shared_state.timeout

const spawnLogged = (cmd, args, env = {}) => spawnLoggedIn(children, cmd, args, env);

const startSim = (name, models) => startSimIn(children, BIN, dir, name, models);

let redisPort;
let redis;
async function startRedis() {
  redis = spawnLogged(REDIS, ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "",
    "--appendonly", "no", "--daemonize", "no"]);
  await eventually(() => redis.out.includes("Ready to accept connections"), "redis-server");
}

let simPort, capPort, rlPort, failPort, cacheAPort, cacheBPort;
const gateways = [];

// `redis`: the shared_state keys that say how to reach Redis.
function config(apiPort, onFailure, redis) {
  return `
server:
  listeners: [{address: 127.0.0.1, port: ${apiPort}}]
  workers: 2
shared_state: {${redis}, key_prefix: e2e, on_failure: ${onFailure}, timeout: ${TIMEOUT_MS}ms, connect_timeout: 300ms}
timeouts: {connect: 30s}
routing:
  exploration: 0
  defaults: {policy: ordered}
  ejection: {consecutive_failures: 2, base_duration: 30s, jitter: 0, probe_interval: 0s}
providers:
  - {name: sim, base_url: "http://127.0.0.1:${simPort}/v1"}
  - {name: capsim, base_url: "http://127.0.0.1:${capPort}/v1"}
  - {name: rlsim, base_url: "http://127.0.0.1:${rlPort}/v1"}
  - {name: failsim, base_url: "http://127.0.0.1:${failPort}/v1"}
  - {name: cacheA, base_url: "http://127.0.0.1:${cacheAPort}/v1"}
  - {name: cacheB, base_url: "http://127.0.0.1:${cacheBPort}/v1"}
models:
  - {name: quick, deployments: [{provider: sim, model: quick}]}
  - {name: priced, deployments: [{provider: sim, model: quick, price: {input_per_1m: 0, output_per_1m: 1000000}}]}
  - name: flaky
    deployments: [{provider: failsim, model: boom}, {provider: sim, model: quick}]
  - name: conversation
    routing: {policy: latency}
    deployments: [{provider: cacheA, model: chat}, {provider: cacheB, model: chat}]
  - {name: capped, deployments: [{provider: capsim, model: slow, max_concurrent: 4, max_queue: 64}]}
  - name: limited
    deployments: [{provider: rlsim, model: busy}, {provider: sim, model: quick}]
auth:
  keys:
    - {name: team, sha256: ${sha(TEAM_KEY)}, requests_per_minute: 60}
    - {name: open, sha256: ${sha(OPEN_KEY)}, explain: true}
    - {name: tokens, sha256: ${sha(TOKENS_KEY)}, tokens_per_minute: ${TOKENS_PER_MINUTE}}
    - {name: budget, sha256: ${sha(BUDGET_KEY)}, budget: {usd_per_day: ${USD_PER_DAY}}}
    - {name: outage, sha256: ${sha(OUTAGE_KEY)}, budget: {usd_per_day: ${USD_PER_DAY}}}
`;
}

async function startGateway(name, onFailure = "open",
  { redis = `url: "redis://127.0.0.1:${redisPort}"`, env = {}, connected = true } = {}) {
  const api = await freePort();
  const cfg = join(dir, `${name}.yaml`);
  writeFileSync(cfg, config(api, onFailure, redis));
  const portFile = join(dir, `${name}.port`);
  const child = spawnLogged(join(BIN, "llmgate"), ["--config", cfg, "--port-file", portFile], env);
  await eventually(() => existsSync(portFile), name);
  const g = { name, child, url: `http://127.0.0.1:${api}` };
  if (connected) {
    await eventually(async () => (await metric(g, "llmgate_shared_state_up")) === 1, `${name} connected to redis`);
  }
  return g;
}

async function chat(g, key, model, { stream = false } = {}) {
  const started = Date.now();
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model, stream, messages: [{ role: "user", content: "hi" }] }),
  });
  const text = await res.text();
  return { status: res.status, text, headers: res.headers, ms: Date.now() - started };
}

async function metricsText(g) {
  return (await fetch(`${g.url}/metrics`)).text();
}
// The sum of a metric's series whose labels include every `match` pair.
async function metric(g, name, match = {}) {
  const text = await metricsText(g);
  let sum = null;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = line.match(/^([a-z_]+)(\{[^}]*\})? (\S+)$/);
    if (!m || m[1] !== name) continue;
    const labels = m[2] || "";
    if (Object.entries(match).every(([k, v]) => labels.includes(`${k}="${v}"`))) sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}

async function simStats(port) {
  return (await fetch(`http://127.0.0.1:${port}/admin/stats`)).json();
}

before(async () => {
  redisPort = await freePort();
  await startRedis();
  simPort = await startSim("sim", { quick: { ttft_ms: 1, tps: 5000, output_tokens: 3 } });
  capPort = await startSim("capsim", { slow: { ttft_ms: 10, tps: 50, output_tokens: 20 } });
  rlPort = await startSim("rlsim", { busy: { error_rate: 1, error_status: 429, retry_after_s: 30 } });
  failPort = await startSim("failsim", { boom: { error_rate: 1, error_status: 500 } });
  // Two deployments that cache prompt prefixes (as providers do); cacheA's
  // first tokens come 40 ms sooner.
  const caching = { tps: 5000, output_tokens: 3, prefill_ms_per_1k_tokens: 40, prefix_cache: true };
  cacheAPort = await startSim("cacheA", { chat: { ...caching, ttft_ms: 20 } });
  cacheBPort = await startSim("cacheB", { chat: { ...caching, ttft_ms: 60 } });
  for (const name of ["a", "b", "c"]) gateways.push(await startGateway(name));
});

after(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

test("a key's 60 requests/minute hold across three replicas, not 60 each", async () => {
  const results = [];
  // 150 requests, 10 at a time, round-robin over the replicas: well within a
  // few seconds, so the bucket refills by a few tokens at most.
  let next = 0;
  const worker = async () => {
    while (next < 150) {
      const i = next++;
      results.push(await chat(gateways[i % 3], TEAM_KEY, "quick"));
    }
  };
  await Promise.all(Array.from({ length: 10 }, worker));
  const ok = results.filter((r) => r.status === 200).length;
  const limited = results.filter((r) => r.status === 429);
  assert.equal(ok + limited.length, 150, "every answer is a 200 or a 429");
  // The documented bound: the burst (60) + what refills meanwhile + at most
  // one lease per replica (1 token at 1/s and lease_window 100ms).
  assert.ok(ok >= 57 && ok <= 72, `expected about 60 successes in total, got ${ok}`);
  const body = JSON.parse(limited[0].text);
  assert.equal(body.error.code, "rate_limit_exceeded");
  assert.ok(Number(limited[0].headers.get("retry-after")) >= 1);
  // Every replica took part in both outcomes.
  for (let g = 0; g < 3; ++g) {
    const mine = results.filter((_, i) => i % 3 === g);
    assert.ok(mine.some((r) => r.status === 200), `replica ${g} served some`);
  }
});

test("max_concurrent: 4 holds across three replicas", async () => {
  const started = await simStats(capPort);
  assert.equal(started.max_in_flight, 0);
  const all = [];
  for (let i = 0; i < 24; ++i) all.push(chat(gateways[i % 3], OPEN_KEY, "capped", { stream: true }));
  const results = await Promise.all(all);
  for (const r of results) {
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.ok(r.text.includes("data: [DONE]"), "every stream ran to its end");
  }
  const s = await simStats(capPort);
  assert.equal(s.requests, 24);
  assert.ok(s.max_in_flight <= 4, `at most 4 streams open at the upstream, saw ${s.max_in_flight}`);
  assert.equal(s.max_in_flight, 4, "and the limit was used");
  // Every slot was given back.
  await eventually(async () => {
    let held = 0;
    for (const g of gateways) held += await metric(g, "llmgate_shared_state_operations_total", { op: "slot_release", result: "ok" });
    return held === 24;
  }, "24 slot releases");
});

test("one replica's 429 + Retry-After cools the deployment on every replica", async () => {
  const [a, b, c] = gateways;
  const r = await chat(a, OPEN_KEY, "limited");
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get("x-llmgate-deployment"), "sim/quick", "failed over from the 429");
  assert.equal((await simStats(rlPort)).requests, 1);
  for (const g of [b, c]) {
    await eventually(async () => (await metric(g, "llmgate_shared_state_events_applied_total")) >= 1, `${g.name} heard the cooldown`);
  }
  for (const g of [b, c, b, c]) {
    const x = await chat(g, OPEN_KEY, "limited");
    assert.equal(x.status, 200);
    assert.equal(x.headers.get("x-llmgate-deployment"), "sim/quick");
    assert.equal(x.headers.get("x-llmgate-attempts"), "1", "the cooled deployment was not tried");
  }
  assert.equal((await simStats(rlPort)).requests, 1, "no other replica tried the 429ing deployment");
});

// Requests one at a time, round-robin over the replicas, until `n`.
test("a conversation begun on one replica continues on another where its prefix is cached", async () => {
  const [a, b] = gateways;
  const ask = async (g, messages, order) => {
    const res = await fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json", authorization: `Bearer ${OPEN_KEY}`,
        ...(order ? { "x-llmgate-order": order } : {}),
      },
      body: JSON.stringify({ model: "conversation", messages }),
    });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    return { headers: res.headers, body };
  };
  // A system prompt of ~2k tokens (~80 ms of prefill), then `turns` exchanges.
  const conversation = (system, turns) => {
    const m = [{ role: "system", content: system }];
    for (let i = 0; i < turns; ++i) {
      m.push({ role: "user", content: `question ${i}` }, { role: "assistant", content: `answer ${i}` });
    }
    return [...m, { role: "user", content: "and now?" }];
  };
  // Replica b measures both deployments, and learns that cacheB reports
  // cached tokens (a conversation of its own, both turns sent there).
  for (const to of ["cacheA", "cacheA", "cacheA", "cacheB"]) {
    await ask(b, [{ role: "user", content: "hi" }], to);
  }
  await ask(b, conversation("w".repeat(8000), 0), "cacheB");
  await ask(b, conversation("w".repeat(8000), 1), "cacheB");
  // A conversation begun on replica a, at cacheB (route.order)...
  const written = async () => (await metric(a, "llmgate_shared_state_operations_total",
    { op: "affinity_write", result: "ok" })) ?? 0;
  const before = await written();
  const system = "s".repeat(8000);
  await ask(a, conversation(system, 0), "cacheB");
  await eventually(async () => (await written()) > before, "replica a told the fleet");
  // ...continues on replica b, which has never seen it: it asks the fleet,
  // and routes to cacheB -- though cacheA is 40 ms faster -- where the
  // prefix (~80 ms of prefill) is read from the cache.
  const reads = async () => (await metric(b, "llmgate_shared_state_operations_total",
    { op: "affinity_read", result: "ok" })) ?? 0;
  const readsBefore = await reads();
  const next = await ask(b, conversation(system, 1));
  assert.equal(next.headers.get("x-llmgate-deployment"), "cacheB/chat", next.headers.get("x-llmgate-route"));
  assert.match(next.headers.get("x-llmgate-route"), /affinity hit/);
  assert.ok(next.body.usage.prompt_tokens_details.cached_tokens >= 1900, JSON.stringify(next.body.usage));
  assert.ok((await reads()) > readsBefore);
  // A conversation nobody served goes by latency alone: to cacheA.
  const fresh = await ask(b, conversation("f".repeat(8000), 1));
  assert.equal(fresh.headers.get("x-llmgate-deployment"), "cacheA/chat", fresh.headers.get("x-llmgate-route"));
  assert.doesNotMatch(fresh.headers.get("x-llmgate-route"), /affinity/);
});

async function roundRobin(key, model, n) {
  const results = [];
  for (let i = 0; i < n; ++i) results.push(await chat(gateways[i % 3], key, model));
  return results;
}

test("a key's tokens per minute hold across three replicas", async () => {
  const results = await roundRobin(TOKENS_KEY, "quick", 60);
  const ok = results.filter((r) => r.status === 200);
  assert.ok(ok.length > 0);
  const used = JSON.parse(ok[0].text).usage.total_tokens;
  // One process lets requests in while its bucket is above zero: a minute's
  // tokens / tokens per answer, rounded up. Three replicas each on their own
  // would allow three times that; shared, a replica may decide on a view at
  // most lease_window old, so a few more may pass.
  const alone = Math.ceil(TOKENS_PER_MINUTE / used);
  assert.ok(alone * 3 < 60, `the test needs room to tell (${used} tokens per answer)`);
  assert.ok(ok.length >= alone && ok.length <= alone + 3,
    `expected about ${alone} successes across three replicas, got ${ok.length}`);
  const limited = results.find((r) => r.status === 429);
  const err = JSON.parse(limited.text).error;
  assert.equal(err.code, "rate_limit_exceeded");
  assert.equal(err.type, "tokens");
});

test("a key's daily budget holds across three replicas", async () => {
  const results = await roundRobin(BUDGET_KEY, "priced", 30);
  const ok = results.filter((r) => r.status === 200).length;
  assert.ok(ok >= 10 && ok <= 13, `$30 a day at $3 an answer: about 10 across three replicas, got ${ok}`);
  const refusals = results.filter((r) => r.status === 429);
  assert.equal(ok + refusals.length, 30);
  const err = JSON.parse(refusals[0].text).error;
  assert.equal(err.code, "insufficient_quota");
  assert.equal(err.type, "insufficient_quota");
  assert.ok(Number(refusals[0].headers.get("retry-after")) >= 1, "retry when the UTC day ends");
  // Every replica now refuses it (each one's view is refreshed within a second).
  for (const g of gateways) {
    await eventually(async () => (await chat(g, BUDGET_KEY, "priced")).status === 429, `${g.name} refuses the spent key`);
  }
  for (const g of gateways) {
    assert.ok((await metric(g, "llmgate_auth_rejections_total", { reason: "budget_exhausted" })) >= 1);
  }
});

test("one replica's ejection of a failing deployment keeps the others off it; a late replica learns it", async () => {
  const [a, b, c] = gateways;
  for (let i = 0; i < 2; ++i) {
    const r = await chat(a, OPEN_KEY, "flaky");
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get("x-llmgate-deployment"), "sim/quick", "failed over from the 500");
  }
  assert.equal((await simStats(failPort)).requests, 2, "two failures in a row: ejected");
  for (const g of [b, c]) {
    await eventually(async () => {
      const routes = await (await fetch(`${g.url}/admin/routes`)).json();
      return JSON.stringify(routes).includes("by another replica");
    }, `${g.name} applied the ejection`);
  }
  for (const g of [b, c, b, c]) {
    const x = await chat(g, OPEN_KEY, "flaky");
    assert.equal(x.status, 200);
    assert.equal(x.headers.get("x-llmgate-attempts"), "1", "the ejected deployment was not tried");
  }
  // A replica that starts now reads the running ejection (and cooldown) on connect.
  const late = await startGateway("late");
  await eventually(async () => (await metric(late, "llmgate_shared_state_events_applied_total")) >= 1, "late heard it");
  for (const model of ["flaky", "limited"]) {
    const x = await chat(late, OPEN_KEY, model);
    assert.equal(x.status, 200);
    assert.equal(x.headers.get("x-llmgate-attempts"), "1", `${model}: the benched deployment was not tried`);
  }
  assert.equal((await simStats(failPort)).requests, 2, "no replica tried the ejected deployment again");
  assert.equal((await simStats(rlPort)).requests, 1, "nor the cooling one");
  late.child.kill("SIGTERM");
  await late.child.exited;
});

test("Redis paused (SIGSTOP): requests wait at most about the timeout; a stream in flight does not stall", async () => {
  const g = gateways[0];
  const stream = chat(g, OPEN_KEY, "capped", { stream: true });  // holds a shared slot
  await eventually(async () => (await simStats(capPort)).in_flight === 1, "the stream is upstream");
  process.kill(redis.pid, "SIGSTOP");
  try {
    const timed = [];
    for (let i = 0; i < 6; ++i) timed.push(await chat(gateways[i % 3], TEAM_KEY, "quick"));
    for (const t of timed) {
      assert.ok(t.status === 200 || t.status === 429, `served on local limits (${t.status}: ${t.text.slice(0, 200)})`);
      // One timeout at most, plus a generous allowance for a loaded CI machine.
      assert.ok(t.ms < TIMEOUT_MS + 1500, `request took ${t.ms} ms with Redis paused`);
    }
    const s = await stream;
    assert.equal(s.status, 200);
    assert.ok(s.text.includes("data: [DONE]"), "the stream in flight finished");
    let fallbacks = 0;
    for (const x of gateways) fallbacks += await metric(x, "llmgate_shared_state_fallbacks_total", { mode: "open" });
    assert.ok(fallbacks >= 1, "fail-open decisions are counted");
  } finally {
    process.kill(redis.pid, "SIGCONT");
  }
  for (const x of gateways) await eventually(async () => (await metric(x, "llmgate_shared_state_up")) === 1, `${x.name} reconnected`);
});

test("Redis killed: fail-open serves on local limits, fail-closed refuses cleanly; restarted, limits recover", async () => {
  const closed = await startGateway("closed", "closed");
  // $27 of the outage key's $30 spent across the three before Redis goes:
  // each replica's last view of the fleet's spend is $21, $24 or $27.
  const before = (await roundRobin(OUTAGE_KEY, "priced", 9)).filter((r) => r.status === 200).length;
  assert.equal(before, 9);
  redis.kill("SIGKILL");
  await redis.exited;
  for (const g of [...gateways, closed]) {
    await eventually(async () => (await metric(g, "llmgate_shared_state_up")) === 0, `${g.name} saw Redis go`);
  }
  // Open: the key's own per-replica bucket decides (this replica's first
  // requests under it, so they pass).
  for (let i = 0; i < 3; ++i) {
    const r = await chat(gateways[i], TEAM_KEY, "quick");
    assert.equal(r.status, 200, r.text);
  }
  // Closed: what needs the shared state gets an OpenAI-shaped 503; what does
  // not (a key without a rate) is served.
  const refused = await chat(closed, TEAM_KEY, "quick");
  assert.equal(refused.status, 503);
  const err = JSON.parse(refused.text).error;
  assert.equal(err.code, "shared_state_unavailable");
  assert.equal(typeof err.message, "string");
  assert.equal((await chat(closed, OPEN_KEY, "quick")).status, 200);
  const cappedClosed = await chat(closed, OPEN_KEY, "capped");
  assert.equal(cappedClosed.status, 503, "a shared max_concurrent cannot be honoured: refused");
  assert.equal(JSON.parse(cappedClosed.text).error.code, "shared_state_unavailable");
  // The budget through the outage (open): each replica decides on the fleet's
  // spend it last knew plus its own since, so together they admit what is
  // left of the budget in each one's view -- $9 + $6 + $3, 6 answers -- not
  // each replica its own $30 (21 more answers, 3x the budget). The
  // documented bound: N x (budget - the lowest total known) = 9 answers.
  const during = (await roundRobin(OUTAGE_KEY, "priced", 30)).filter((r) => r.status === 200).length;
  console.log(`# the outage key through the outage: ${during} answers ($${3 * during})`);
  assert.ok(during >= 1 && during <= 9, `expected at most 9 answers through the outage, got ${during}`);
  // Closed: a budget is a hard cap -- none through the outage.
  for (let i = 0; i < 3; ++i) {
    const capped = await chat(closed, OUTAGE_KEY, "priced");
    assert.equal(capped.status, 503, capped.text);
    assert.equal(JSON.parse(capped.text).error.code, "shared_state_unavailable");
  }

  // Restarted (empty: no persistence): every replica reconnects and the
  // shared limit holds again.
  await startRedis();
  for (const g of [...gateways, closed]) {
    await eventually(async () => (await metric(g, "llmgate_shared_state_up")) === 1, `${g.name} reconnected`, 20000);
  }
  let ok = 0;
  const all = [...gateways, closed];
  for (let i = 0; i < 100; ++i) if ((await chat(all[i % 4], TEAM_KEY, "quick")).status === 200) ++ok;
  assert.ok(ok >= 57 && ok <= 75, `about 60 again across four replicas after the restart, got ${ok}`);
});

test("rediss:// with an ACL user: TLS verified against the server name, AUTH as the user", async () => {
  const key = join(dir, "redis.key");
  const cert = join(dir, "redis.crt");
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
  { stdio: "ignore" });
  const tlsPort = await freePort();
  // Only TLS, and only the ACL user llmgate (the default user is off).
  const tlsRedis = spawnLogged(REDIS, ["--port", "0", "--tls-port", String(tlsPort), "--bind", "127.0.0.1",
    "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
    "--save", "", "--appendonly", "no", "--user", "default", "off",
    "--user", "llmgate", "on", ">gate-pw", "~*", "&*", "+@all"]);
  await eventually(() => tlsRedis.out.includes("Ready to accept connections"), "redis-server with TLS");
  const tls = (extra = "") =>
    `url: "rediss://localhost:${tlsPort}", username: llmgate, password_env: REDIS_PW, tls: {ca_file: "${cert}"${extra}}`;

  const g = await startGateway("tls", "closed", { redis: tls(), env: { REDIS_PW: "gate-pw" } });
  const r = await chat(g, TEAM_KEY, "quick");
  assert.equal(r.status, 200, r.text);
  assert.ok((await metric(g, "llmgate_shared_state_operations_total", { op: "rate_lease", result: "ok" })) >= 1,
    "the key's rate went through the TLS Redis");

  const wrongName = await startGateway("tls-wrong-name", "open",
    { redis: tls(", sni: wrong.example"), env: { REDIS_PW: "gate-pw" }, connected: false });
  await eventually(() => wrongName.child.out.includes("certificate verify failed"), "a certificate for another name refused");
  const wrongPassword = await startGateway("tls-wrong-password", "open",
    { redis: tls(), env: { REDIS_PW: "not-the-password" }, connected: false });
  await eventually(() => wrongPassword.child.out.includes("handshake refused"), "a wrong password refused");
  for (const x of [wrongName, wrongPassword]) assert.equal(await metric(x, "llmgate_shared_state_up"), 0);
  tlsRedis.kill("SIGKILL");
});
