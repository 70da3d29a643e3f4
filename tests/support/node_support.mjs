// Helpers shared by the node test files (tests/e2e, tests/deploy). No npm
// dependencies, so any of them can import it by relative path.
import { execFileSync } from "node:child_process";
import { createServer } from "node:net";

// The absolute path of a program on PATH, or null.
export function which(program) {
  try {
    return execFileSync("sh", ["-c", `command -v ${program}`]).toString().trim() || null;
  } catch {
    return null;
  }
}

// A TCP port free on 127.0.0.1 at the time of asking.
export function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Polls `check` every `intervalMs` until it returns a truthy value (which is
// returned) or `ms` pass; then throws, naming `what` and the last result.
// For waiting on another process's state, never for timing assertions.
export async function eventually(check, what, ms = 20000, intervalMs = 50) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
}
