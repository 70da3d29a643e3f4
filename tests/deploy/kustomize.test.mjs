// Offline validation of deploy/kustomize: each overlay is rendered with the
// real `kubectl kustomize`, every object is checked against the Kubernetes and
// Prometheus Operator schemas (kubernetes-models), with unknown fields
// rejected, and then against what no schema knows: the sidecar's lifecycle,
// the config mount, probes vs. listeners, drain vs. grace period, selectors,
// and the embedded llmgate.yaml through `llmgate --check-config`.
// Every semantic check is also run on deliberately broken copies of the
// render, to show it can fail.
// Run by run.sh (through ctest). Skips, saying why, if kubectl is absent.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, basename, join, relative, resolve, posix } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { which } from "../support/node_support.mjs";

const SRC = process.env.LLMGATE_SOURCE_DIR ?? resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = process.env.LLMGATE_BIN_DIR;
const KUSTOMIZE = join(SRC, "deploy", "kustomize");
const OVERLAYS = ["sidecar", "standalone"];
const GATEWAY = "llmgate"; // the gateway container's name in every overlay
const GRACE_MARGIN_S = 5; // terminationGracePeriodSeconds >= drain.delay + drain.timeout + this

const KUBECTL = which("kubectl");
const SKIP = KUBECTL
  ? false
  : "kubectl is not installed: `kubectl kustomize` renders the overlays (install the kubectl package)";

// ---------------------------------------------------------------- rendering

const renders = new Map();
function renderDir(dir) {
  const out = execFileSync(KUBECTL, ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const objs = [];
  for (const doc of parseAllDocuments(out)) {
    assert.deepEqual(doc.errors, [], `YAML errors in the render of ${dir}`);
    const obj = doc.toJS();
    if (obj !== null) objs.push(obj);
  }
  return objs;
}
// A fresh deep copy each time: tests may mutate what they get.
function render(overlay) {
  if (!renders.has(overlay)) renders.set(overlay, renderDir(join(KUSTOMIZE, "overlays", overlay)));
  return structuredClone(renders.get(overlay));
}
// overlays/standalone plus a component, through a kustomization in a temp dir
// (kustomize accepts only relative paths to other kustomizations).
function renderWithComponent(overlay, component) {
  const dir = mkdtempSync(join(tmpdir(), "llmgate-kustomize-"));
  try {
    const rel = (p) => relative(dir, p).split("\\").join("/");
    writeFileSync(join(dir, "kustomization.yaml"),
      "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
      `resources:\n  - ${rel(join(KUSTOMIZE, "overlays", overlay))}\n` +
      `components:\n  - ${rel(join(KUSTOMIZE, "components", component))}\n`);
    return renderDir(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const find = (objs, kind, name) => objs.find((o) => o.kind === kind && o.metadata?.name === name);
const all = (objs, kind) => objs.filter((o) => o.kind === kind);
const id = (o) => `${o.kind}/${o.metadata?.name}`;

// ------------------------------------------------- schemas, unknown fields
//
// kubernetes-models' validate() runs ajv code compiled from the Kubernetes
// OpenAPI schemas, which do not set additionalProperties: false, so an unknown
// (e.g. misspelt) field passes. Unknown fields are found here by watching the
// validator: every object is wrapped in a Proxy that records which keys the
// compiled code reads. A schema property is always read (to check it); a key
// it never reads is not in the schema. Objects the validator enumerates
// (for...in / Object.keys) are maps (labels, data, resources.requests, ...)
// whose keys are all accepted; the test "only map fields are enumerated"
// keeps that exception honest.

async function modelFor(obj) {
  const [group, version] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : ["", obj.apiVersion];
  const mod = group === "monitoring.coreos.com"
    ? await import(`@kubernetes-models/prometheus-operator/${group}/${version}/${obj.kind}`)
    : await import(`kubernetes-models/${group ? `${group}/` : ""}${version}/${obj.kind}`);
  assert.ok(mod[obj.kind], `no model for ${obj.apiVersion} ${obj.kind}`);
  return mod[obj.kind];
}

function watched(value) {
  const records = [];
  const wrap = (v, path) => {
    if (v === null || typeof v !== "object") return v;
    const rec = { path, target: v, read: new Set(), enumerated: false };
    records.push(rec);
    const children = new Map();
    return new Proxy(v, {
      get(t, key, receiver) {
        const child = Reflect.get(t, key, receiver);
        if (typeof key !== "string" || !Object.hasOwn(t, key)) return child;
        rec.read.add(key);
        if (child === null || typeof child !== "object") return child;
        if (!children.has(key)) children.set(key, wrap(child, [...path, key]));
        return children.get(key);
      },
      has(t, key) {
        if (typeof key === "string") rec.read.add(key);
        return Reflect.has(t, key);
      },
      ownKeys(t) {
        rec.enumerated = true;
        return Reflect.ownKeys(t);
      },
    });
  };
  return { root: wrap(value, []), records };
}

const pointer = (path) => "/" + path.join("/");

// { schemaErrors: string|null, unknown: ["/spec/..."], maps: ["/metadata/labels", ...] }
async function strictValidate(obj) {
  const Model = await modelFor(obj);
  const { root, records } = watched(structuredClone(obj));
  let schemaErrors = null;
  try {
    Model.prototype.validate.call(root);
  } catch (e) {
    schemaErrors = e.message;
  }
  const unknown = [];
  const maps = [];
  for (const r of records) {
    if (Array.isArray(r.target)) continue;
    if (r.enumerated) {
      maps.push(pointer(r.path));
      continue;
    }
    for (const k of Object.keys(r.target)) if (!r.read.has(k)) unknown.push(pointer([...r.path, k]));
  }
  return { schemaErrors, unknown, maps };
}

async function assertValid(obj) {
  const { schemaErrors, unknown } = await strictValidate(obj);
  assert.equal(schemaErrors, null, `${id(obj)}: schema errors: ${schemaErrors}`);
  assert.deepEqual(unknown, [], `${id(obj)}: unknown fields`);
}

// Fields whose schema is a map (additionalProperties: <schema>): any key goes.
const MAP_FIELDS = new Set([
  "labels", "annotations", "matchLabels", "data", "binaryData", "stringData",
  "requests", "limits", "nodeSelector",
]);
// Maps whose name is also used for a fixed-field object elsewhere (a
// Deployment's selector is a LabelSelector; a Service's is a plain map).
const MAP_PATHS = new Set(["Service /spec/selector"]);
const isMapField = (obj, ptr) => MAP_FIELDS.has(ptr.split("/").pop()) || MAP_PATHS.has(`${obj.kind} ${ptr}`);

// ------------------------------------------------------------- the gateway

// "5s", "250ms", "1m30s", "1.5s" (docs/config.md) -> milliseconds.
function durationMs(text) {
  const s = String(text).trim();
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/gy;
  const unit = { ms: 1, s: 1000, m: 60000, h: 3600000 };
  let ms = 0;
  let m;
  let end = 0;
  while ((m = re.exec(s))) {
    ms += Number(m[1]) * unit[m[2]];
    end = re.lastIndex;
  }
  assert.ok(s.length > 0 && end === s.length, `not a duration: ${JSON.stringify(text)}`);
  return ms;
}

const isLoopback = (a) => /^127\./.test(a) || a === "::1";
const isWildcard = (a) => a === "0.0.0.0" || a === "::";

function selects(selector, labels) {
  if (!selector || (!selector.matchLabels && !selector.matchExpressions)) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels?.[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels ?? {}, e.key);
    const ok = {
      In: () => has && e.values.includes(labels[e.key]),
      NotIn: () => !has || !e.values.includes(labels[e.key]),
      Exists: () => has,
      DoesNotExist: () => !has,
    }[e.operator];
    if (!ok || !ok()) return false;
  }
  return true;
}

const podSpec = (deploy) => deploy.spec.template.spec;
const podLabels = (deploy) => deploy.spec.template.metadata?.labels ?? {};

// The Deployment running the gateway, where the container sits, and the
// config file it reads (from the ConfigMap in the render).
function gateway(objs) {
  const found = [];
  for (const d of all(objs, "Deployment")) {
    for (const where of ["initContainers", "containers"]) {
      for (const c of podSpec(d)[where] ?? []) if (c.name === GATEWAY) found.push({ deploy: d, where, c });
    }
  }
  assert.equal(found.length, 1, `exactly one ${GATEWAY} container in the render, found ${found.length}`);
  const { deploy, where, c } = found[0];
  const pod = podSpec(deploy);
  const argv = [...(c.command ?? []), ...(c.args ?? [])];
  const i = argv.indexOf("--config");
  const configPath = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith("--config="))?.slice(9);
  assert.ok(configPath, `${GATEWAY}: no --config argument in ${JSON.stringify(argv)}`);
  assert.ok(configPath.startsWith("/"), `--config ${configPath} must be absolute`);
  const configDir = posix.dirname(configPath);
  const mounts = (c.volumeMounts ?? []).filter((m) => m.mountPath.replace(/\/+$/, "") === configDir);
  assert.equal(mounts.length, 1, `${GATEWAY}: one volume mounted at ${configDir}, the directory of --config`);
  const mount = mounts[0];
  assert.equal(mount.subPath, undefined, `${GATEWAY}: the config volume is mounted with subPath: ConfigMap updates would never arrive`);
  assert.equal(mount.subPathExpr, undefined, `${GATEWAY}: the config volume is mounted with subPathExpr`);
  assert.equal(mount.readOnly, true, `${GATEWAY}: mount ${configDir} readOnly`);
  const volume = (pod.volumes ?? []).find((v) => v.name === mount.name);
  assert.ok(volume?.configMap, `${GATEWAY}: volume ${mount.name} must be a configMap volume`);
  assert.equal(volume.configMap.items, undefined, "configMap volume: no items, the whole ConfigMap is the directory");
  const cm = find(objs, "ConfigMap", volume.configMap.name);
  assert.ok(cm, `ConfigMap ${volume.configMap.name} (volume ${volume.name}) is not in the render`);
  const key = posix.basename(configPath);
  assert.equal(typeof cm.data?.[key], "string", `ConfigMap ${cm.metadata.name} has no key ${key} (the --config file)`);
  const config = parseYaml(cm.data[key]);
  assert.ok(config && typeof config === "object", `${key} in ConfigMap ${cm.metadata.name} is not a YAML mapping`);
  return { deploy, pod, where, c, configPath, cm, configText: cm.data[key], config };
}

function portNumber(container, port) {
  if (typeof port === "number") return port;
  const p = (container.ports ?? []).find((x) => x.name === port);
  assert.ok(p, `container ${container.name} has no port named ${port}`);
  return p.containerPort;
}

function adminListener(config) {
  const admin = config.server?.admin_listener;
  assert.ok(admin, "llmgate.yaml: server.admin_listener must be set (probes and /metrics reach it on the pod IP)");
  assert.ok(isWildcard(admin.address), `server.admin_listener.address ${admin.address} must be 0.0.0.0 or ::, so the kubelet and Prometheus reach it`);
  return admin;
}

function mainListeners(config) {
  const ls = config.server?.listeners;
  assert.ok(Array.isArray(ls) && ls.length > 0, "llmgate.yaml: server.listeners must be set explicitly");
  return ls;
}

// server.drain must be written out (terminationGracePeriodSeconds is sized
// from it); a key left out has the gateway's default: delay 0s, timeout 30s.
function drainSeconds(config) {
  const drain = config.server?.drain;
  assert.ok(drain && typeof drain === "object",
    "llmgate.yaml: server.drain must be set: terminationGracePeriodSeconds is sized from it");
  return {
    delay: drain.delay === undefined ? 0 : durationMs(drain.delay) / 1000,
    timeout: drain.timeout === undefined ? 30 : durationMs(drain.timeout) / 1000,
  };
}

// ------------------------------------------------------------------ checks
// Each throws an AssertionError naming the problem.

function checkSecurity(objs) {
  for (const d of all(objs, "Deployment")) {
    const pod = podSpec(d);
    const psc = pod.securityContext ?? {};
    for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
      const sc = c.securityContext ?? {};
      const where = `${id(d)} container ${c.name}`;
      assert.equal(sc.runAsNonRoot ?? psc.runAsNonRoot, true, `${where}: runAsNonRoot`);
      const uid = sc.runAsUser ?? psc.runAsUser;
      assert.ok(Number.isInteger(uid) && uid > 0, `${where}: runAsUser must be a numeric non-root uid, got ${uid}`);
      assert.equal(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation`);
      assert.equal(sc.readOnlyRootFilesystem, true, `${where}: readOnlyRootFilesystem`);
      assert.ok(sc.capabilities?.drop?.includes("ALL"), `${where}: capabilities.drop must include ALL`);
      assert.equal(sc.capabilities?.add, undefined, `${where}: capabilities.add`);
      assert.equal((sc.seccompProfile ?? psc.seccompProfile)?.type, "RuntimeDefault", `${where}: seccompProfile RuntimeDefault`);
      assert.notEqual(sc.privileged, true, `${where}: privileged`);
    }
  }
}

function checkGatewayContainer(objs) {
  const gw = gateway(objs);
  const { c, pod, config } = gw;
  assert.match(c.image, /^[^@]+:[^/:@]+$|@sha256:/, `${GATEWAY}: image ${c.image} needs an explicit tag or digest`);
  assert.doesNotMatch(c.image, /:latest$/, `${GATEWAY}: image ${c.image}: pin a version, not latest`);
  assert.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${GATEWAY}: cpu and memory requests`);
  assert.ok(c.resources?.limits?.memory, `${GATEWAY}: a memory limit`);
  const tmp = (c.volumeMounts ?? []).find((m) => m.mountPath === "/tmp");
  assert.ok(tmp && (pod.volumes ?? []).find((v) => v.name === tmp.name)?.emptyDir, `${GATEWAY}: an emptyDir at /tmp`);
  // Every API key the config names comes from a Secret in the render.
  for (const p of config.providers ?? []) {
    if (!p.api_key_env) continue;
    const env = (c.env ?? []).find((e) => e.name === p.api_key_env);
    assert.ok(env?.valueFrom?.secretKeyRef, `${GATEWAY}: env ${p.api_key_env} (providers ${p.name}) must come from a secretKeyRef`);
  }
  return gw;
}

// Every secretKeyRef / configMapKeyRef / envFrom / volume of every pod names
// an object (and key) present in the render.
function checkReferences(objs) {
  for (const d of all(objs, "Deployment")) {
    const pod = podSpec(d);
    for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
      for (const e of c.env ?? []) {
        for (const [kind, ref] of [["Secret", e.valueFrom?.secretKeyRef], ["ConfigMap", e.valueFrom?.configMapKeyRef]]) {
          if (!ref) continue;
          const o = find(objs, kind, ref.name);
          assert.ok(o, `${id(d)} ${c.name} env ${e.name}: ${kind} ${ref.name} is not in the render`);
          const keys = { ...o.data, ...o.stringData };
          assert.ok(Object.hasOwn(keys, ref.key), `${id(d)} ${c.name} env ${e.name}: ${kind} ${ref.name} has no key ${ref.key}`);
        }
      }
      for (const ef of c.envFrom ?? []) {
        if (ef.secretRef) assert.ok(find(objs, "Secret", ef.secretRef.name), `envFrom Secret ${ef.secretRef.name} is not in the render`);
        if (ef.configMapRef) assert.ok(find(objs, "ConfigMap", ef.configMapRef.name), `envFrom ConfigMap ${ef.configMapRef.name} is not in the render`);
      }
    }
    for (const v of pod.volumes ?? []) {
      if (v.configMap) assert.ok(find(objs, "ConfigMap", v.configMap.name), `${id(d)} volume ${v.name}: ConfigMap ${v.configMap.name} is not in the render`);
      if (v.secret) assert.ok(find(objs, "Secret", v.secret.secretName), `${id(d)} volume ${v.name}: Secret ${v.secret.secretName} is not in the render`);
    }
    if (pod.serviceAccountName) assert.ok(find(objs, "ServiceAccount", pod.serviceAccountName), `ServiceAccount ${pod.serviceAccountName} is not in the render`);
  }
}

function checkProbes(objs) {
  const { c, config } = gateway(objs);
  const admin = adminListener(config);
  const httpProbe = (name) => {
    const p = c[name];
    assert.ok(p?.httpGet, `${GATEWAY}: ${name} must be an httpGet probe`);
    assert.equal(portNumber(c, p.httpGet.port), admin.port,
      `${GATEWAY}: ${name} port ${p.httpGet.port} must be the admin listener's port ${admin.port} (on the pod IP; the API may be loopback-only)`);
    return p.httpGet;
  };
  assert.equal(httpProbe("livenessProbe").path, "/healthz", `${GATEWAY}: livenessProbe must be /healthz (it never depends on upstreams)`);
  assert.equal(httpProbe("readinessProbe").path, "/readyz", `${GATEWAY}: readinessProbe must be /readyz (it fails while draining)`);
  if (c.startupProbe) assert.match(httpProbe("startupProbe").path, /^\/(readyz|healthz)$/);
  // Each declared port is one a listener serves, reachable on the pod IP.
  const served = [
    ...mainListeners(config).map((l) => ({ ...l, what: "server.listeners" })),
    { ...admin, what: "server.admin_listener" },
  ];
  for (const p of c.ports ?? []) {
    const l = served.find((s) => s.port === p.containerPort);
    assert.ok(l, `${GATEWAY}: containerPort ${p.name}/${p.containerPort} is served by no listener in llmgate.yaml`);
    assert.ok(!isLoopback(l.address), `${GATEWAY}: containerPort ${p.name}/${p.containerPort} is bound to ${l.address} (${l.what}): unreachable from outside the pod`);
  }
  assert.ok((c.ports ?? []).some((p) => p.name === "admin" && p.containerPort === admin.port),
    `${GATEWAY}: a containerPort named admin = server.admin_listener.port ${admin.port}`);
}

function checkGrace(objs) {
  const { pod, config } = gateway(objs);
  const { delay, timeout } = drainSeconds(config);
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  assert.ok(grace >= delay + timeout + GRACE_MARGIN_S,
    `terminationGracePeriodSeconds ${grace} < drain.delay ${delay}s + drain.timeout ${timeout}s + ${GRACE_MARGIN_S}s margin`);
  const { c } = gateway(objs);
  assert.equal(c.lifecycle?.preStop, undefined, `${GATEWAY}: no preStop hook: drain.delay does the endpoint-propagation wait`);
}

function checkDeploymentSelectors(objs) {
  for (const d of all(objs, "Deployment")) {
    assert.ok(selects(d.spec.selector, podLabels(d)), `${id(d)}: spec.selector does not match its pod template labels`);
  }
}

function checkSidecar(objs) {
  const { deploy, pod, where, c, config } = gateway(objs);
  assert.equal(where, "initContainers", `${GATEWAY} must be a native sidecar: in initContainers, not ${where}`);
  assert.equal(c.restartPolicy, "Always", `${GATEWAY}: restartPolicy Always (native sidecar, Kubernetes >= 1.29)`);
  assert.ok(c.startupProbe, `${GATEWAY}: a startupProbe, so the application starts only once the gateway serves`);
  for (const l of mainListeners(config)) {
    assert.ok(isLoopback(l.address), `sidecar llmgate.yaml: server.listeners ${l.address}:${l.port} must be loopback (127.0.0.1): only this pod may use the keys`);
  }
  const apps = pod.containers ?? [];
  assert.ok(apps.length > 0, `${id(deploy)}: an application container in containers`);
  for (const app of apps) {
    const env = (app.env ?? []).find((e) => e.name === "OPENAI_BASE_URL");
    assert.ok(env?.value, `${id(deploy)} container ${app.name}: OPENAI_BASE_URL`);
    const url = new URL(env.value);
    const host = url.hostname.replace(/^\[|\]$/g, "");
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    assert.equal(url.protocol, "http:", `OPENAI_BASE_URL ${env.value}: the sidecar speaks plain http on loopback`);
    assert.ok(mainListeners(config).some((l) => l.address === host && l.port === port),
      `OPENAI_BASE_URL ${env.value} is not a listener of the sidecar (${JSON.stringify(config.server.listeners)})`);
    assert.equal(url.pathname.replace(/\/$/, ""), "/v1", `OPENAI_BASE_URL ${env.value} must end in /v1`);
  }
  const admin = adminListener(config);
  const monitors = all(objs, "PodMonitor");
  assert.ok(monitors.length > 0, "a PodMonitor");
  for (const m of monitors) {
    assert.ok(selects(m.spec.selector, podLabels(deploy)), `${id(m)}: selector does not match ${id(deploy)}'s pod labels`);
    if (m.spec.jobLabel) assert.ok(Object.hasOwn(podLabels(deploy), m.spec.jobLabel), `${id(m)}: jobLabel ${m.spec.jobLabel} is not a label of the pods`);
    for (const ep of m.spec.podMetricsEndpoints ?? []) {
      assert.equal(portNumber(c, ep.port), admin.port, `${id(m)}: port ${ep.port} must be the gateway's admin port`);
      assert.equal(ep.path ?? "/metrics", "/metrics", `${id(m)}: path`);
    }
    assert.ok(m.spec.podMetricsEndpoints?.length > 0, `${id(m)}: podMetricsEndpoints`);
  }
}

function checkStandalone(objs) {
  const { deploy, where, c, config } = gateway(objs);
  assert.equal(where, "containers", `${GATEWAY} runs as the main container`);
  const labels = podLabels(deploy);
  assert.ok(deploy.spec.replicas >= 2, `${id(deploy)}: at least 2 replicas, got ${deploy.spec.replicas}`);
  const spread = deploy.spec.template.spec.topologySpreadConstraints ?? [];
  const anti = deploy.spec.template.spec.affinity?.podAntiAffinity;
  assert.ok(spread.length > 0 || anti, `${id(deploy)}: topologySpreadConstraints or podAntiAffinity`);
  for (const s of spread) assert.ok(selects(s.labelSelector, labels), `${id(deploy)}: topologySpreadConstraint ${s.topologyKey} selects other pods`);

  const api = all(objs, "Service").filter((s) => (s.spec.ports ?? []).some((p) => p.port === 8080));
  assert.equal(api.length, 1, "one Service with port 8080");
  const svc = api[0];
  assert.ok(selects({ matchLabels: svc.spec.selector }, labels), `${id(svc)}: selector does not match the gateway pods`);
  const sp = svc.spec.ports.find((p) => p.port === 8080);
  const target = portNumber(c, sp.targetPort ?? sp.port);
  assert.ok(mainListeners(config).some((l) => l.port === target && isWildcard(l.address)),
    `${id(svc)}: targetPort ${sp.targetPort} -> ${target} is not a listener on 0.0.0.0 or :: in llmgate.yaml`);
  assert.notEqual(target, adminListener(config).port, `${id(svc)}: the API Service must not target the admin port`);

  const hpas = all(objs, "HorizontalPodAutoscaler");
  assert.equal(hpas.length, 1, "one HorizontalPodAutoscaler");
  const hpa = hpas[0];
  const ref = hpa.spec.scaleTargetRef;
  assert.ok(ref.apiVersion === "apps/v1" && ref.kind === "Deployment" && ref.name === deploy.metadata.name,
    `${id(hpa)}: scaleTargetRef ${JSON.stringify(ref)} is not ${id(deploy)}`);
  assert.ok(hpa.spec.minReplicas >= 2, `${id(hpa)}: minReplicas >= 2`);
  assert.equal(hpa.spec.minReplicas, deploy.spec.replicas, `${id(hpa)}: minReplicas = the Deployment's replicas`);
  assert.ok(hpa.spec.metrics.some((m) => m.type === "Resource" && m.resource.name === "cpu"), `${id(hpa)}: a CPU metric`);

  const pdbs = all(objs, "PodDisruptionBudget");
  assert.equal(pdbs.length, 1, "one PodDisruptionBudget");
  const pdb = pdbs[0];
  assert.ok(selects(pdb.spec.selector, labels), `${id(pdb)}: selector does not match the gateway pods`);
  const allows = pdb.spec.maxUnavailable !== undefined
    ? Number.parseInt(pdb.spec.maxUnavailable, 10) >= 1
    : Number.parseInt(pdb.spec.minAvailable, 10) < hpa.spec.minReplicas;
  assert.ok(allows, `${id(pdb)}: must allow one disruption at minReplicas, or node drains block`);

  const monitors = all(objs, "ServiceMonitor");
  assert.ok(monitors.length > 0, "a ServiceMonitor");
  const admin = adminListener(config);
  for (const m of monitors) {
    const svcs = all(objs, "Service").filter((s) => selects(m.spec.selector, s.metadata.labels));
    assert.equal(svcs.length, 1, `${id(m)}: selects ${svcs.length} Services in the render, want 1`);
    const ms = svcs[0];
    assert.ok(selects({ matchLabels: ms.spec.selector }, labels), `${id(ms)}: selector does not match the gateway pods`);
    assert.ok(m.spec.endpoints?.length > 0, `${id(m)}: endpoints`);
    for (const ep of m.spec.endpoints) {
      const p = (ms.spec.ports ?? []).find((x) => x.name === ep.port);
      assert.ok(p, `${id(m)}: ${id(ms)} has no port named ${ep.port}`);
      assert.equal(portNumber(c, p.targetPort ?? p.port), admin.port, `${id(m)}: port ${ep.port} must reach the admin listener`);
      assert.equal(ep.path ?? "/metrics", "/metrics", `${id(m)}: path`);
    }
  }
}

const CHECKS = {
  sidecar: [checkSecurity, checkGatewayContainer, checkReferences, checkProbes, checkGrace, checkDeploymentSelectors, checkSidecar],
  standalone: [checkSecurity, checkGatewayContainer, checkReferences, checkProbes, checkGrace, checkDeploymentSelectors, checkStandalone],
};
const runChecks = (overlay, objs) => CHECKS[overlay].forEach((check) => check(objs));

// ----------------------------------------------------------- check-config

function checkConfig(objs, configText) {
  const gw = gateway(objs);
  const dir = mkdtempSync(join(tmpdir(), "llmgate-kcfg-"));
  try {
    const file = join(dir, posix.basename(gw.configPath));
    writeFileSync(file, configText ?? gw.configText);
    // The keys as the pod gets them: from the rendered Secret.
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
    for (const e of gw.c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (e.value !== undefined) env[e.name] = e.value;
      if (ref) {
        const s = find(objs, "Secret", ref.name);
        env[e.name] = s.stringData?.[ref.key] ?? Buffer.from(s.data[ref.key], "base64").toString();
      }
    }
    const r = spawnSync(join(BIN, "llmgate"), ["--check-config", file], { env, encoding: "utf8", timeout: 30000 });
    return { status: r.status, output: `${r.stdout}${r.stderr}`.trim(), error: r.error };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// -------------------------------------------------------------------- tests

test("kubectl kustomize is available", { skip: SKIP }, (t) => {
  t.diagnostic(execFileSync(KUBECTL, ["version", "--client"], { encoding: "utf8" }).trim().replace(/\n/g, "; "));
});

for (const overlay of OVERLAYS) {
  describe(`overlays/${overlay}`, { skip: SKIP }, () => {
    test("renders, and every object matches its schema with no unknown field", async () => {
      const objs = render(overlay);
      assert.ok(objs.length > 0);
      for (const o of objs) await assertValid(o);
    });

    test("only map fields (labels, data, requests, ...) escape the unknown-field check", async (t) => {
      for (const o of render(overlay)) {
        const { maps } = await strictValidate(o);
        for (const m of maps) {
          assert.ok(isMapField(o, m), `${id(o)}: ${m} is enumerated by the validator, so its unknown keys would pass unseen`);
        }
        t.diagnostic(`${id(o)}: maps ${maps.join(" ") || "none"}`);
      }
    });

    test("an unknown field injected into any non-map object is reported", async (t) => {
      // Every object of the render gets a stray key in turn: the strict
      // validation must name it (or the schema itself reject it).
      let injected = 0;
      for (const o of render(overlay)) {
        const { maps } = await strictValidate(o);
        const mapSet = new Set(maps);
        const visit = async (node, path) => {
          if (node === null || typeof node !== "object") return;
          if (Array.isArray(node)) {
            for (let i = 0; i < node.length; i++) await visit(node[i], [...path, String(i)]);
            return;
          }
          if (mapSet.has(pointer(path))) return;
          const copy = structuredClone(o);
          let target = copy;
          for (const k of path) target = target[k];
          target.zzUnknownField = "x";
          const r = await strictValidate(copy);
          const where = pointer([...path, "zzUnknownField"]);
          assert.ok(r.unknown.includes(where) || (r.schemaErrors ?? "").includes("zzUnknownField"),
            `${id(o)}: ${where} was not reported`);
          injected++;
          for (const [k, v] of Object.entries(node)) await visit(v, [...path, k]);
        };
        await visit(o, []);
      }
      assert.ok(injected > 20, `only ${injected} objects checked`);
      t.diagnostic(`${injected} objects each caught a stray key`);
    });

    test("the gateway's pod: lifecycle, config mount, probes, drain, security, references", () => {
      runChecks(overlay, render(overlay));
    });

    test("the embedded llmgate.yaml passes llmgate --check-config", (t) => {
      assert.ok(BIN, "LLMGATE_BIN_DIR must point at build/bin");
      assert.ok(existsSync(join(BIN, "llmgate")), `${BIN}/llmgate is not built`);
      const objs = render(overlay);
      const r = checkConfig(objs);
      assert.equal(r.error, undefined, String(r.error));
      assert.equal(r.status, 0, `llmgate --check-config failed: ${r.output}`);
      assert.match(r.output, /OK/);
      t.diagnostic(r.output);
      // ...and the same run does reject a broken file.
      const bad = checkConfig(objs, `${gateway(objs).configText}\nnot_a_key: 1\n`);
      assert.equal(bad.status, 1, `a config with an unknown key passed: ${bad.output}`);
      assert.match(bad.output, /not_a_key/);
    });

    test("every flag the manifests pass is one llmgate's usage lists", () => {
      assert.ok(BIN && existsSync(join(BIN, "llmgate")), "build/bin/llmgate is not built");
      const r = spawnSync(join(BIN, "llmgate"), ["--help"], { encoding: "utf8", timeout: 30000 });
      const usage = `${r.stdout}${r.stderr}`;
      const { c } = gateway(render(overlay));
      const flags = [...(c.command ?? []), ...(c.args ?? [])].filter((a) => a.startsWith("--")).map((a) => a.split("=")[0]);
      assert.ok(flags.includes("--config"));
      for (const f of flags) assert.ok(usage.includes(f), `${f} is not in \`llmgate --help\`:\n${usage}`);
    });
  });
}

describe("how each overlay ships its config", { skip: SKIP }, () => {
  test("sidecar: a fixed ConfigMap name, updated in place and hot-reloaded", () => {
    assert.equal(gateway(render("sidecar")).cm.metadata.name, "llmgate-config");
  });
  test("standalone: a content-hashed ConfigMap name, so a change rolls the pods", () => {
    assert.match(gateway(render("standalone")).cm.metadata.name, /^llmgate-config-[a-z0-9]{10}$/);
  });
  test("both: the provider-keys Secret is content-hashed, so a key change rolls the pods", () => {
    for (const overlay of OVERLAYS) {
      const names = all(render(overlay), "Secret").map((s) => s.metadata.name);
      assert.ok(names.length === 1 && /^llmgate-provider-keys-[a-z0-9]{10}$/.test(names[0]), `${overlay}: ${names}`);
    }
  });
});

describe("components/hpa-in-flight", { skip: SKIP }, () => {
  test("adds a requests-in-flight Pods metric to the standalone HPA, which the gateway exports", async () => {
    const objs = renderWithComponent("standalone", "hpa-in-flight");
    for (const o of objs) await assertValid(o);
    runChecks("standalone", objs);
    const hpa = all(objs, "HorizontalPodAutoscaler")[0];
    const pods = hpa.spec.metrics.filter((m) => m.type === "Pods").map((m) => m.pods.metric.name);
    assert.deepEqual(pods, ["llmgate_requests_in_flight"]);
    const metricsSource = readFileSync(join(SRC, "gateway", "observe", "metrics_families.h"), "utf8");
    assert.ok(metricsSource.includes(`"${pods[0]}"`), `gateway/observe/metrics_families.h does not define ${pods[0]}`);
  });
});

describe("components/shared-state-redis", { skip: SKIP }, () => {
  test("adds one Redis the standalone replicas share, wired by name, port and password", async () => {
    const objs = renderWithComponent("standalone", "shared-state-redis");
    for (const o of objs) await assertValid(o);
    runChecks("standalone", objs);
    const { c } = gateway(objs);
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));
    // The section as llmgate reads it, and what it points at.
    const shared = parseYaml(env.LLMGATE_SHARED_STATE.value);
    const url = new URL(shared.url);
    assert.equal(url.protocol, "redis:");
    const svc = find(objs, "Service", url.hostname);
    assert.ok(svc, `no Service ${url.hostname} for ${shared.url}`);
    const redisPort = svc.spec.ports.find((p) => p.port === Number(url.port || 6379));
    assert.ok(redisPort, `Service ${url.hostname} has no port ${url.port}`);
    const redis = find(objs, "Deployment", "llmgate-redis");
    const rc = podSpec(redis).containers[0];
    assert.ok(rc.ports.some((p) => p.name === redisPort.targetPort), "the Service targets the Redis port");
    for (const [k, v] of Object.entries(svc.spec.selector)) {
      assert.equal(redis.spec.template.metadata.labels[k], v, `the Service selects the Redis pod (${k})`);
    }
    // One password, from one generated Secret, on both sides.
    assert.equal(shared.password_env, "REDIS_PASSWORD");
    const gwRef = env.REDIS_PASSWORD.valueFrom.secretKeyRef;
    const redisRef = rc.env.find((e) => e.name === "REDIS_PASSWORD").valueFrom.secretKeyRef;
    assert.deepEqual(gwRef, redisRef);
    assert.match(gwRef.name, /^llmgate-redis-[a-z0-9]{10}$/);
    assert.ok(find(objs, "Secret", gwRef.name), "the Secret exists");
    assert.ok(rc.args.includes("$(REDIS_PASSWORD)"), "Redis requires the password");
    // Only the gateway's pods may reach it.
    const np = find(objs, "NetworkPolicy", "llmgate-redis");
    const gwLabels = gateway(objs).deploy.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(np.spec.ingress[0].from[0].podSelector.matchLabels)) {
      assert.equal(gwLabels[k], v, `the NetworkPolicy admits the gateway pods (${k})`);
    }
    // llmgate accepts the result, shared state included.
    const r = checkConfig(objs);
    assert.equal(r.status, 0, `llmgate --check-config failed: ${r.output}`);
    assert.match(r.output, /shared state redis:\/\/llmgate-redis:6379/);
  });
});

// Each semantic check is shown to fail on a broken copy of a good render.
const gw = (objs) => gateway(objs).c;
const dep = (objs, kind = "Deployment") => all(objs, kind)[0];
const MUTATIONS = [
  ["sidecar", "config mounted with subPath", (o) => { gw(o).volumeMounts[0].subPath = "llmgate.yaml"; }, /subPath/],
  ["sidecar", "gateway moved to containers", (o) => {
    const p = podSpec(dep(o)); p.containers.push(p.initContainers.shift()); delete p.initContainers;
  }, /initContainers/],
  ["sidecar", "no restartPolicy: Always", (o) => { delete gw(o).restartPolicy; }, /restartPolicy Always/],
  ["sidecar", "no startupProbe", (o) => { delete gw(o).startupProbe; }, /startupProbe/],
  ["sidecar", "OPENAI_BASE_URL on another port", (o) => {
    podSpec(dep(o)).containers[0].env.find((e) => e.name === "OPENAI_BASE_URL").value = "http://127.0.0.1:9999/v1";
  }, /not a listener/],
  ["sidecar", "API listener on 0.0.0.0", (o) => {
    const cm = all(o, "ConfigMap")[0];
    cm.data["llmgate.yaml"] = cm.data["llmgate.yaml"].replace("address: 127.0.0.1", "address: 0.0.0.0");
  }, /must be loopback/],
  ["sidecar", "PodMonitor selector matches no pod", (o) => { dep(o, "PodMonitor").spec.selector.matchLabels = { app: "other" }; }, /selector/],
  ["sidecar", "PodMonitor jobLabel the pods lack", (o) => { dep(o, "PodMonitor").spec.jobLabel = "app"; }, /jobLabel app/],
  ["sidecar", "PodMonitor on the wrong port", (o) => { dep(o, "PodMonitor").spec.podMetricsEndpoints[0].port = "http"; }, /no port named http/],
  ["sidecar", "grace period shorter than the drain", (o) => { podSpec(dep(o)).terminationGracePeriodSeconds = 20; }, /terminationGracePeriodSeconds 20/],
  ["sidecar", "admin listener on loopback", (o) => {
    const cm = all(o, "ConfigMap")[0];
    cm.data["llmgate.yaml"] = cm.data["llmgate.yaml"].replace("address: 0.0.0.0", "address: 127.0.0.1");
  }, /admin_listener.address/],
  ["sidecar", "no drain in the config", (o) => {
    const cm = all(o, "ConfigMap")[0];
    cm.data["llmgate.yaml"] = cm.data["llmgate.yaml"].replace(/\n  drain:\n( {4}\S.*\n)+/, "\n");
  }, /server.drain must be set/],
  ["sidecar", "drain timeout above the grace period", (o) => {
    const cm = all(o, "ConfigMap")[0];
    cm.data["llmgate.yaml"] = cm.data["llmgate.yaml"].replace(/timeout: 20s/, "timeout: 90s");
  }, /drain.timeout 90s/],
  ["standalone", "grace period shorter than the drain", (o) => { podSpec(dep(o)).terminationGracePeriodSeconds = 30; }, /terminationGracePeriodSeconds 30/],
  ["standalone", "liveness on /readyz", (o) => { gw(o).livenessProbe.httpGet.path = "/readyz"; }, /livenessProbe must be \/healthz/],
  ["standalone", "readiness on the API port", (o) => { gw(o).readinessProbe.httpGet.port = "http"; }, /readinessProbe port http/],
  ["standalone", "a preStop hook", (o) => { gw(o).lifecycle = { preStop: { sleep: { seconds: 5 } } }; }, /preStop/],
  ["standalone", "a containerPort no listener serves", (o) => { gw(o).ports.push({ name: "extra", containerPort: 9000 }); }, /served by no listener/],
  ["standalone", "config volume names a missing ConfigMap", (o) => {
    podSpec(dep(o)).volumes.find((v) => v.configMap).configMap.name = "nope";
  }, /ConfigMap nope/],
  ["standalone", "secretKeyRef names a missing Secret", (o) => {
    gw(o).env[0].valueFrom.secretKeyRef.name = "nope";
  }, /Secret nope/],
  ["standalone", "secretKeyRef names a missing key", (o) => {
    gw(o).env[0].valueFrom.secretKeyRef.key = "NOPE";
  }, /no key NOPE/],
  ["standalone", "writable root filesystem", (o) => { gw(o).securityContext.readOnlyRootFilesystem = false; }, /readOnlyRootFilesystem/],
  ["standalone", "runs as root", (o) => {
    gw(o).securityContext.runAsUser = 0; podSpec(dep(o)).securityContext.runAsUser = 0;
  }, /runAsUser/],
  ["standalone", "capabilities not dropped", (o) => { gw(o).securityContext.capabilities.drop = ["NET_RAW"]; }, /drop must include ALL/],
  ["standalone", "no memory limit", (o) => { delete gw(o).resources.limits; }, /memory limit/],
  ["standalone", "one replica", (o) => { dep(o).spec.replicas = 1; }, /at least 2 replicas/],
  ["standalone", "Service selector typo", (o) => {
    all(o, "Service").find((s) => s.metadata.name === "llmgate").spec.selector["app.kubernetes.io/name"] = "llmgat";
  }, /selector does not match/],
  ["standalone", "HPA targets another Deployment", (o) => { dep(o, "HorizontalPodAutoscaler").spec.scaleTargetRef.name = "other"; }, /scaleTargetRef/],
  ["standalone", "PDB selects nothing", (o) => { dep(o, "PodDisruptionBudget").spec.selector.matchLabels = { app: "x" }; }, /PodDisruptionBudget\/llmgate: selector/],
  ["standalone", "PDB blocks every eviction", (o) => {
    const pdb = dep(o, "PodDisruptionBudget"); delete pdb.spec.maxUnavailable; pdb.spec.minAvailable = 2;
  }, /must allow one disruption/],
  ["standalone", "ServiceMonitor on a port the Service lacks", (o) => { dep(o, "ServiceMonitor").spec.endpoints[0].port = "metrics"; }, /no port named metrics/],
  ["standalone", "topology spread over other pods", (o) => {
    podSpec(dep(o)).topologySpreadConstraints[0].labelSelector.matchLabels = { app: "x" };
  }, /topologySpreadConstraint/],
  ["standalone", "Deployment selector does not match its pods", (o) => {
    dep(o).spec.template.metadata.labels["app.kubernetes.io/component"] = "x";
  }, /does not match its pod template labels/],
  ["standalone", "image :latest", (o) => { gw(o).image = "registry.example.com/llmgate:latest"; }, /pin a version/],
];

describe("each check fails on a broken render", { skip: SKIP }, () => {
  for (const overlay of OVERLAYS) {
    test(`${overlay}: the good render passes every check`, () => runChecks(overlay, render(overlay)));
  }
  for (const [overlay, what, mutate, expected] of MUTATIONS) {
    test(`${overlay}: ${what}`, () => {
      const objs = render(overlay);
      mutate(objs);
      assert.throws(() => runChecks(overlay, objs), expected);
    });
  }
});

describe("unknown and mistyped fields are caught", { skip: SKIP }, () => {
  const cases = [
    ["standalone", "Deployment", ["spec", "template", "spec", "containers", 0, "imagePullPolcy"], "IfNotPresent"],
    ["standalone", "Deployment", ["spec", "replica"], 2],
    ["standalone", "Deployment", ["metadata", "lables"], { a: "b" }],
    ["standalone", "Deployment", ["spec", "template", "spec", "containers", 0, "readinessProbe", "httpGet", "paht"], "/readyz"],
    ["standalone", "Service", ["spec", "ports", 0, "targetport"], "http"],
    ["standalone", "HorizontalPodAutoscaler", ["spec", "minReplica"], 2],
    ["standalone", "PodDisruptionBudget", ["spec", "maxUnavalable"], 1],
    ["standalone", "ServiceMonitor", ["spec", "endpoints", 0, "intervl"], "15s"],
    ["sidecar", "Deployment", ["spec", "template", "spec", "initContainers", 0, "restartPolcy"], "Always"],
    ["sidecar", "Deployment", ["spec", "template", "spec", "securityContext", "runAsNonRot"], true],
    ["sidecar", "PodMonitor", ["spec", "podMetricsEndpoints", 0, "pth"], "/metrics"],
  ];
  for (const [overlay, kind, path, value] of cases) {
    test(`${overlay} ${kind} ${pointer(path)}`, async (t) => {
      const obj = dep(render(overlay), kind);
      let node = obj;
      for (const k of path.slice(0, -1)) node = node[k];
      node[path.at(-1)] = value;
      const Model = await modelFor(obj);
      let plain = "accepted";
      try {
        new Model(obj).validate();
      } catch (e) {
        plain = `rejected (${e.message})`;
      }
      t.diagnostic(`kubernetes-models validate() alone: ${plain}`);
      const r = await strictValidate(obj);
      assert.deepEqual(r.unknown, [pointer(path)]);
    });
  }

  test("a mistyped value is a schema error", async () => {
    const obj = dep(render("sidecar"));
    obj.spec.template.spec.initContainers[0].ports[0].containerPort = "8081";
    const r = await strictValidate(obj);
    assert.match(r.schemaErrors ?? "", /containerPort must be integer/);
  });
});
