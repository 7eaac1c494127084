#!/usr/bin/env python3
"""Admission latency and memory of `hooklog webhook` behind a real kube-apiserver.

    bash scripts/apiserver.sh start /tmp/api && set -a && . /tmp/api/env && set +a
    python3 bench/webhook.py --pods 1000 --bin target/release/hooklog
    bash scripts/apiserver.sh stop /tmp/api

Creates --pods pods one after another through the API server (kube-apiserver 1.20.2 and etcd on
127.0.0.1, scripts/apiserver.sh) in a namespace labelled hooklog.dev/inject=enabled, the webhook
registered by URL, and as many in a namespace it does not select (the API server and etcd alone),
then --pods more from --clients threads at once. Prints p50/p99 of each, the webhook's own time
per review (its `took` log field), and its resident memory idle and after the load (VmRSS,
VmHWM). Python 3.11 standard library and openssl only.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

API_ENV = ("HOOKLOG_TEST_APISERVER", "HOOKLOG_TEST_APISERVER_TOKEN", "HOOKLOG_TEST_APISERVER_CA")


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "terminationGracePeriodSeconds": 40,
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.25",
                    "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5; nginx -s quit"]}}},
                }
            ],
        },
    }


class Api:
    def __init__(self, url: str, token: str, ca: str):
        self.host, port = url.removeprefix("https://").rsplit(":", 1)
        self.port = int(port)
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca)
        self.local = threading.local()

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            self.local.conn = conn
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json", "Accept": "application/json"}
        try:
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            raw = r.read()
        except (http.client.HTTPException, OSError):
            self.local.conn = None
            raise
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, {"raw": raw.decode(errors="replace")}


def make_certs(d: str) -> tuple[str, str, str]:
    def run(*args: str) -> None:
        subprocess.run(args, check=True, capture_output=True)

    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=bench-ca",
        "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=hooklog-webhook",
        "-keyout", f"{d}/tls.key", "-out", f"{d}/tls.csr")
    with open(f"{d}/ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", f"{d}/tls.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", f"{d}/ext", "-out", f"{d}/tls.crt")
    return f"{d}/ca.crt", f"{d}/tls.crt", f"{d}/tls.key"


def memory_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def took_ms(field: str) -> float:
    m = re.fullmatch(r"([0-9.]+)(ns|µs|us|ms|s)", field)
    if not m:
        raise ValueError(field)
    scale = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    return float(m.group(1)) * scale


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--bin", default="target/release/hooklog")
    a = ap.parse_args()
    missing = [k for k in API_ENV if k not in os.environ]
    if missing:
        print(f"needs {', '.join(missing)}: bash scripts/apiserver.sh start STATE, then export STATE/env", file=sys.stderr)
        return 2
    api = Api(*(os.environ[k] for k in API_ENV))
    tmp = tempfile.mkdtemp(prefix="hooklog-webhook-bench.")
    ca, cert, key = make_certs(tmp)
    proc = subprocess.Popen(
        [a.bin, "webhook", "--listen", "127.0.0.1:0", "--sidecar", "classic", "--image", "registry.example/hooklog:bench",
         "--tls-cert-file", cert, "--tls-key-file", key],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "RUST_LOG": "info"},
    )
    log: list[str] = []
    port_ready = threading.Event()
    port = [0]

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            m = re.search(r"webhook serving listen=127\.0\.0\.1:(\d+)", line)
            if m:
                port[0] = int(m.group(1))
                port_ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not port_ready.wait(20):
        print("the webhook did not start:", "".join(log), file=sys.stderr)
        return 1
    name = f"bench-{os.getpid()}"
    try:
        for ns, labels in ((f"{name}-in", {"hooklog.dev/inject": "enabled"}), (f"{name}-out", {})):
            labels["hooklog-bench"] = name
            s, v = api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
            assert s == 201, v
        bundle = base64.b64encode(open(ca, "rb").read()).decode()
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": f"namespace.{name}.hooklog.dev",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": f"https://127.0.0.1:{port[0]}/mutate/namespace-enabled", "caBundle": bundle},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"hooklog-bench": name},
                                      "matchExpressions": [{"key": "hooklog.dev/inject", "operator": "In", "values": ["enabled"]}]},
                "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10, "reinvocationPolicy": "IfNeeded",
            }],
        }
        s, v = api.call("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", config)
        assert s == 201, v
        deadline = time.monotonic() + 30
        while True:
            s, v = api.call("POST", f"/api/v1/namespaces/{name}-in/pods?dryRun=All", pod("probe"))
            if s == 201 and any(c["name"] == "hooklog" for c in v["spec"]["containers"]):
                break
            assert time.monotonic() < deadline, f"the webhook is never called: {s} {v}; its log: {log}"
            time.sleep(0.2)
        time.sleep(1)
        idle = memory_kib(proc.pid)
        log_mark = len(log)

        def create(ns: str, i: int, prefix: str, injected: bool) -> float:
            t = time.perf_counter()
            s, v = api.call("POST", f"/api/v1/namespaces/{ns}/pods", pod(f"{prefix}-{i}"))
            took = (time.perf_counter() - t) * 1000
            assert s == 201, v
            has = any(c["name"] == "hooklog" for c in v["spec"]["containers"])
            assert has == injected, v
            return took

        through = [create(f"{name}-in", i, "p", True) for i in range(a.pods)]
        sequential_took = [took_ms(m.group(1)) for line in log[log_mark:] if (m := re.search(r" took=(\S+)", line))]
        plain = [create(f"{name}-out", i, "p", False) for i in range(a.pods)]
        mark2 = len(log)
        with ThreadPoolExecutor(a.clients) as ex:
            loaded = list(ex.map(lambda i: create(f"{name}-in", i, "c", True), range(a.pods)))
        loaded_took = [took_ms(m.group(1)) for line in log[mark2:] if (m := re.search(r" took=(\S+)", line))]
        after = memory_kib(proc.pid)
        rows = [
            ("pod creation, webhook injecting (1 client)", through),
            ("pod creation, webhook not called (1 client)", plain),
            (f"pod creation, webhook injecting ({a.clients} clients)", loaded),
            ("webhook's own time per review (1 client)", sequential_took),
            (f"webhook's own time per review ({a.clients} clients)", loaded_took),
        ]
        print(f"| {a.pods} pods each | p50 ms | p99 ms | mean ms |")
        print("|---|---|---|---|")
        for label, xs in rows:
            print(f"| {label} | {pct(xs, 50):.2f} | {pct(xs, 99):.2f} | {statistics.mean(xs):.2f} |")
        print()
        print(f"webhook memory: idle VmRSS {idle['VmRSS'] / 1024:.1f} MiB; after {3 * a.pods} pods "
              f"VmRSS {after['VmRSS'] / 1024:.1f} MiB, peak VmHWM {after['VmHWM'] / 1024:.1f} MiB")
        print(f"reviews logged: {len(sequential_took)} + {len(loaded_took)}")
    finally:
        api.call("DELETE", f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}")
        for ns in (f"{name}-in", f"{name}-out"):
            api.call("DELETE", f"/api/v1/namespaces/{ns}")
        proc.terminate()
        proc.wait(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
