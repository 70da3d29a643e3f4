// Offline checks of the top-level Dockerfile (no Docker engine needed): it
// lints clean with dockerfile-utils, is multi-stage with named stages, builds
// on debian:12 with tools/setup.sh's build-only mode, and runs on
// debian:12-slim as a numeric non-root user with exactly the Debian packages
// that hold the shared libraries the built binaries load (`ldd` + `dpkg -S`).
// Every check is also run on a broken copy of the Dockerfile, to show it can
// fail. Run by run.sh (through ctest).
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DockerfileParser } from "dockerfile-ast";
import { validate, ValidationSeverity } from "dockerfile-utils";

const SRC = process.env.LLMGATE_SOURCE_DIR ?? resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = process.env.LLMGATE_BIN_DIR;
const DOCKERFILE = readFileSync(join(SRC, "Dockerfile"), "utf8");
const BINARIES = ["llmgate", "llmgate-sim"]; // both are copied into the image

// --------------------------------------------------------------- parsing

// The stages, each with its FROM and its instructions.
function stages(content) {
  const df = DockerfileParser.parse(content);
  const out = [];
  for (const ins of df.getInstructions()) {
    if (ins.getKeyword() === "FROM") {
      out.push({ from: ins, image: ins.getImageName(), tag: ins.getImageTag(), name: ins.getBuildStage(), ins: [] });
    } else {
      assert.ok(out.length > 0, `${ins.getKeyword()} before the first FROM`);
      out.at(-1).ins.push(ins);
    }
  }
  return out;
}
const of = (stage, keyword) => stage.ins.filter((i) => i.getKeyword() === keyword);
const flag = (ins, name) => (ins.getFlags?.() ?? []).find((f) => f.getName() === name)?.getValue();
const jsonForm = (ins) => JSON.parse(ins.getArgumentsContent());

// Shell commands of a RUN: the text split on && || ; | (no subshells here).
const commands = (run) => run.getArgumentsContent().split(/&&|\|\||;|\|/).map((c) => c.trim().split(/\s+/).filter(Boolean));

// Packages of every `apt-get install` in a stage.
function aptInstalls(stage) {
  const installs = [];
  for (const run of of(stage, "RUN")) {
    for (const words of commands(run)) {
      const w = words.filter((x) => !/^[A-Z_][A-Z0-9_]*=/.test(x)); // drop VAR=value prefixes
      if (w[0] !== "apt-get" || !w.includes("install")) continue;
      const args = w.slice(w.indexOf("install") + 1);
      installs.push({
        run,
        flags: args.filter((a) => a.startsWith("-")),
        packages: args.filter((a) => !a.startsWith("-")),
      });
    }
  }
  return installs;
}

// ---------------------------------------------------------------- checks

function checkLint(content) {
  // Every optional rule at ERROR, so nothing is only a silent warning.
  const E = ValidationSeverity.ERROR;
  const diagnostics = validate(content, {
    deprecatedMaintainer: E, directiveCasing: E, emptyContinuationLine: E, instructionCasing: E,
    instructionCmdMultiple: E, instructionEntrypointMultiple: E, instructionHealthcheckMultiple: E,
    instructionJSONInSingleQuotes: E, instructionWorkdirRelative: E,
  });
  assert.deepEqual(diagnostics.map((d) => `line ${d.range.start.line + 1}: ${d.message}`), [], "dockerfile-utils diagnostics");
}

function checkStages(content) {
  const st = stages(content);
  assert.ok(st.length >= 2, `multi-stage: ${st.length} stage(s)`);
  for (const s of st) assert.ok(s.name, `FROM ${s.image}:${s.tag} has no stage name (AS name)`);
  assert.equal(new Set(st.map((s) => s.name)).size, st.length, "stage names are unique");
  const build = st.find((s) => of(s, "RUN").some((r) => /tools\/setup\.sh/.test(r.getArgumentsContent())));
  assert.ok(build, "a stage runs tools/setup.sh");
  assert.equal(`${build.image}:${build.tag}`, "debian:12", `build stage ${build.name} must be FROM debian:12`);
  const setup = of(build, "RUN").map((r) => r.getArgumentsContent()).find((c) => /tools\/setup\.sh/.test(c));
  assert.match(setup, /LLMGATE_DEPS=build\s+(\S+=\S+\s+)*tools\/setup\.sh/, "tools/setup.sh runs with LLMGATE_DEPS=build");
  const runtime = st.at(-1);
  assert.notEqual(runtime, build, "the final stage is not the build stage");
  assert.equal(`${runtime.image}:${runtime.tag}`, "debian:12-slim", `the final stage must be FROM debian:12-slim`);
  // What it takes from the build, it takes by stage name.
  for (const c of of(runtime, "COPY")) {
    const from = flag(c, "from");
    if (from !== undefined) assert.ok(st.some((s) => s.name === from), `COPY --from=${from}: use a stage name`);
  }
  return { build, runtime };
}

function checkRuntime(content) {
  const { build, runtime } = checkStages(content);
  const users = of(runtime, "USER");
  assert.ok(users.length > 0, "the runtime stage sets USER");
  const user = users.at(-1).getArgumentsContent().trim();
  const m = /^(\d+)(?::(\d+))?$/.exec(user);
  assert.ok(m, `USER ${user} must be numeric (uid[:gid]), so Kubernetes can verify runAsNonRoot`);
  assert.ok(Number(m[1]) > 0 && (m[2] === undefined || Number(m[2]) > 0), `USER ${user} must not be root`);

  const installs = aptInstalls(runtime);
  assert.equal(installs.length, 1, "the runtime stage has one apt-get install");
  const [{ run, flags, packages }] = installs;
  assert.ok(flags.includes("--no-install-recommends"), "apt-get install --no-install-recommends");
  assert.ok(flags.includes("-y") || flags.includes("--yes"), "apt-get install -y");
  assert.match(run.getArgumentsContent(), /apt-get update/, "apt-get update in the same RUN as the install");
  assert.match(run.getArgumentsContent(), /rm -rf \/var\/lib\/apt\/lists\/\*/, "the apt lists are removed in the same RUN");
  const dev = packages.filter((p) => /-dev(:|$)/.test(p));
  assert.deepEqual(dev, [], "no -dev packages in the runtime stage");
  assert.ok(packages.includes("ca-certificates"), "ca-certificates (TLS to the providers)");

  const exposed = of(runtime, "EXPOSE").flatMap((e) => e.getArguments().map((a) => a.getValue().replace(/\/tcp$/, "")));
  for (const p of ["8080", "8081"]) assert.ok(exposed.includes(p), `EXPOSE ${p}`);

  const entry = of(runtime, "ENTRYPOINT").at(-1);
  assert.ok(entry, "ENTRYPOINT");
  assert.deepEqual(jsonForm(entry), ["/usr/local/bin/llmgate"], "ENTRYPOINT in JSON form, the gateway");
  assert.deepEqual(jsonForm(of(runtime, "CMD").at(-1)), ["--config", "/etc/llmgate/llmgate.yaml"], "CMD");
  assert.equal(of(runtime, "STOPSIGNAL").at(-1)?.getArgumentsContent().trim(), "SIGTERM", "STOPSIGNAL SIGTERM");

  // glibc's malloc tuning, one `ENV GLIBC_TUNABLES=...` line (bench/overhead
  // reads it to run llmgate as the image does): a tcache_count glibc accepts
  // (it ignores a value over 65535, silently).
  const tunables = of(runtime, "ENV").map((e) => /^GLIBC_TUNABLES=(\S+)$/.exec(e.getArgumentsContent().trim()))
    .filter(Boolean);
  assert.equal(tunables.length, 1, "one ENV GLIBC_TUNABLES=... line in the runtime stage");
  const count = /(?:^|:)glibc\.malloc\.tcache_count=(\d+)(?::|$)/.exec(tunables[0][1]);
  assert.ok(count && Number(count[1]) >= 7 && Number(count[1]) <= 65535,
    `GLIBC_TUNABLES ${tunables[0][1]}: glibc.malloc.tcache_count between 7 and 65535`);

  // Both binaries come from the build stage into /usr/local/bin.
  const copied = of(runtime, "COPY").filter((c) => flag(c, "from") === build.name)
    .flatMap((c) => {
      const a = c.getArguments().map((x) => x.getValue());
      const dest = a.at(-1);
      return a.slice(0, -1).map((s) => (dest.endsWith("/") ? dest + s.split("/").pop() : dest));
    });
  for (const b of BINARIES) assert.ok(copied.includes(`/usr/local/bin/${b}`), `COPY --from=${build.name} ... /usr/local/bin/${b}`);
  return { packages };
}

// ------------------------------------------------- shared libraries -> packages

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.error ? null : r;
}
const HAVE_TOOLS = run("ldd", ["--version"])?.status === 0 && run("dpkg-query", ["--version"])?.status === 0;

// ldd's resolved paths, e.g. /lib/x86_64-linux-gnu/libssl.so.3.
function sharedLibraries(binary) {
  const r = run("ldd", [binary]);
  assert.equal(r.status, 0, `ldd ${binary}: ${r.stderr}`);
  const missing = r.stdout.split("\n").filter((l) => /not found/.test(l));
  assert.deepEqual(missing, [], `ldd ${binary}: unresolved libraries`);
  return [...r.stdout.matchAll(/=>\s+(\/\S+)\s+\(/g)].map((m) => m[1]);
}

// The Debian packages owning libraries: one dpkg-query for all of them.
// Debian 12 is merged-/usr: ldd may print /lib/... while dpkg recorded
// /usr/lib/... (or the other way round), and sonames are symlinks, so each
// spelling is asked for.
function owningPackages(paths) {
  const spellings = new Map(); // library -> candidate paths
  for (const path of paths) {
    const real = run("readlink", ["-f", path])?.stdout.trim() || path;
    const tries = new Set();
    for (const p of [path, real]) {
      tries.add(p);
      tries.add(p.startsWith("/usr/") ? p.slice(4) : `/usr${p}`);
    }
    spellings.set(path, [...tries]);
  }
  // Exits 1 when some spelling is unowned; the owned ones are still printed.
  const r = run("dpkg-query", ["-S", ...new Set([...spellings.values()].flat())]);
  const owner = new Map(); // path -> package
  for (const line of r.stdout.split("\n")) {
    const m = /^([^:]+?)(?::[a-z0-9]+)?(?:, [^:]+)?: (\/.+)$/.exec(line);
    if (m && !line.startsWith("diversion")) owner.set(m[2], m[1].trim());
  }
  const result = new Map();
  for (const [path, tries] of spellings) {
    const pkg = tries.map((p) => owner.get(p)).find(Boolean);
    assert.ok(pkg, `no Debian package owns ${path} (tried ${tries.join(", ")})`);
    result.set(path, pkg);
  }
  return result;
}

// debian:12-slim always has apt, hence apt's own dependencies (libc6,
// libgcc-s1, libstdc++6, ...): those need not be installed again.
function basePackages() {
  const r = run("dpkg-query", ["-W", "-f=${Depends}", "apt"]);
  assert.equal(r.status, 0, "dpkg-query apt");
  const deps = r.stdout.split(",").map((d) => d.split("|")[0].trim().split(/[\s:(]/)[0]).filter(Boolean);
  return new Set(["apt", ...deps]);
}

let required = null;
function requiredPackages() {
  if (required) return required;
  const loaded = BINARIES.flatMap((b) => sharedLibraries(join(BIN, b)).map((lib) => [b, lib]));
  const owners = owningPackages(loaded.map(([, lib]) => lib));
  required = new Map(); // package -> libraries
  for (const [b, lib] of loaded) {
    const p = owners.get(lib);
    required.set(p, [...(required.get(p) ?? []), `${b}: ${lib}`]);
  }
  return required;
}

function checkLibraries(content, required, base) {
  const { packages } = checkRuntime(content);
  const installed = new Set(packages.map((p) => p.split(":")[0].split("=")[0]));
  for (const [pkg, libs] of required) {
    if (base.has(pkg)) continue;
    assert.ok(installed.has(pkg), `the runtime stage must apt-get install ${pkg} (${libs.join(", ")})`);
  }
  // ...and nothing else but ca-certificates: a stale library is a smell.
  for (const p of installed) {
    assert.ok(p === "ca-certificates" || required.has(p), `runtime package ${p} holds no library the binaries load`);
  }
}

// ------------------------------------------------------------------ tests

test("dockerfile-utils reports no problem", () => checkLint(DOCKERFILE));

test("multi-stage: debian:12 builds with tools/setup.sh, debian:12-slim runs", () => {
  const { build, runtime } = checkStages(DOCKERFILE);
  assert.equal(build.name, "build");
  assert.equal(runtime.name, "runtime");
});

test("runtime stage: numeric non-root USER, minimal apt, EXPOSE 8080 8081, entrypoint", () => checkRuntime(DOCKERFILE));

test("tools/setup.sh has the build-only mode the image uses, without test packages", () => {
  const setup = readFileSync(join(SRC, "tools", "setup.sh"), "utf8");
  const build = /BUILD_PACKAGES=\(([^)]*)\)/.exec(setup);
  assert.ok(build, "tools/setup.sh defines BUILD_PACKAGES");
  const pkgs = build[1].replace(/#.*$/gm, "").split(/\s+/).filter(Boolean);
  for (const p of ["cmake", "ninja-build", "g++", "libssl-dev", "prometheus-cpp-dev", "libyaml-cpp-dev"]) {
    assert.ok(pkgs.includes(p), `BUILD_PACKAGES has ${p}`);
  }
  for (const p of ["nodejs", "npm", "prometheus", "curl", "libgtest-dev"]) {
    assert.ok(!pkgs.includes(p), `BUILD_PACKAGES must not have the test package ${p}`);
  }
  assert.match(setup, /^\s*build\)\s*PACKAGES=\("\$\{BUILD_PACKAGES\[@\]\}"\);\s*BUILD_TESTS=OFF/m, "LLMGATE_DEPS=build selects them, tests off");
  // Run for real with an unknown mode: it must refuse before installing anything.
  const r = spawnSync("bash", [join(SRC, "tools", "setup.sh")], {
    env: { ...process.env, LLMGATE_DEPS: "bogus", LLMGATE_SKIP_BUILD: "1" }, encoding: "utf8",
  });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /LLMGATE_DEPS must be/);
});

test("the runtime apt packages are exactly what the built binaries load", (t) => {
  if (!HAVE_TOOLS) {
    t.skip("ldd or dpkg-query is missing: mapping libraries to Debian packages needs a Debian host");
    return;
  }
  assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
  for (const b of BINARIES) assert.ok(existsSync(join(BIN, b)), `${join(BIN, b)} is not built`);
  const required = requiredPackages();
  const base = basePackages();
  for (const [p, libs] of required) t.diagnostic(`${p}${base.has(p) ? " (in debian:12-slim)" : ""}: ${libs.join(", ")}`);
  for (const p of ["libc6", "libgcc-s1", "libstdc++6"]) assert.ok(base.has(p), `apt depends on ${p}`);
  checkLibraries(DOCKERFILE, required, base);
});

test(".dockerignore keeps builds, node_modules and .git out of the context", () => {
  const lines = readFileSync(join(SRC, ".dockerignore"), "utf8").split("\n").map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  for (const p of [".git", "build*", "**/node_modules"]) assert.ok(lines.includes(p), `.dockerignore has ${p}`);
});

describe("each check fails on a broken Dockerfile", () => {
  const broken = (from, to) => {
    assert.ok(DOCKERFILE.includes(from), `the Dockerfile no longer contains ${JSON.stringify(from)}`);
    return DOCKERFILE.replace(from, to);
  };
  const cases = [
    ["lint: lowercase instruction", checkLint, broken("STOPSIGNAL SIGTERM", "stopsignal SIGTERM"), /uppercase/],
    ["lint: bad EXPOSE protocol", checkLint, broken("EXPOSE 8080 8081", "EXPOSE 8080/tpc 8081"), /Invalid proto/],
    ["unnamed stage", checkStages, broken("FROM debian:12-slim AS runtime", "FROM debian:12-slim"), /no stage name/],
    ["build stage on another base", checkStages, broken("FROM debian:12 AS build", "FROM ubuntu:24.04 AS build"), /FROM debian:12/],
    ["runtime on the full image", checkStages, broken("FROM debian:12-slim AS runtime", "FROM debian:12 AS runtime"), /debian:12-slim/],
    ["setup.sh without LLMGATE_DEPS=build", checkStages, broken("LLMGATE_DEPS=build JOBS", "JOBS"), /LLMGATE_DEPS=build/],
    ["COPY --from by index", checkStages, broken("COPY --from=build", "COPY --from=0"), /use a stage name/],
    ["USER by name", checkRuntime, broken("USER 65532:65532", "USER nonroot"), /numeric/],
    ["USER root", checkRuntime, broken("USER 65532:65532", "USER 0"), /not be root/],
    ["no USER", checkRuntime, broken("USER 65532:65532\n", ""), /sets USER/],
    ["a -dev package", checkRuntime, broken("libssl3 \\", "libssl-dev \\"), /-dev/],
    ["recommends installed", checkRuntime, broken("--no-install-recommends", ""), /no-install-recommends/],
    ["apt lists kept", checkRuntime, broken(" \\\n && rm -rf /var/lib/apt/lists/*", ""), /apt lists/],
    ["EXPOSE without 8081", checkRuntime, broken("EXPOSE 8080 8081", "EXPOSE 8080"), /EXPOSE 8081/],
    ["shell-form ENTRYPOINT", checkRuntime, broken('ENTRYPOINT ["/usr/local/bin/llmgate"]', "ENTRYPOINT /usr/local/bin/llmgate"), /JSON|Unexpected/],
    ["no STOPSIGNAL", checkRuntime, broken("STOPSIGNAL SIGTERM\n", ""), /STOPSIGNAL/],
    ["no GLIBC_TUNABLES", checkRuntime, broken("ENV GLIBC_TUNABLES=glibc.malloc.tcache_count=64\n", ""), /GLIBC_TUNABLES/],
    ["tcache_count out of range", checkRuntime,
      broken("glibc.malloc.tcache_count=64", "glibc.malloc.tcache_count=100000"), /between 7 and 65535/],
    ["llmgate-sim not copied", checkRuntime, broken("/out/llmgate /out/llmgate-sim ", "/out/llmgate "), /llmgate-sim/],
  ];
  for (const [what, check, content, expected] of cases) {
    test(what, () => assert.throws(() => check(content), expected));
  }

  test("a library package missing, or one too many", (t) => {
    if (!HAVE_TOOLS) {
      t.skip("ldd or dpkg-query is missing");
      return;
    }
    const required = requiredPackages();
    const base = basePackages();
    assert.throws(() => checkLibraries(broken("      libyaml-cpp0.7 \\\n", ""), required, base), /install libyaml-cpp0\.7/);
    assert.throws(() => checkLibraries(broken("libssl3 \\", "libssl3 libcurl4 \\"), required, base), /libcurl4 holds no library/);
  });
});
