// deploy/prometheus/rules.yaml: promtool accepts it without a complaint, its
// unit tests (rules.test.yaml) pass, every alert is tested both firing and not
// firing, and those tests really depend on the rules: each alert's expression,
// replaced by one that never (or always) fires, and each tested recording rule,
// doubled, make `promtool test rules` fail.
// Run by run.sh (through ctest), which sets LLMGATE_SOURCE_DIR. Skips the
// promtool tests, saying why, if promtool is absent.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import YAML from "yaml";
import { promqlSelectors, selectorProblems, ruleExpressions, recordingRuleNames } from "./lib/promql.mjs";
import { which } from "../support/node_support.mjs";

const SRC = process.env.LLMGATE_SOURCE_DIR;
assert.ok(SRC, "LLMGATE_SOURCE_DIR must be set (run through tests/deploy/run.sh)");
const RULES = join(SRC, "deploy/prometheus/rules.yaml");
const TESTS = join(SRC, "deploy/prometheus/rules.test.yaml");

const rules = YAML.parse(readFileSync(RULES, "utf8"));
const unitTests = YAML.parse(readFileSync(TESTS, "utf8"));
const allRules = rules.groups.flatMap((g) => g.rules);
const alerts = allRules.filter((r) => r.alert);
const recordNames = recordingRuleNames(rules);

const promtool = which("promtool");
const NO_PROMTOOL = "promtool is not installed (Debian package prometheus; tools/setup.sh installs it)";

const dir = mkdtempSync(join(tmpdir(), "llmgate-rules-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const run = (...args) => spawnSync(promtool, args, { encoding: "utf8" });

// Runs `promtool test rules` on `tests` (a parsed test file) against `rulesDoc`.
function unitTest(rulesDoc, tests, name) {
  const sub = join(dir, name);
  writeFileSync(join(dir, `${name}.rules.yaml`), YAML.stringify(rulesDoc));
  writeFileSync(`${sub}.test.yaml`, YAML.stringify({ ...tests, rule_files: [`${name}.rules.yaml`] }));
  return run("test", "rules", `${sub}.test.yaml`);
}

// What promtool prints when an alert's expectation (not the file) is wrong.
const expectationFailed = (alert) => new RegExp(`alertname: ${alert}, time: [^\\n]*\\n\\s+exp:\\[[^]*got:\\[`);

// A copy of the rules with `change(rule)` applied to the rule named `name`.
function mutated(name, change) {
  const copy = structuredClone(rules);
  const rule = copy.groups.flatMap((g) => g.rules).find((r) => (r.alert ?? r.record) === name);
  change(rule);
  return copy;
}

test("promtool check rules accepts rules.yaml without a complaint", (t) => {
  if (!promtool) return t.skip(NO_PROMTOOL);
  const res = run("check", "rules", "--lint=all", "--lint-fatal", RULES);
  assert.equal(res.status, 0, `${res.stdout}\n${res.stderr}`);
  assert.equal(res.stderr, "", "promtool complained");
  assert.match(res.stdout, new RegExp(`SUCCESS: ${allRules.length} rules found`));
});

test("promtool test rules passes rules.test.yaml", (t) => {
  if (!promtool) return t.skip(NO_PROMTOOL);
  const res = run("test", "rules", TESTS);
  assert.equal(res.status, 0, `${res.stdout}\n${res.stderr}`);
  assert.match(res.stdout, /SUCCESS/);
});

test("rules are named, labelled and annotated consistently", () => {
  for (const r of allRules.filter((x) => x.record)) {
    assert.match(r.record, /^llmgate:[a-z0-9_]+:[a-z0-9_]+$/, `recording rule ${r.record}: not level:metric:operations`);
  }
  assert.equal(recordNames.size, allRules.filter((r) => r.record).length, "a recording rule name is used twice");
  assert.ok(alerts.length >= 7);
  for (const a of alerts) {
    assert.match(a.alert, /^Llmgate[A-Za-z]+$/, `alert ${a.alert}`);
    assert.ok(["critical", "warning"].includes(a.labels?.severity), `${a.alert}: severity critical or warning`);
    assert.ok(a.annotations?.summary?.trim() && a.annotations?.description?.trim(), `${a.alert}: summary and description`);
    assert.match(String(a.for ?? ""), /^[0-9]+[smh]$/, `${a.alert}: needs a for: duration`);
  }
  const problems = ruleExpressions(rules).flatMap(({ where, expr }) =>
    promqlSelectors(expr).flatMap((sel) => selectorProblems(sel, recordNames).map((p) => `${where}: ${p}`)));
  assert.deepEqual(problems, []);
});

test("every alert is unit-tested firing and not firing, and a recording rule's value is tested", () => {
  for (const a of alerts) {
    const cases = unitTests.tests.flatMap((g) => g.alert_rule_test ?? []).filter((c) => c.alertname === a.alert);
    assert.ok(cases.some((c) => (c.exp_alerts ?? []).length > 0), `${a.alert}: no test where it fires`);
    assert.ok(cases.some((c) => (c.exp_alerts ?? []).length === 0), `${a.alert}: no test where it stays silent`);
  }
  const tested = unitTests.tests.flatMap((g) => g.promql_expr_test ?? [])
    .filter((c) => (c.exp_samples ?? []).length > 0)
    .flatMap((c) => promqlSelectors(c.expr).map((s) => s.name))
    .filter((n) => recordNames.has(n));
  assert.ok(new Set(tested).size >= 5, `only ${new Set(tested).size} recording rules have tested values`);
});

test("the unit tests fail when an alert never fires or always fires", (t) => {
  if (!promtool) return t.skip(NO_PROMTOOL);
  for (const a of alerts) {
    // Only the test groups about this alert, to keep it quick.
    const groups = unitTests.tests.filter((g) => (g.alert_rule_test ?? []).some((c) => c.alertname === a.alert));
    const never = unitTest(mutated(a.alert, (r) => (r.expr = "vector(1) == 2")), { ...unitTests, tests: groups }, `never-${a.alert}`);
    assert.notEqual(never.status, 0, `${a.alert} never firing still passes its tests`);
    assert.match(never.stdout + never.stderr, expectationFailed(a.alert), `${a.alert}: failed for another reason`);
    // Keep only the "stays silent" expectations: an always-firing alert must break one.
    const silent = groups.map((g) => ({
      ...g,
      promql_expr_test: undefined,
      alert_rule_test: g.alert_rule_test.filter((c) => c.alertname === a.alert && (c.exp_alerts ?? []).length === 0),
    })).filter((g) => g.alert_rule_test.length > 0);
    const baseline = unitTest(rules, { ...unitTests, tests: silent }, `silent-${a.alert}`);
    assert.equal(baseline.status, 0, `${a.alert}: ${baseline.stdout}${baseline.stderr}`);
    const always = unitTest(mutated(a.alert, (r) => { r.expr = "vector(1)"; delete r.for; }), { ...unitTests, tests: silent }, `always-${a.alert}`);
    assert.notEqual(always.status, 0, `${a.alert} always firing still passes its tests`);
    assert.match(always.stdout + always.stderr, expectationFailed(a.alert), `${a.alert}: failed for another reason`);
  }
});

test("the unit tests fail when a tested recording rule's value changes", (t) => {
  if (!promtool) return t.skip(NO_PROMTOOL);
  const groups = unitTests.tests.filter((g) => (g.promql_expr_test ?? []).length > 0);
  const tested = new Set(groups.flatMap((g) => g.promql_expr_test)
    .flatMap((c) => promqlSelectors(c.expr).map((s) => s.name))
    .filter((n) => recordNames.has(n)));
  for (const name of tested) {
    const res = unitTest(mutated(name, (r) => (r.expr = `(${r.expr}) * 2`)), { ...unitTests, tests: groups.map((g) => ({ ...g, alert_rule_test: undefined })) }, `double-${name.replace(/:/g, "_")}`);
    assert.notEqual(res.status, 0, `${name} doubled still passes its tests`);
    assert.match(res.stdout + res.stderr, /expr: .*\n\s+exp: .*\n\s+got: /, `${name}: failed for another reason`);
  }
});
