#!/usr/bin/env python3
"""Checks the Grafana dashboard and the Prometheus rules of contrib/ against the metrics electd
exports (scripts/test.sh runs it, after promtool; Python's standard library only).

- The dashboard is valid JSON, a Grafana dashboard (schemaVersion, panels with ids of their
  own, a `datasource` variable that every panel and query uses), and each PromQL expression in
  it (panel targets, variable queries) names only metrics src/metrics.rs registers or records
  of the rules file.
- Each expression of the rules file names only those metrics, its own records, or Prometheus'
  own `up`.
- The rules' unit tests (for `promtool test rules`) test every alert both ways: at least one
  evaluation expects it to fire, and one expects it not to (`exp_alerts: []`).

The metric names are read from src/metrics.rs as prometheus-client names them: the prefix
`electd_`, then the registered name, `_seconds` for `Unit::Seconds`, and `_total` for a counter
or `_bucket`, `_sum`, `_count` for a histogram. A registration this reader cannot type fails
the check, so that a new kind of registration is not missed silently.

Usage: check_dashboard.py [--root DIR] [--rules FILE] [--tests FILE] [--dashboard FILE]
                          [--metrics FILE] [-v]
Exit status 0 when everything holds, 1 otherwise (each problem on a line of its own).
"""

import argparse
import json
import os
import re
import sys

PREFIX = "electd_"
# Names PromQL gives a meaning of its own; never metric names.
KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "inf", "nan", "atan2",
}
# Series Prometheus writes itself for every target; the rules may read them.
PROMETHEUS_OWN = {"up"}


def rust_string():
    """A Rust string literal (escapes and line continuations included)."""
    return r'"(?:[^"\\]|\\.)*"'


def exported_metrics(text):
    """The metric names src/metrics.rs exports, as a scraper sees them (classic text)."""
    text = text.split("#[cfg(test)]")[0]
    problems = []
    families = {}  # base name (with unit) -> kind

    def add(name, kind, unit):
        # The process's figures are registered outside the electd_ prefix (process_*).
        base = name if name.startswith("process_") else PREFIX + name
        suffix = {"Seconds": "_seconds", "Bytes": "_bytes"}.get(unit, "")
        families[base + suffix] = kind

    # The helpers of src/metrics.rs: counter(reg, "name", …), counter_family(…), gauge(…),
    # seconds_gauge(…).
    helpers = {
        "counter": ("counter", None),
        "counter_family": ("counter", None),
        "gauge": ("gauge", None),
        "seconds_gauge": ("gauge", "Seconds"),
    }
    for m in re.finditer(
        r"\b(counter_family|counter|seconds_gauge|gauge)\(\s*(?:&mut\s+)?reg\s*,\s*\"(\w+)\"", text
    ):
        kind, unit = helpers[m.group(1)]
        add(m.group(2), kind, unit)
    # Direct registrations: reg.register("name", "help", var) and
    # reg.register_with_unit("name", "help", Unit::X, var); the kind from `let var = …`.
    direct = re.compile(
        r"\breg\.register(?:_with_unit)?\(\s*\"(\w+)\"\s*,\s*" + rust_string()
        + r"\s*,\s*(?:Unit::(\w+)\s*,\s*)?([\w.()]+)",
        re.S,
    )
    for m in direct.finditer(text):
        name, unit, var = m.group(1), m.group(2), m.group(3).split(".")[0]
        decl = re.search(
            r"\blet\s+" + re.escape(var) + r"\s*=\s*(?:Family::<\s*\w+\s*,\s*)?(Gauge|Counter|Histogram)\b",
            text,
        )
        if not decl:
            problems.append(
                f"src/metrics.rs: cannot tell the kind of metric {name!r} (registered from {var!r})"
            )
            continue
        add(name, decl.group(1).lower(), unit)
    # The histograms of register_timings: a table of ("name", "help", &t.x), registered with
    # Unit::Seconds.
    timings = re.search(r"fn register_timings\b.*?\n}\n", text, re.S)
    if timings:
        body = timings.group(0)
        if "Unit::Seconds" not in body:
            problems.append("src/metrics.rs: register_timings no longer reads as seconds histograms")
        for m in re.finditer(r"\(\s*\"(\w+)\"\s*,\s*" + rust_string(), body, re.S):
            add(m.group(1), "histogram", "Seconds")
    names = set()
    for base, kind in families.items():
        if kind == "counter":
            names.add(base + "_total")
        elif kind == "histogram":
            names.update(base + s for s in ("_bucket", "_sum", "_count"))
        else:
            names.add(base)
    if not names:
        problems.append("src/metrics.rs: no metric registration found")
    return names, problems


def metric_names(expr):
    """The metric (and record) names a PromQL expression reads."""
    # Grafana's label_values(METRIC, LABEL): the label is no metric.
    expr = re.sub(r"label_values\(\s*([^,()]*?)\s*,\s*\w+\s*\)", r" \1 ", expr)
    expr = re.sub(r"label_values\(\s*(\w+)\s*\)", " ", expr)
    expr = re.sub(r"\$\{[^}]*\}|\$\w+", " ", expr)  # Grafana variables
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)  # strings
    expr = re.sub(r"\{[^{}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # ranges and subqueries
    expr = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr
    )  # label lists
    names = []
    for m in re.finditer(r"(?<![\w:.])[A-Za-z_:][\w:]*", expr):
        name = m.group(0)
        if re.match(r"\s*\(", expr[m.end():]):
            continue  # a function or an aggregation
        if name.lower() in KEYWORDS:
            continue
        names.append(name)
    return names


def rules_file(text):
    """(records, expressions) of a Prometheus rules file, read line by line (no YAML library
    in the standard library): `record: NAME` and `expr: …` (one line, quoted or not, or a
    block scalar `|` / `>` and its more indented lines)."""
    records, exprs = [], []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*(?:-\s+)?record:\s*(\S+)\s*$", line)
        if m:
            records.append(m.group(1).strip("'\""))
        m = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*?)\s*$", line)
        if m:
            value = m.group(2)
            if value[:1] in ("|", ">"):
                indent = len(m.group(1))
                block = []
                i += 1
                while i < len(lines) and (
                    not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
                ):
                    block.append(lines[i].strip())
                    i += 1
                exprs.append((" ".join(block), line.strip()))
                continue
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            exprs.append((value, line.strip()))
        i += 1
    return records, exprs


def untested_alerts(rules_text, tests_text):
    """Problems with the unit tests' coverage: alerts of the rules that no evaluation expects to
    fire, or none expects not to. Read line by line: each `alertname:` of an alert_rule_test
    and the `exp_alerts` that follows it, `[]` or a list of `exp_labels`."""
    alerts = re.findall(r"^\s*-\s*alert:\s*(\S+)\s*$", rules_text, re.M)
    fires, quiet, problems = set(), set(), []
    lines = tests_text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^\s*(?:-\s+)?alertname:\s*(\S+)\s*$", line)
        if not m:
            continue
        verdict = None
        for nxt in lines[i + 1:]:
            if re.match(r"^\s*-\s*(eval_time|name|alertname|expr):", nxt):
                break
            if re.match(r"^\s*exp_alerts:\s*\[\s*\]\s*$", nxt):
                verdict = "quiet"
                break
            if re.match(r"^\s*-\s*exp_labels:", nxt):
                verdict = "fires"
                break
        if verdict is None:
            problems.append(f"the test of {m.group(1)} at line {i + 1} expects nothing readable")
        (fires if verdict == "fires" else quiet).add(m.group(1))
    for a in alerts:
        if a not in fires:
            problems.append(f"no test expects {a} to fire")
        if a not in quiet:
            problems.append(f"no test expects {a} not to fire (exp_alerts: [])")
    for a in (fires | quiet) - set(alerts):
        problems.append(f"the tests name {a}, which the rules do not define")
    return alerts, problems


def dashboard_problems(dash, known):
    problems, exprs = [], []
    if not isinstance(dash, dict):
        return ["the dashboard is not a JSON object"], exprs
    if not isinstance(dash.get("schemaVersion"), int):
        problems.append("no integer schemaVersion")
    if not dash.get("title") or not dash.get("uid"):
        problems.append("no title or uid")
    variables = dash.get("templating", {}).get("list", [])
    ds_vars = [v.get("name") for v in variables if v.get("type") == "datasource"]
    if not ds_vars:
        problems.append("no datasource variable in templating")
    ds_refs = {"${%s}" % n for n in ds_vars} | {"$%s" % n for n in ds_vars}

    def uses_variable(ds, where):
        uid = ds.get("uid") if isinstance(ds, dict) else ds
        if uid not in ds_refs:
            problems.append(f"{where}: datasource {uid!r} is not the datasource variable")

    panels = []

    def walk(ps):
        for p in ps:
            panels.append(p)
            walk(p.get("panels", []))  # rows hold panels of their own

    walk(dash.get("panels", []))
    if not panels:
        problems.append("no panels")
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)):
        problems.append(f"panel ids repeat: {ids}")
    for p in panels:
        if p.get("type") == "row":
            continue
        where = f"panel {p.get('id')} {p.get('title')!r}"
        if "gridPos" not in p:
            problems.append(f"{where}: no gridPos")
        uses_variable(p.get("datasource"), where)
        targets = p.get("targets", [])
        if not targets:
            problems.append(f"{where}: no targets")
        for t in targets:
            if "datasource" in t:
                uses_variable(t["datasource"], f"{where} target {t.get('refId')}")
            if not t.get("expr"):
                problems.append(f"{where} target {t.get('refId')}: no expr")
                continue
            exprs.append((t["expr"], where))
    for v in variables:
        if v.get("type") != "query":
            continue
        where = f"variable {v.get('name')!r}"
        uses_variable(v.get("datasource"), where)
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        for e in (q, v.get("definition")):
            if e:
                exprs.append((e, where))
    for expr, where in exprs:
        for name in metric_names(expr):
            if name not in known:
                problems.append(f"{where}: {name!r} is neither a metric of src/metrics.rs nor a record of the rules ({expr})")
    return problems, exprs


def runbooks(rules_text, operations_text):
    """Problems with the alerts' runbooks: an alert without `runbook_url`, or one that names no
    row of docs/operations.md (`docs/operations.md#<id>` and an `<a id="<id>">` there)."""
    problems = []
    blocks = re.split(r"^\s*-\s*alert:\s*", rules_text, flags=re.M)[1:]
    for block in blocks:
        name = block.split()[0]
        m = re.search(r'^\s*runbook_url:\s*"docs/operations\.md#([\w-]+)"', block, re.M)
        if not m:
            problems.append(f"{name} has no runbook_url into docs/operations.md")
        elif f'<a id="{m.group(1)}"></a>' not in operations_text:
            problems.append(f"{name}'s runbook_url names #{m.group(1)}, which docs/operations.md does not have")
    if not blocks:
        problems.append("no alert found")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--root", default=root)
    ap.add_argument("--rules", default="contrib/prometheus/electd-rules.yml")
    ap.add_argument("--tests", default="contrib/prometheus/electd-rules.test.yml")
    ap.add_argument("--dashboard", default="contrib/grafana/electd-dashboard.json")
    ap.add_argument("--metrics", default="src/metrics.rs")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    path = lambda p: p if os.path.isabs(p) else os.path.join(a.root, p)

    problems = []
    with open(path(a.metrics), encoding="utf-8") as f:
        metrics, mp = exported_metrics(f.read())
    problems += mp
    with open(path(a.rules), encoding="utf-8") as f:
        rules_text = f.read()
    records, rule_exprs = rules_file(rules_text)
    with open(path(a.tests), encoding="utf-8") as f:
        alerts, tp = untested_alerts(rules_text, f.read())
    problems += [f"{a.tests}: {p}" for p in tp]
    with open(path("docs/operations.md"), encoding="utf-8") as f:
        problems += [f"{a.rules}: {p}" for p in runbooks(rules_text, f.read())]
    if not records or not rule_exprs:
        problems.append(f"{a.rules}: no records or no expressions found")
    for expr, where in rule_exprs:
        for name in metric_names(expr):
            if name not in metrics | set(records) | PROMETHEUS_OWN:
                problems.append(f"{a.rules}: {name!r} is not a metric of src/metrics.rs, a record or Prometheus' own ({where})")
    try:
        with open(path(a.dashboard), encoding="utf-8") as f:
            dash = json.load(f)
    except ValueError as e:
        problems.append(f"{a.dashboard}: not valid JSON: {e}")
        dash = None
    dash_exprs = []
    if dash is not None:
        dp, dash_exprs = dashboard_problems(dash, metrics | set(records))
        problems += [f"{a.dashboard}: {p}" for p in dp]

    if a.verbose:
        print("metrics of src/metrics.rs:", " ".join(sorted(metrics)))
        print("records:", " ".join(records))
    for p in problems:
        print("check_dashboard:", p)
    if problems:
        print(f"check_dashboard: {len(problems)} problems")
        return 1
    used = {n for e, _ in dash_exprs for n in metric_names(e)}
    print(
        f"check_dashboard: {len(metrics)} metric names in src/metrics.rs; {a.rules}: "
        f"{len(records)} records, {len(alerts)} alerts, {len(rule_exprs)} expressions ok, every "
        f"alert tested firing and not; {a.dashboard}: {len(dash_exprs)} expressions "
        f"({len(used)} names) ok"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
