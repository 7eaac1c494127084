#!/usr/bin/env python3
"""Large manifest inputs for the manifest wing's cost (issue 24 §4): one generator, used by
bench/manifest.py (which imports it) and tests/cost.rs (which runs it), so both measure the
same input.

    python3 bench/gen_manifests.py --bytes 1048576 > in.yaml          # a stream of Deployments
    python3 bench/gen_manifests.py --bytes 1048576 --list > list.yaml # one `kind: List` of them
    python3 bench/gen_manifests.py --bytes 1048576 --json > list.json # that List as one line of JSON

Each Deployment has two containers, a preStop hook, env, labels and an annotation, in flow and
block style (about 725 bytes; issue 24's 10 MB file held 18,224 of its kind). `--list` writes
the same Deployments as the items of one `kind: List` document (what `kubectl get -o yaml`
prints), indented by two; `--json` the same List as one line of JSON (`kubectl get -o json | jq
-c`), with no comments. Writes Deployments until the output holds at least `--bytes` bytes.

Python 3.11 standard library only; writes to stdout (or `--out`); nothing else.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

DEPLOYMENT = """\
# deployment {n}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{n}
  labels: {{app: app-{n}, tier: "web"}}
  annotations:
    example.com/owner: 'team {m}'
spec:
  replicas: 3
  selector:
    matchLabels:
      app: app-{n}
  template:
    metadata:
      labels:
        app: app-{n}
    spec:
      terminationGracePeriodSeconds: 60
      containers:
      - name: web
        image: nginx:1.25
        ports: [{{containerPort: 80}}]
        env:
        - {{name: MODE, value: "production"}}
        lifecycle:
          preStop:
            exec:
              command: ["sh", "-c", "nginx -s quit; sleep 5"]
      - name: log
        image: busybox:1.36
        args: [sh, -c, 'tail -F /var/log/app.log']
"""

# As `kubectl get -o yaml` writes a List: its keys in order, `kind` after `items`.
LIST_HEAD = "apiVersion: v1\nitems:\n"
LIST_TAIL = 'kind: List\nmetadata:\n  resourceVersion: ""\n'


def deployment(n: int, as_item: bool) -> str:
    """Deployment `n`: a document of its own (after `---`), or an item of a List."""
    doc = DEPLOYMENT.format(n=n, m=n % 7)
    if not as_item:
        return "---\n" + doc
    lines = doc.splitlines(keepends=True)
    # The comment stays above the item; the first key takes the `- `.
    return lines[0] + "- " + lines[1] + "".join("  " + line for line in lines[2:])


def deployment_json(n: int) -> dict:
    """Deployment `n` as [DEPLOYMENT] reads, as a JSON value (its comment left out)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"app-{n}",
            "labels": {"app": f"app-{n}", "tier": "web"},
            "annotations": {"example.com/owner": f"team {n % 7}"},
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": f"app-{n}"}},
            "template": {
                "metadata": {"labels": {"app": f"app-{n}"}},
                "spec": {
                    "terminationGracePeriodSeconds": 60,
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.25",
                            "ports": [{"containerPort": 80}],
                            "env": [{"name": "MODE", "value": "production"}],
                            "lifecycle": {"preStop": {"exec": {
                                "command": ["sh", "-c", "nginx -s quit; sleep 5"]}}},
                        },
                        {"name": "log", "image": "busybox:1.36",
                         "args": ["sh", "-c", "tail -F /var/log/app.log"]},
                    ],
                },
            },
        },
    }


def generate_json(out: TextIO, size: int) -> int:
    """One `kind: List` of Deployments as one line of JSON of at least `size` bytes; how many."""
    items, written = [], 0
    while written < size:
        items.append(json.dumps(deployment_json(len(items)), separators=(",", ":")))
        written += len(items[-1]) + 1
    out.write('{"apiVersion":"v1","items":[' + ",".join(items) + '],"kind":"List"}\n')
    return len(items)


def generate(out: TextIO, size: int, as_list: bool = False) -> int:
    """Writes Deployments to `out` until it holds `size` bytes; returns how many."""
    n = 0
    written = 0
    if as_list:
        out.write(LIST_HEAD)
        written += len(LIST_HEAD)
    while written < size:
        doc = deployment(n, as_list)
        out.write(doc)
        written += len(doc)
        n += 1
    if as_list:
        out.write(LIST_TAIL)
    return n


def generate_file(path: Path, size: int, as_list: bool = False, as_json: bool = False) -> int:
    """[generate] (or [generate_json]) into the file at `path`."""
    with path.open("w") as f:
        return generate_json(f, size) if as_json else generate(f, size, as_list)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", type=int, required=True, help="at least this many bytes")
    ap.add_argument("--list", action="store_true", help="one `kind: List` document of them")
    ap.add_argument("--json", action="store_true", help="one `kind: List` as one line of JSON")
    ap.add_argument("--out", type=Path, default=None, help="a file (default stdout)")
    a = ap.parse_args()
    if a.out is None:
        n = generate_json(sys.stdout, a.bytes) if a.json else generate(sys.stdout, a.bytes, a.list)
    else:
        n = generate_file(a.out, a.bytes, a.list, a.json)
    print(f"{n} Deployments", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
