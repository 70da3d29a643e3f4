// A PromQL selector scanner and the checks built on it, shared by the
// deployment-artifact tests: which metrics, labels and label values the queries
// of deploy/grafana/llmgate.json and deploy/prometheus/rules.yaml select, and
// whether llmgate (lib/metrics_catalogue.mjs) exports them.
import { SCRAPE_LABELS, resolveMetric } from "./metrics_catalogue.mjs";

const PROMQL_FUNCTIONS = new Set(("abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes " +
  "clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year days_in_month deg delta deriv " +
  "double_exponential_smoothing exp floor histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev " +
  "histogram_stdvar histogram_sum holt_winters hour idelta increase irate label_join label_replace last_over_time ln log10 " +
  "log2 mad_over_time max_over_time min_over_time minute month pi predict_linear present_over_time quantile_over_time rad " +
  "rate resets round scalar sgn sin sinh sort sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time " +
  "stdvar_over_time sum_over_time tan tanh time timestamp vector year").split(" "));
const PROMQL_AGGREGATIONS = new Set("sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio".split(" "));
const PROMQL_KEYWORDS = new Set("bool offset and or unless atan2 inf nan start end".split(" "));
const PROMQL_LABEL_LISTS = new Set("by without on ignoring group_left group_right".split(" "));

// The vector selectors of a PromQL expression, in order: [{name, matchers:
// [{label, op, value}]}] (name null for a bare {...} selector). A small scanner,
// not a full parser: promtool checks the syntax; this finds what is selected.
// Throws on a function name it does not know, so a typo cannot pass as a metric.
export function promqlSelectors(expr) {
  const out = [];
  let i = 0;
  const n = expr.length;
  const fail = (what) => { throw new Error(`${what} at offset ${i} of: ${expr}`); };
  const ws = () => { while (i < n && /\s/.test(expr[i])) i++; };
  const readString = () => {
    const quote = expr[i++];
    let s = "";
    while (i < n && expr[i] !== quote) {
      if (expr[i] === "\\" && quote !== "`") { s += expr[i + 1]; i += 2; } else s += expr[i++];
    }
    if (i >= n) fail("unterminated string");
    i++;
    return s;
  };
  const skipBalanced = (open, close) => {
    let depth = 0;
    do {
      if (expr[i] === '"' || expr[i] === "'" || expr[i] === "`") { readString(); continue; }
      if (expr[i] === open) depth++;
      else if (expr[i] === close) depth--;
      i++;
    } while (i < n && depth > 0);
    if (depth !== 0) fail(`unbalanced ${open}`);
  };
  const readMatchers = () => {
    const matchers = [];
    i++; // {
    for (;;) {
      ws();
      if (expr[i] === "}") { i++; return matchers; }
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(expr.slice(i));
      if (!m) fail("expected a label name");
      i += m[0].length;
      ws();
      const op = /^(=~|!~|!=|=)/.exec(expr.slice(i));
      if (!op) fail("expected a matcher operator");
      i += op[0].length;
      ws();
      if (!`"'\``.includes(expr[i])) fail("expected a quoted label value");
      matchers.push({ label: m[0], op: op[0], value: readString() });
      ws();
      if (expr[i] === ",") i++;
    }
  };
  while (i < n) {
    const c = expr[i];
    if (/\s/.test(c)) { i++; continue; }
    if (c === "#") { while (i < n && expr[i] !== "\n") i++; continue; }
    if (c === '"' || c === "'" || c === "`") { readString(); continue; }
    if (c === "[") { skipBalanced("[", "]"); continue; }
    if (c === "{") { out.push({ name: null, matchers: readMatchers() }); continue; }
    const num = /^(?:0x[0-9a-f]+|(?:[0-9]+(?:ms|[smhdwy]))+|(?:[0-9]*\.)?[0-9]+(?:e[-+]?[0-9]+)?)/i.exec(expr.slice(i));
    if (/[0-9.]/.test(c) && num) { i += num[0].length; continue; }
    const id = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(expr.slice(i));
    if (!id) { i++; continue; } // operators, parentheses, commas
    const word = id[0];
    i += word.length;
    let j = i;
    while (j < n && /\s/.test(expr[j])) j++;
    if (PROMQL_LABEL_LISTS.has(word)) {
      if (expr[j] === "(") { i = j; skipBalanced("(", ")"); }
      continue;
    }
    if (PROMQL_KEYWORDS.has(word.toLowerCase())) continue;
    if (PROMQL_AGGREGATIONS.has(word) && (expr[j] === "(" || /^(by|without)\b/.test(expr.slice(j)))) continue;
    if (expr[j] === "(") {
      if (!PROMQL_FUNCTIONS.has(word)) fail(`unknown function ${word}`);
      continue;
    }
    const sel = { name: word, matchers: [] };
    if (expr[j] === "{") { i = j; sel.matchers = readMatchers(); }
    out.push(sel);
  }
  return out;
}

// The literal values a matcher names: "a" for ="a"/!="a", ["a","b"] for =~"a|b";
// null when the value is a pattern or a dashboard variable.
export function literalValues({ op, value }) {
  if (op === "=" || op === "!=") return [value];
  if (/^[A-Za-z0-9_.+-]+(\|[A-Za-z0-9_.+-]+)*$/.test(value)) return value.split("|");
  return null;
}

// Problems with one selector: an unknown metric, a label the metric does not
// have, or a value outside the label's fixed set. Recording rules (names in
// `recordNames`) are only checked to exist.
export function selectorProblems(sel, recordNames) {
  if (sel.name === null) return [`a selector without a metric name: {${sel.matchers.map((m) => m.label).join(",")}}`];
  if (recordNames.has(sel.name)) return [];
  if (sel.name.includes(":")) return [`${sel.name}: not a recording rule of deploy/prometheus/rules.yaml`];
  const r = resolveMetric(sel.name);
  if (!r) return [`${sel.name}: not a metric llmgate exports`];
  const problems = [];
  for (const m of sel.matchers) {
    if (m.label === "__name__" || SCRAPE_LABELS.includes(m.label)) continue;
    if (m.label === "le" && r.suffix === "bucket") continue;
    if (!(m.label in r.spec.labels)) { problems.push(`${sel.name}: has no label ${m.label}`); continue; }
    const allowed = r.spec.labels[m.label];
    const values = literalValues(m);
    if (allowed && values) {
      for (const v of values) if (!allowed.includes(v)) problems.push(`${sel.name}: ${m.label}="${v}" is not one of ${allowed.join(", ")}`);
    }
  }
  return problems;
}

// Every PromQL expression of a Grafana dashboard: [{where, expr}], targets and
// the selectors of label_values() variable queries.
export function dashboardExpressions(dashboard) {
  const out = [];
  const walk = (panels) => {
    for (const p of panels ?? []) {
      for (const t of p.targets ?? []) out.push({ where: `panel ${p.id} "${p.title}" ${t.refId}`, expr: t.expr, panel: p });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating?.list ?? []) {
    if (v.type !== "query") continue;
    const q = typeof v.query === "string" ? v.query : v.query?.query;
    const m = /^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$/s.exec(q ?? "");
    if (!m) throw new Error(`variable ${v.name}: not a label_values(selector, label) query: ${q}`);
    out.push({ where: `variable ${v.name}`, expr: m[1], variable: v, label: m[2] });
  }
  return out;
}

// Rule files (parsed YAML): [{where, expr}] and the set of recording rule names.
export function ruleExpressions(rulesDoc) {
  return rulesDoc.groups.flatMap((g) => g.rules.map((r) => ({ where: `${g.name}/${r.record ?? r.alert}`, expr: r.expr, rule: r })));
}
export function recordingRuleNames(rulesDoc) {
  return new Set(rulesDoc.groups.flatMap((g) => g.rules.filter((r) => r.record).map((r) => r.record)));
}
