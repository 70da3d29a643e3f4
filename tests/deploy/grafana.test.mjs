// deploy/grafana/llmgate.json against Grafana's own dashboard schema and the
// gateway's metrics.
//
// Schema: @grafana/schema ships no JSON Schema, only the TypeScript types that
// Grafana generates from its CUE dashboard kind and panel plugin schemas
// (dist/types/raw/dashboard/x/types.gen.d.ts, the panelcfg types of the
// timeseries and stat panels, and common/common.gen.d.ts), plus the kinds'
// default values as JavaScript. Without a TypeScript compiler in
// tests/deploy/node_modules the types cannot be compiled against, so this file
// reads those .d.ts files with a small parser (interfaces with `extends`, enums,
// type aliases, unions, literals, Array<>, Record<>, inline object types; it
// throws on anything else) and checks the dashboard the way TypeScript checks an
// object literal: required properties, property types, enum and literal
// values, and no unknown properties. The test "the schema check rejects ..."
// shows it failing on broken dashboards.
//
// PromQL: every query, with the dashboard variables replaced by values Grafana
// would send, is parsed by `promtool check rules`; every metric it selects must
// be one llmgate exports (the catalogue in lib/metrics_catalogue.mjs) or a recording
// rule of deploy/prometheus/rules.yaml.
// Run by run.sh (through ctest), which sets LLMGATE_SOURCE_DIR.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import YAML from "yaml";
import { defaultDashboard, defaultGridPos } from "@grafana/schema";
import { GATEWAY_METRICS, resolveMetric } from "./lib/metrics_catalogue.mjs";
import { promqlSelectors, selectorProblems, dashboardExpressions, recordingRuleNames } from "./lib/promql.mjs";
import { which } from "../support/node_support.mjs";

const SRC = process.env.LLMGATE_SOURCE_DIR;
assert.ok(SRC, "LLMGATE_SOURCE_DIR must be set (run through tests/deploy/run.sh)");

const dashboard = JSON.parse(readFileSync(join(SRC, "deploy/grafana/llmgate.json"), "utf8"));
const rules = YAML.parse(readFileSync(join(SRC, "deploy/prometheus/rules.yaml"), "utf8"));
const recordNames = recordingRuleNames(rules);
const DATASOURCE = { type: "prometheus", uid: "${datasource}" };

const promtool = which("promtool");
const NO_PROMTOOL = "promtool is not installed (Debian package prometheus; tools/setup.sh installs it)";

// --- TypeScript declaration reader ------------------------------------------

const SCHEMA_ROOT = dirname(createRequire(import.meta.url).resolve("@grafana/schema/package.json"));
const TS_KEYWORD_TYPES = new Set(["string", "number", "boolean", "unknown", "any", "null", "undefined", "never", "object"]);

function lexTs(src, file) {
  const tokens = [];
  const re = /\s+|\/\/[^\n]*|\/\*[\s\S]*?\*\/|([A-Za-z_$][A-Za-z0-9_$]*)|('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(-?[0-9]+(?:\.[0-9]+)?)|([{}()<>[\];:,|&?=.*])/y;
  while (re.lastIndex < src.length) {
    const at = re.lastIndex;
    const m = re.exec(src);
    if (!m) throw new Error(`${file}: cannot read the TypeScript at offset ${at}: ${src.slice(at, at + 40)}`);
    if (m[1]) tokens.push({ t: "id", v: m[1] });
    else if (m[2]) tokens.push({ t: "str", v: JSON.parse(m[2][0] === "'" ? `"${m[2].slice(1, -1).replace(/"/g, '\\"')}"` : m[2]) });
    else if (m[3]) tokens.push({ t: "num", v: Number(m[3]) });
    else if (m[4]) tokens.push({ t: "p", v: m[4] });
  }
  return tokens;
}

// One .d.ts file -> { interfaces, enums, aliases, namespaces } (Maps by name).
function parseDts(relPath) {
  const file = join(SCHEMA_ROOT, relPath);
  const toks = lexTs(readFileSync(file, "utf8"), relPath);
  let i = 0;
  const peek = (k = 0) => toks[i + k];
  const is = (v, k = 0) => peek(k) && (peek(k).t === "p" || peek(k).t === "id") && peek(k).v === v;
  const fail = (what) => { throw new Error(`${relPath}: ${what} at token ${i} (${JSON.stringify(toks.slice(i, i + 6).map((t) => t.v))})`); };
  const expect = (v) => { if (!is(v)) fail(`expected ${v}`); i++; };
  const ident = () => { if (peek()?.t !== "id") fail("expected an identifier"); return toks[i++].v; };
  const skipTypeParams = () => {
    if (!is("<")) return;
    let depth = 0;
    do { if (is("<")) depth++; else if (is(">")) depth--; i++; } while (depth > 0 && i < toks.length);
  };
  const decl = { file: relPath, interfaces: new Map(), enums: new Map(), aliases: new Map(), namespaces: new Map() };

  function members() {
    expect("{");
    const props = new Map();
    let index = null;
    while (!is("}")) {
      if (is("readonly")) i++;
      if (is("[")) {
        i++; ident(); expect(":");
        const key = type();
        if (key.kind !== "string") fail("only string index signatures are supported");
        expect("]"); expect(":");
        index = type();
      } else {
        const name = peek()?.t === "str" ? toks[i++].v : ident();
        const optional = is("?");
        if (optional) i++;
        expect(":");
        props.set(name, { type: type(), optional });
      }
      if (is(";") || is(",")) i++;
    }
    expect("}");
    return { kind: "object", props, index, bases: [] };
  }
  function type() {
    if (is("|")) i++;
    const alts = [intersection()];
    while (is("|")) { i++; alts.push(intersection()); }
    return alts.length === 1 ? alts[0] : { kind: "union", alts };
  }
  function intersection() {
    const parts = [postfix()];
    while (is("&")) { i++; parts.push(postfix()); }
    return parts.length === 1 ? parts[0] : { kind: "intersection", parts };
  }
  function postfix() {
    let t = primary();
    while (is("[") && is("]", 1)) { i += 2; t = { kind: "array", elem: t }; }
    return t;
  }
  function primary() {
    const tok = peek();
    if (!tok) fail("unexpected end of file");
    if (is("(")) { i++; const t = type(); expect(")"); return t; }
    if (is("{")) return members();
    if (tok.t === "str" || tok.t === "num") { i++; return { kind: "literal", value: tok.v }; }
    if (tok.t !== "id") fail("expected a type");
    if (tok.v === "true" || tok.v === "false") { i++; return { kind: "literal", value: tok.v === "true" }; }
    if (TS_KEYWORD_TYPES.has(tok.v)) { i++; return { kind: tok.v }; }
    const parts = [ident()];
    while (is(".")) { i++; parts.push(ident()); }
    let args = [];
    if (is("<")) {
      i++;
      args.push(type());
      while (is(",")) { i++; args.push(type()); }
      expect(">");
    }
    const name = parts.join(".");
    if (name === "Array" && args.length === 1) return { kind: "array", elem: args[0] };
    if (name === "Record" && args.length === 2) {
      if (args[0].kind !== "string") fail("only Record<string, T> is supported");
      return { kind: "object", props: new Map(), index: args[1], bases: [] };
    }
    if (args.length) fail(`unsupported generic type ${name}<...>`);
    return { kind: "ref", parts };
  }
  function heritage() {
    const parts = [ident()];
    while (is(".")) { i++; parts.push(ident()); }
    if (is("<")) fail("generic base interfaces are not supported");
    return { kind: "ref", parts };
  }

  while (i < toks.length) {
    if (is("import")) {
      i++; expect("*"); expect("as");
      const alias = ident();
      expect("from");
      const from = toks[i++].v;
      if (from !== "@grafana/schema") fail(`unexpected import from ${from}`);
      decl.namespaces.set(alias, "dist/types/common/common.gen.d.ts");
      expect(";");
      continue;
    }
    expect("export");
    if (is("declare")) i++;
    if (is("interface")) {
      i++;
      const name = ident();
      skipTypeParams();
      const bases = [];
      if (is("extends")) { i++; bases.push(heritage()); while (is(",")) { i++; bases.push(heritage()); } }
      const obj = members();
      obj.bases = bases;
      decl.interfaces.set(name, obj);
    } else if (is("enum")) {
      i++;
      const name = ident();
      expect("{");
      const values = new Map();
      while (!is("}")) {
        const key = ident();
        expect("=");
        const v = peek();
        if (v.t !== "str" && v.t !== "num") fail("expected an enum value");
        i++;
        values.set(key, v.v);
        if (is(",")) i++;
      }
      expect("}");
      decl.enums.set(name, values);
    } else if (is("type")) {
      i++;
      const name = ident();
      skipTypeParams();
      expect("=");
      decl.aliases.set(name, type());
      expect(";");
    } else if (is("const")) {
      while (!is(";")) i++; // default values: declared, not types
      i++;
    } else {
      fail("unsupported declaration");
    }
  }
  return decl;
}

const modules = new Map();
function moduleOf(relPath) {
  if (!modules.has(relPath)) modules.set(relPath, parseDts(relPath));
  return modules.get(relPath);
}

// A named type -> { decl, kind: "interface"|"enum"|"alias"|"literal", ... }.
function resolveRef(parts, decl) {
  const [first, ...rest] = parts;
  if (rest.length && decl.namespaces.has(first)) return resolveRef(rest, moduleOf(decl.namespaces.get(first)));
  if (rest.length === 1 && decl.enums.has(first)) {
    const values = decl.enums.get(first);
    if (!values.has(rest[0])) throw new Error(`${decl.file}: enum ${first} has no member ${rest[0]}`);
    return { kind: "literal", value: values.get(rest[0]) };
  }
  if (rest.length) throw new Error(`${decl.file}: cannot resolve ${parts.join(".")}`);
  if (decl.interfaces.has(first)) return { kind: "interface", decl, obj: decl.interfaces.get(first), name: first };
  if (decl.enums.has(first)) return { kind: "enum", values: [...decl.enums.get(first).values()], name: first };
  if (decl.aliases.has(first)) return { kind: "alias", decl, type: decl.aliases.get(first) };
  throw new Error(`${decl.file}: unknown type ${first}`);
}

// All properties of an interface or object type, its bases' included.
function propertiesOf(obj, decl) {
  const props = new Map();
  let index = obj.index;
  for (const base of obj.bases) {
    const r = resolveRef(base.parts, decl);
    if (r.kind !== "interface") throw new Error(`${decl.file}: base ${base.parts.join(".")} is not an interface`);
    const inherited = propertiesOf(r.obj, r.decl);
    for (const [k, v] of inherited.props) props.set(k, v);
    index ??= inherited.index;
  }
  for (const [k, v] of obj.props) props.set(k, { ...v, decl });
  return { props, index: index && { type: index, decl } };
}

const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const show = (v) => JSON.stringify(v)?.slice(0, 60);

// Errors of `value` against `type` (declared in `decl`), as TypeScript would
// report them for an object literal; [] when it conforms. `open` skips the
// unknown-property check (for types a plugin extends, like DataQuery).
function check(value, type, decl, path, open = false) {
  switch (type.kind) {
    case "any": case "unknown": return [];
    case "string": case "number": case "boolean":
      if (typeof value === type.kind && (type.kind !== "number" || Number.isFinite(value))) return [];
      return [`${path}: expected ${type.kind}, got ${show(value)}`];
    case "null": return value === null ? [] : [`${path}: expected null, got ${show(value)}`];
    case "undefined": case "never": return [`${path}: no value is allowed here, got ${show(value)}`];
    case "object":
      if (type.props.size === 0 && !type.index && type.bases.length === 0) { // TS `object` or {}
        return isPlainObject(value) ? [] : [`${path}: expected an object, got ${show(value)}`];
      }
      return checkObject(value, propertiesOf(type, decl), path, open);
    case "literal": return value === type.value ? [] : [`${path}: expected ${show(type.value)}, got ${show(value)}`];
    case "array":
      if (!Array.isArray(value)) return [`${path}: expected an array, got ${show(value)}`];
      return value.flatMap((v, k) => check(v, type.elem, decl, `${path}[${k}]`));
    case "union": {
      let best = null;
      for (const alt of type.alts) {
        const errs = check(value, alt, decl, path, open);
        if (errs.length === 0) return [];
        if (!best || errs.length < best.length) best = errs;
      }
      return [`${path}: matches none of the ${type.alts.length} alternatives; closest:`, ...best];
    }
    case "ref": {
      const r = resolveRef(type.parts, decl);
      if (r.kind === "interface") return checkObject(value, propertiesOf(r.obj, r.decl), path, open);
      if (r.kind === "enum") return r.values.includes(value) ? [] : [`${path}: ${show(value)} is not a ${r.name} (${r.values.join(", ")})`];
      if (r.kind === "alias") return check(value, r.type, r.decl, path, open);
      return check(value, r, decl, path, open);
    }
    default:
      throw new Error(`${decl.file}: the checker does not handle ${type.kind} types (at ${path})`);
  }
}

function checkObject(value, { props, index }, path, open) {
  if (!isPlainObject(value)) return [`${path}: expected an object, got ${show(value)}`];
  const errors = [];
  for (const [name, p] of props) {
    if (!(name in value)) {
      if (!p.optional) errors.push(`${path}.${name}: missing required property`);
      continue;
    }
    errors.push(...check(value[name], p.type, p.decl, `${path}.${name}`));
  }
  for (const key of Object.keys(value)) {
    if (props.has(key)) continue;
    if (index) errors.push(...check(value[key], index.type, index.decl, `${path}.${key}`));
    else if (!open) errors.push(`${path}.${key}: unknown property`);
  }
  return errors;
}

const DASHBOARD_TYPES = "dist/types/raw/dashboard/x/types.gen.d.ts";
const COMMON_TYPES = "dist/types/common/common.gen.d.ts";
const PANEL_TYPES = {
  timeseries: "dist/types/raw/composable/timeseries/panelcfg/x/types.gen.d.ts",
  stat: "dist/types/raw/composable/stat/panelcfg/x/types.gen.d.ts",
};
const typeRef = (file, name) => ({ type: { kind: "ref", parts: [name] }, decl: moduleOf(file) });

// Every schema error of a dashboard: the Dashboard kind, each panel's options
// and field config against its panel plugin's schema, each query against DataQuery.
function schemaErrors(d) {
  const { type, decl } = typeRef(DASHBOARD_TYPES, "Dashboard");
  const errors = check(d, type, decl, "dashboard");
  const dataQuery = typeRef(COMMON_TYPES, "DataQuery");
  (d.panels ?? []).forEach((p, k) => {
    const at = `dashboard.panels[${k}]`;
    if (p.type === "row") return;
    const file = PANEL_TYPES[p.type];
    if (!file) { errors.push(`${at}.type: ${show(p.type)} is not a panel this dashboard may use (${Object.keys(PANEL_TYPES).join(", ")})`); return; }
    const options = typeRef(file, "Options");
    errors.push(...check(p.options, options.type, options.decl, `${at}.options`));
    const custom = p.fieldConfig?.defaults?.custom;
    if (moduleOf(file).interfaces.has("FieldConfig")) {
      const fc = typeRef(file, "FieldConfig");
      errors.push(...check(custom ?? {}, fc.type, fc.decl, `${at}.fieldConfig.defaults.custom`));
    } else if (custom !== undefined) {
      errors.push(`${at}.fieldConfig.defaults.custom: the ${p.type} panel has no custom field config`);
    }
    (p.targets ?? []).forEach((t, j) => errors.push(...check(t, dataQuery.type, dataQuery.decl, `${at}.targets[${j}]`, true)));
  });
  return errors;
}

// --- Tests ----------------------------------------------------------------------

test("the dashboard conforms to @grafana/schema's dashboard and panel types", () => {
  assert.deepEqual(schemaErrors(dashboard), []);
});

test("the schema check rejects broken dashboards", () => {
  const firstOf = (type) => dashboard.panels.findIndex((p) => p.type === type);
  const ts = firstOf("timeseries");
  const stat = dashboard.panels.findIndex((p) => p.type === "stat" && p.fieldConfig.defaults.thresholds.steps.length > 1);
  const row = firstOf("row");
  const cases = [
    ["schemaVersion missing", (d) => delete d.schemaVersion, "dashboard.schemaVersion: missing required property"],
    ["gridPos.h a string", (d) => (d.panels[ts].gridPos.h = "8"), `dashboard.panels[${ts}].gridPos.h`],
    ["unknown variable type", (d) => (d.templating.list[0].type = "dropdown"), "dashboard.templating.list[0].type"],
    ["unknown panel property", (d) => (d.panels[ts].dataSource = DATASOURCE), `dashboard.panels[${ts}].dataSource`],
    ["bad legend placement", (d) => (d.panels[ts].options.legend.placement = "top"), `dashboard.panels[${ts}].options.legend.placement`],
    ["tooltip missing", (d) => delete d.panels[ts].options.tooltip, `dashboard.panels[${ts}].options.tooltip: missing required property`],
    ["bad draw style", (d) => (d.panels[ts].fieldConfig.defaults.custom.drawStyle = "curve"), `dashboard.panels[${ts}].fieldConfig.defaults.custom.drawStyle`],
    ["bad stat color mode", (d) => (d.panels[stat].options.colorMode = "rainbow"), `dashboard.panels[${stat}].options.colorMode`],
    ["threshold value a string", (d) => (d.panels[stat].fieldConfig.defaults.thresholds.steps[1].value = "0.05"), `dashboard.panels[${stat}].fieldConfig.defaults.thresholds.steps[1].value`],
    ["row collapsed not a boolean", (d) => (d.panels[row].collapsed = "no"), `dashboard.panels[${row}]`],
    ["query without refId", (d) => delete d.panels[ts].targets[0].refId, `dashboard.panels[${ts}].targets[0].refId: missing required property`],
    ["unknown panel type", (d) => (d.panels[ts].type = "graph"), `dashboard.panels[${ts}].type`],
  ];
  assert.ok(ts >= 0 && stat >= 0 && row >= 0);
  for (const [what, mutate, expected] of cases) {
    const d = structuredClone(dashboard);
    mutate(d);
    const errors = schemaErrors(d);
    assert.ok(errors.some((e) => e.startsWith(expected)), `${what}: expected an error at ${expected}, got ${JSON.stringify(errors)}`);
  }
});

test("the schema version is one Grafana 10 and later load as is or migrate forward", () => {
  // 36 made datasources references ({type, uid}); @grafana/schema's default is the newest.
  assert.ok(Number.isInteger(dashboard.schemaVersion));
  assert.ok(dashboard.schemaVersion >= 36 && dashboard.schemaVersion <= defaultDashboard.schemaVersion,
    `schemaVersion ${dashboard.schemaVersion} not in 36..${defaultDashboard.schemaVersion}`);
  assert.equal(typeof dashboard.uid, "string");
  assert.ok(dashboard.uid.length >= 1 && dashboard.uid.length <= 40, "uid must have 1-40 characters");
  assert.equal(dashboard.id, null, "an importable dashboard has no instance id");
});

test("templating: a Prometheus datasource variable and a multi-value model variable", () => {
  const vars = new Map(dashboard.templating.list.map((v) => [v.name, v]));
  const ds = vars.get("datasource");
  assert.ok(ds, "no datasource variable");
  assert.equal(ds.type, "datasource");
  assert.equal(ds.query, "prometheus");
  const model = vars.get("model");
  assert.ok(model, "no model variable");
  assert.equal(model.type, "query");
  assert.equal(typeof model.query === "string" ? model.query : model.query.query, "label_values(llmgate_requests_total, model)");
  assert.equal(model.multi, true);
  assert.equal(model.includeAll, true);
  const operation = vars.get("operation");
  assert.ok(operation, "no operation variable");
  assert.equal(typeof operation.query === "string" ? operation.query : operation.query.query,
    "label_values(llmgate_requests_total, gen_ai_operation_name)");
  assert.equal(operation.multi, true);
  assert.equal(operation.includeAll, true);
  for (const v of dashboard.templating.list.filter((x) => x.type === "query")) {
    assert.deepEqual(v.datasource, DATASOURCE, `variable ${v.name} must query the selected datasource`);
  }
  // Every variable is used somewhere.
  const text = JSON.stringify(dashboard.panels) + JSON.stringify(dashboard.templating.list.map((v) => v.query));
  for (const name of vars.keys()) assert.match(text, new RegExp(`\\$\\{?${name}\\b`), `variable ${name} is never used`);
});

test("panels: datasource variable everywhere, unique ids, a grid without overlaps", () => {
  const panels = dashboard.panels;
  assert.ok(panels.length >= 20, "the dashboard has too few panels");
  const ids = panels.map((p) => p.id);
  assert.ok(ids.every((id) => Number.isInteger(id) && id > 0), "panel ids must be positive integers");
  assert.equal(new Set(ids).size, ids.length, "panel ids must be unique");
  for (const p of panels) {
    const g = p.gridPos;
    assert.ok(g, `panel ${p.id} has no gridPos`);
    for (const k of Object.keys(defaultGridPos)) assert.ok(Number.isInteger(g[k]) && g[k] >= 0, `panel ${p.id} gridPos.${k}`);
    assert.ok(g.w >= 1 && g.h >= 1 && g.x + g.w <= 24, `panel ${p.id} does not fit the 24-column grid: ${JSON.stringify(g)}`);
    if (p.type === "row") {
      assert.equal(p.collapsed, false, `row ${p.id}: a collapsed row hides its panels in row.panels`);
      assert.deepEqual(p.panels, [], `row ${p.id} holds panels`);
      assert.deepEqual([g.w, g.h, g.x], [24, 1, 0], `row ${p.id} must span the grid`);
      continue;
    }
    assert.ok(["timeseries", "stat"].includes(p.type), `panel ${p.id}: type ${p.type}`);
    assert.ok(p.title && p.description, `panel ${p.id} needs a title and a description`);
    assert.deepEqual(p.datasource, DATASOURCE, `panel ${p.id} "${p.title}" must use the datasource variable`);
    assert.ok(p.targets.length >= 1, `panel ${p.id} has no query`);
    const refIds = p.targets.map((t) => t.refId);
    assert.equal(new Set(refIds).size, refIds.length, `panel ${p.id}: duplicate refId`);
    for (const t of p.targets) {
      assert.deepEqual(t.datasource, DATASOURCE, `panel ${p.id} ${t.refId} must use the datasource variable`);
      assert.ok(typeof t.expr === "string" && t.expr.trim(), `panel ${p.id} ${t.refId}: empty expr`);
      assert.equal(typeof t.legendFormat, "string", `panel ${p.id} ${t.refId}: legendFormat`);
      const extra = Object.keys(t).filter((k) => !["datasource", "editorMode", "expr", "legendFormat", "range", "instant", "refId", "interval", "format", "hide", "exemplar"].includes(k));
      assert.deepEqual(extra, [], `panel ${p.id} ${t.refId}: not a Prometheus query property`);
    }
  }
  // Array order is reading order, so each row's panels follow it.
  for (let k = 1; k < panels.length; k++) {
    const [a, b] = [panels[k - 1].gridPos, panels[k].gridPos];
    assert.ok(a.y < b.y || (a.y === b.y && a.x < b.x), `panel ${panels[k].id} is out of reading order`);
  }
  const overlaps = [];
  for (let i = 0; i < panels.length; i++) {
    for (let j = i + 1; j < panels.length; j++) {
      const [a, b] = [panels[i].gridPos, panels[j].gridPos];
      if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) overlaps.push(`${panels[i].id}/${panels[j].id}`);
    }
  }
  assert.deepEqual(overlaps, [], "overlapping panels");
});

// Grafana's values for the variables: a multi-value or All selection becomes a
// regex alternation of regex-escaped values.
const VARIABLE_VALUES = {
  model: "(m1|fast-chat)",
  operation: "(chat|responses)",
  deployment: "(p1/up-1|groq/llama-3\\\\.3-70b)",
  datasource: "prometheus",
  __rate_interval: "1m",
  __interval: "15s",
  __range: "3h",
};
function substitute(expr) {
  return expr.replace(/\$\{([A-Za-z_]\w*)(?::[a-z]+)?\}|\$([A-Za-z_]\w*)|\[\[([A-Za-z_]\w*)\]\]/g, (all, a, b, c) => {
    const name = a ?? b ?? c;
    if (!(name in VARIABLE_VALUES)) throw new Error(`unknown dashboard variable ${all} in: ${expr}`);
    return VARIABLE_VALUES[name];
  });
}

function promtoolCheck(rulesDoc) {
  const dir = mkdtempSync(join(tmpdir(), "llmgate-grafana-"));
  try {
    const file = join(dir, "dashboard-queries.yaml");
    writeFileSync(file, YAML.stringify(rulesDoc));
    return spawnSync(promtool, ["check", "rules", "--lint=all", "--lint-fatal", file], { encoding: "utf8" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("every query parses with promtool once the variables are filled in", (t) => {
  if (!promtool) return t.skip(NO_PROMTOOL);
  const exprs = dashboardExpressions(dashboard);
  const ruleList = exprs.map(({ where, expr }, k) => ({
    record: `dashboard:query:${k}`,
    expr: substitute(expr),
    labels: { where: where.replace(/"/g, "'") },
  }));
  for (const r of ruleList) assert.doesNotMatch(r.expr, /\$/, `a variable was left in: ${r.expr}`);
  const res = promtoolCheck({ groups: [{ name: "dashboard", rules: ruleList }] });
  assert.equal(res.status, 0, `promtool check rules failed:\n${res.stdout}\n${res.stderr}`);
  assert.equal(res.stderr, "", "promtool complained");
  assert.match(res.stdout, new RegExp(`SUCCESS: ${ruleList.length} rules found`));
  // The same check fails on a broken query (so the one above really parses them).
  const bad = promtoolCheck({ groups: [{ name: "bad", rules: [{ record: "dashboard:query:bad", expr: substitute(`sum by (le (rate(llmgate_requests_total{model=~"$model"}[$__rate_interval]))`) }] }] });
  assert.notEqual(bad.status, 0, "promtool accepted a broken expression");
});

test("queries read only llmgate's metrics and the recording rules of rules.yaml", () => {
  const problems = [];
  let selectors = 0;
  for (const { where, expr } of dashboardExpressions(dashboard)) {
    for (const sel of promqlSelectors(expr)) {
      selectors++;
      problems.push(...selectorProblems(sel, recordNames).map((p) => `${where}: ${p}`));
      // Quantiles come from the recorded bucket rates, not from raw buckets.
      if (resolveMetric(sel.name)?.suffix === "bucket") problems.push(`${where}: reads ${sel.name}; use the llmgate:*_bucket:rate5m rules`);
    }
  }
  assert.ok(selectors > 40, `only ${selectors} selectors found`);
  assert.deepEqual(problems, []);
});

// The labels a recording rule's series carry, from its expression: the labels
// of the rule it starts with, the by () list of its aggregation, or, for
// histogram_quantile over a recorded bucket rate, that rule's labels but le.
function recordLabels(name, seen = new Set()) {
  const rule = rules.groups.flatMap((g) => g.rules).find((r) => r.record === name);
  assert.ok(rule && !seen.has(name), `cannot tell the labels of ${name}`);
  seen.add(name);
  const expr = rule.expr.trim();
  const lead = /^([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:[/*+-]|$)/.exec(expr);
  if (lead && recordNames.has(lead[1])) return recordLabels(lead[1], seen);
  const hq = /^histogram_quantile\(\s*[0-9.]+\s*,\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*\)$/.exec(expr);
  if (hq) return recordLabels(hq[1], seen).filter((l) => l !== "le");
  const by = /\bby\s*\(([^)]*)\)/.exec(expr);
  assert.ok(by, `cannot tell the labels of ${name}`);
  return by[1].split(",").map((s) => s.trim());
}

// The dashboard's selectors of series that carry one of `labelNames` (as
// exported, or kept by a recording rule): how many filter it by `variable`,
// and which do not.
function filteredBy(labelNames, variable) {
  const problems = [];
  let filtered = 0;
  for (const { where, expr, panel } of dashboardExpressions(dashboard)) {
    if (!panel) continue;
    for (const sel of promqlSelectors(expr)) {
      const labels = recordNames.has(sel.name) ? recordLabels(sel.name) : Object.keys(resolveMetric(sel.name)?.spec.labels ?? {});
      const label = labels.find((l) => labelNames.includes(l));
      if (!label) continue;
      if (sel.matchers.some((m) => m.label === label && m.op === "=~" && m.value.includes(variable))) filtered++;
      else problems.push(`${where}: ${sel.name} is not filtered by ${label}=~"${variable}"`);
    }
  }
  return { problems, filtered };
}

test("every query of a per-model series filters by $model", () => {
  assert.deepEqual(recordLabels("llmgate:ttft_seconds:p99_5m"), ["namespace", "job", "model", "operation", "deployment"]);
  assert.deepEqual(recordLabels("llmgate:route_decisions:share_rate5m"), ["namespace", "job", "model", "deployment"]);
  assert.deepEqual(recordLabels("llmgate:fallbacks_per_request:ratio_rate5m"), ["namespace", "job"]);
  const { problems, filtered } = filteredBy(["model", "gen_ai_request_model"], "$model");
  assert.deepEqual(problems, []);
  assert.ok(filtered >= 20, `only ${filtered} selectors use $model`);
});

test("every query of a per-operation series filters by $operation", () => {
  const { problems, filtered } = filteredBy(["operation", "gen_ai_operation_name"], "$operation");
  assert.deepEqual(problems, []);
  assert.ok(filtered >= 10, `only ${filtered} selectors use $operation`);
});

test("the dashboard shows what operators need", () => {
  const used = new Set();
  for (const { expr } of dashboardExpressions(dashboard)) {
    for (const sel of promqlSelectors(expr)) used.add(recordNames.has(sel.name) ? sel.name : resolveMetric(sel.name)?.family);
  }
  const wanted = [
    "llmgate:ttft_seconds_bucket:rate5m", "llmgate_router_ttft_estimate_seconds", "llmgate_router_ttft_window_seconds",
    "llmgate_router_output_tokens_per_second", "llmgate:requests:rate5m", "llmgate:upstream_attempts:rate5m",
    "llmgate:fallbacks:rate5m", "llmgate:hedges:rate5m", "llmgate:route_decisions:rate5m", "llmgate_router_deployment_state",
    "llmgate_router_ejections_total", "llmgate:cost_usd:rate5m", "llmgate_requests_in_flight",
    "llmgate:gateway_overhead_seconds_bucket:rate5m", "llmgate:tokens:rate5m", "llmgate_config_reloads_total",
  ];
  assert.deepEqual(wanted.filter((w) => !used.has(w)), []);
  // Each gateway metric the dashboard reads directly is catalogued (the rest come through rules).
  assert.deepEqual([...used].filter((u) => u && !u.includes(":") && !(u in GATEWAY_METRICS)), []);
  const titles = dashboard.panels.filter((p) => p.type === "row").map((p) => p.title);
  assert.ok(titles.length >= 4, "group the panels in rows");
});
