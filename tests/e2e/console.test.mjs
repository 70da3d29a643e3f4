// The live routing console in a real browser (Debian's chromium, headless,
// driven by playwright-core):
//   - against the running demo (tools/demo.sh, its simulated providers and
//     background traffic): the page printed by the demo loads, goes live,
//     shows fast-chat's three deployments with measured numbers, ranks,
//     an explanation of the order and charts that grow; the other models'
//     tabs switch the table; a screenshot is saved (the README's picture:
//     LLMGATE_SCREENSHOT, else a temporary file);
//   - with an admin key configured: without credentials the page is 401
//     and asks for Basic credentials; with the key as the Basic password
//     the page and its data load (the browser sends it on to the JSON).
// Run by run.sh (through ctest). The demo takes free ports (--port 0): one
// the user runs meanwhile on 8080 is left alone.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { spawnLogged as spawnLoggedIn, startSim as startSimIn } from "./procs.mjs";
import { eventually, freePort, which } from "../support/node_support.mjs";

const BIN = process.env.LLMGATE_BIN_DIR;
assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const CHROMIUM = process.env.CHROMIUM || which("chromium");
const dir = mkdtempSync(join(tmpdir(), "llmgate-console-"));
const SCREENSHOT = process.env.LLMGATE_SCREENSHOT || join(dir, "console.png");
const children = [];
let browser;
let demo;

before(async () => {
  assert.ok(CHROMIUM, "chromium is not installed (tools/setup.sh installs Debian's)");
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});

after(async () => {
  if (browser) await browser.close();
  if (demo && demo.exitCode === null) {
    process.kill(-demo.pid, "SIGTERM");  // the demo and everything it started
    await Promise.race([demo.exited, new Promise((r) => setTimeout(r, 5000))]);
  }
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

// tools/demo.sh as a user runs it (no setup: the build is there), in its own
// process group; resolves to the console URL it prints.
async function startDemo() {
  demo = spawn(join(ROOT, "tools/demo.sh"), ["--port", "0"], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LLMGATE_DEMO_NO_SETUP: "1", BUILD_DIR: dirname(resolve(BIN)) },
  });
  demo.out = "";
  demo.stdout.on("data", (d) => (demo.out = (demo.out + d).slice(-40000)));
  demo.stderr.on("data", (d) => (demo.out = (demo.out + d).slice(-40000)));
  demo.exited = new Promise((r) => demo.on("exit", r));
  return eventually(() => {
    if (demo.exitCode !== null) throw new Error("the demo exited: " + demo.out.slice(-3000));
    const m = demo.out.match(/Live routing console[^\n]*\n[^\n]*\n\s*(http:\/\/\S+\/admin\/console)/);
    return m && m[1];
  }, "the demo to print the console URL", 120000, 200);
}

const cellText = (row, cls) => row.locator(`td.${cls}`).innerText();

test("the console shows the demo's live routing", { timeout: 170000 }, async () => {
  const url = await startDemo();
  const page = await browser.newPage({ viewport: { width: 1400, height: 1500 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const res = await page.goto(url);
  assert.equal(res.status(), 200);
  assert.match(res.headers()["content-security-policy"], /default-src 'none'/);

  // Live data: the status says so, and fast-chat (the first tab) lists its
  // three deployments with measured TTFT (not "~" priors) and speeds.
  await page.locator("#status.live").waitFor({ timeout: 30000 });
  assert.equal(await page.locator("#title").innerText(), "fast-chat");
  await eventually(async () => {
    const rows = page.locator("#leaderboard tbody tr.dep");
    if ((await rows.count()) !== 3) return false;
    for (let i = 0; i < 3; i++) {
      const p50 = await cellText(rows.nth(i), "ttft-p50");
      const tps = await cellText(rows.nth(i), "tps");
      if (!/^\d+ ms$|^\d+\.\d\d s$/.test(p50.trim()) || !/^\d+\.\d$/.test(tps.trim())) return false;
    }
    return true;
  }, "three deployments with measured TTFT and speed", 60000, 250);
  const rows = page.locator("#leaderboard tbody tr.dep");
  const deployments = await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.deployment));
  assert.deepEqual(
    [...deployments].sort(),
    ["euro-sim/llama-3.3-70b-instruct", "groq-sim/llama-3.3-70b-versatile",
     "together-sim/meta-llama/Llama-3.3-70B-Instruct-Turbo"]);
  // Ranked 1, 2, ... from the top, each with the policy's score; one the
  // router would not plan now (groq-sim answers 5% with 429 and may be
  // cooling down) comes last and says why.
  const ranks = await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector("td.rank").textContent));
  const ranked = ranks.filter((r) => r !== "–").length;
  assert.ok(ranked >= 2, `ranks ${ranks}`);
  assert.deepEqual(ranks, ["1", "2", "3"].slice(0, ranked).concat(Array(3 - ranked).fill("–")));
  for (let i = 0; i < 3; i++) {
    assert.match(await cellText(rows.nth(i), "why"), i < ranked ? /score \d+ms = est \d+ms/ : /^not planned: \S/);
  }
  assert.match(await page.locator("#why-body").innerText(), /latency policy puts first[\s\S]*#1 \S+/);

  // TTFT against prompt size: a row per deployment, its expected first
  // token growing with the prompt by its prefill slope.
  const prompt = await page.locator("#prompt-size tbody tr").evaluateAll((trs) => trs.map((tr) =>
    [tr.dataset.deployment, ...[...tr.querySelectorAll("td")].slice(1, 6).map((td) => td.textContent)]));
  assert.deepEqual(prompt.map((r) => r[0]).sort(), [...deployments].sort());
  const msOf = (t) => (t.endsWith(" s") ? 1000 * parseFloat(t) : parseFloat(t));
  for (const [dep, at1k, at10k, at50k, , slope] of prompt) {
    assert.match(at1k, /^\d+ ms$|^\d+\.\d\d s$/, dep);
    assert.ok(msOf(at50k) > msOf(at10k) && msOf(at10k) > msOf(at1k), `${dep}: ${at1k} ${at10k} ${at50k}`);
    assert.match(slope, /^\d+\.\d \(\d+\)$/, dep);  // fitted (prior)
  }

  // The charts draw a line per deployment, and grow with new samples.
  const points = () => page.locator("#chart-ttft polyline").evaluateAll(
    (ls) => ls.map((l) => l.getAttribute("points").split(" ").length));
  await eventually(async () => (await points()).length === 3, "three TTFT lines", 30000, 250);
  const before = Math.max(...(await points()));
  await eventually(async () => Math.max(...(await points())) > before, "the chart to grow", 30000, 250);

  // Another model's tab shows its own deployments.
  await page.locator('nav button[data-model="mixed-chat"]').click();
  assert.equal(await page.locator("#title").innerText(), "mixed-chat");
  const mixed = await page.locator("#leaderboard tbody tr.dep").evaluateAll(
    (trs) => trs.map((tr) => tr.dataset.deployment.split("/")[0]).sort());
  assert.deepEqual(mixed, ["anthropic-sim", "gemini-sim", "groq-sim"]);
  // The chosen tab is in the URL: a link to it opens it.
  assert.match(page.url(), /#model=mixed-chat$/);
  const linked = await browser.newPage();
  await linked.goto(page.url());
  await eventually(async () => (await linked.locator("#title").innerText()) === "mixed-chat",
    "a #model= link to open that model's tab", 30000, 250);
  await linked.close();

  // Back to fast-chat for the picture.
  await page.locator('nav button[data-model="fast-chat"]').click();
  await page.waitForTimeout(2500);  // one more poll: the picture shows the latest sample
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  console.log(`screenshot: ${SCREENSHOT}`);
  assert.deepEqual(errors, []);
  await page.close();
});

test("with an admin key, the console needs it (Basic, the key as password)", { timeout: 60000 },
  async () => {
    const sim = await startSimIn(children, BIN, dir, "sim", { m: { ttft_ms: 20, tps: 500, output_tokens: 5 } });
    const key = "console-admin-key";
    const api = await freePort();
    const cfg = join(dir, "keyed.yaml");
    writeFileSync(cfg, `
server:
  listeners: [{address: 127.0.0.1, port: ${api}}]
auth:
  admin_key_sha256: ${createHash("sha256").update(key).digest("hex")}
providers:
  - {name: sim, base_url: "http://127.0.0.1:${sim}/v1"}
models:
  - name: only
    deployments: [{provider: sim, model: m}]
`);
    const portFile = join(dir, "keyed.port");
    spawnLoggedIn(children, join(BIN, "llmgate"), ["--config", cfg, "--port-file", portFile]);
    await eventually(() => existsSync(portFile), "the gateway");
    const url = `http://127.0.0.1:${api}/admin/console`;

    const denied = await fetch(url);
    assert.equal(denied.status, 401);
    assert.match(denied.headers.get("www-authenticate"), /^Basic realm="llmgate admin"/);
    // A browser without the key is challenged (headless, it cannot answer).
    const anonymous = await browser.newContext();
    await assert.rejects((await anonymous.newPage()).goto(url), /ERR_INVALID_AUTH_CREDENTIALS/);
    await anonymous.close();

    const basic = (user, password) => "Basic " + Buffer.from(`${user}:${password}`).toString("base64");
    const wrong = await fetch(url, { headers: { authorization: basic("me", "nope") } });
    assert.equal(wrong.status, 401);
    const history = await fetch(url.replace("console", "history"), { headers: { authorization: basic("", key) } });
    assert.equal(history.status, 200);
    assert.ok(Array.isArray((await history.json()).samples));

    const admin = await browser.newContext({ httpCredentials: { username: "me", password: key } });
    const page = await admin.newPage();
    assert.equal((await page.goto(url)).status(), 200);
    await page.locator("#status.live").waitFor({ timeout: 20000 });
    assert.equal(await page.locator("#leaderboard tbody tr.dep").count(), 1);
    assert.equal(await page.locator("#auth.show").count(), 0);
    await admin.close();
  });
