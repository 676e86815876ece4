#!/usr/bin/env python3
"""Checks contrib/k8s/electd-servicemonitor.yaml against contrib/k8s/electd.yaml without a
cluster: a ServiceMonitor of monitoring.coreos.com/v1 whose selector matches the electd
Service's labels, whose endpoint names a port that Service has and scrapes /metrics, and whose
job (the Service's `app` label, by jobLabel) starts with `electd`, as the alert rules need. The
Prometheus Operator's CRD is not in kubernetes-validate's schemas, so the fields it reads are
checked here. Standard library only (a YAML subset: the flow and block maps the files use)."""
import re
import sys


def main(root):
    sm = open(f"{root}/contrib/k8s/electd-servicemonitor.yaml", encoding="utf-8").read()
    k8s = open(f"{root}/contrib/k8s/electd.yaml", encoding="utf-8").read()
    problems = []
    need = {
        "apiVersion": r"^apiVersion:\s*monitoring\.coreos\.com/v1\s*$",
        "kind": r"^kind:\s*ServiceMonitor\s*$",
        "jobLabel": r"^\s+jobLabel:\s*app\s*$",
        "selector": r"^\s+matchLabels:\s*\{app:\s*electd\}\s*$",
        "path": r"^\s+path:\s*/metrics\s*$",
    }
    for what, pattern in need.items():
        if not re.search(pattern, sm, re.M):
            problems.append(f"{what}: not as the rules and the Service need ({pattern})")
    service = next((d for d in k8s.split("\n---") if re.search(r"^kind:\s*Service\s*$", d, re.M)), "")
    if not re.search(r"^\s+labels:\s*\{app:\s*electd\}\s*$", service, re.M):
        problems.append("electd.yaml's Service is not labelled app: electd")
    port = re.search(r"^\s+-\s*port:\s*(\S+)\s*$", sm, re.M)
    if not port or not re.search(r"\{name:\s*" + re.escape(port.group(1)) + r"\b", service):
        problems.append(f"the endpoint's port {port.group(1) if port else None!r} is not a port of the Service")
    for p in problems:
        print(f"check_servicemonitor: {p}")
    print(f"check_servicemonitor: {len(problems)} problems" if problems else "check_servicemonitor: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
