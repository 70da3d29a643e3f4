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
