// Shared by the e2e tests: start a built llmgate binary and wait for the
// port file it writes once it listens.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

// Starts BIN/cmd with args, adds the child to `children` (to be killed by
// the test's after()), and resolves to the port written to portFile; rejects
// with the child's stderr if it exits or has not started within 15 s.
export function startBinary(children, bin, cmd, args, portFile) {
  const child = spawn(join(bin, cmd), args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-8000)));
  children.push(child);
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 15000;
    const poll = () => {
      if (existsSync(portFile)) return resolve(Number(readFileSync(portFile, "utf8").trim()));
      if (child.exitCode !== null) return reject(new Error(`${cmd} exited: ${stderr}`));
      if (Date.now() > deadline) return reject(new Error(`${cmd} did not start: ${stderr}`));
      setTimeout(poll, 20);
    };
    poll();
  });
}

// Starts `cmd` with its output kept (the last 20 kB in child.out, for
// failure messages and log checks) and child.exited resolving when it ends;
// adds it to `children`.
export function spawnLogged(children, cmd, args, env = {}) {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  child.out = "";
  child.stdout.on("data", (d) => (child.out = (child.out + d).slice(-20000)));
  child.stderr.on("data", (d) => (child.out = (child.out + d).slice(-20000)));
  child.exited = new Promise((resolve) => child.on("exit", () => resolve()));
  children.push(child);
  return child;
}

// An llmgate-sim serving `models` ({name: profile}), its port file in `dir`;
// resolves to its port.
export async function startSim(children, bin, dir, name, models) {
  const portFile = join(dir, `${name}.port`);
  const args = ["--listen", "127.0.0.1:0", "--port-file", portFile];
  for (const [m, p] of Object.entries(models)) args.push("--model", `${m}=${JSON.stringify(p)}`);
  const child = spawnLogged(children, join(bin, "llmgate-sim"), args);
  const deadline = Date.now() + 15000;
  while (!(existsSync(portFile) && readFileSync(portFile, "utf8").trim())) {
    if (child.exitCode !== null) throw new Error(`llmgate-sim ${name} exited: ${child.out}`);
    if (Date.now() > deadline) throw new Error(`llmgate-sim ${name} did not start: ${child.out}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Number(readFileSync(portFile, "utf8").trim());
}

// The last model request an llmgate-sim at `simURL` received: its target,
// headers and body (parsed).
export async function lastSimRequest(simURL) {
  const r = await fetch(`${simURL}/admin/last-request`);
  if (r.status !== 200) throw new Error(`${simURL}/admin/last-request: ${r.status}`);
  const last = await r.json();
  return { ...last, body: JSON.parse(last.body) };
}
