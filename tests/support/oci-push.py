#!/usr/bin/env python3
"""Builds the test images of tests/registry.rs from tar layers written here and pushes them to
a registry over its HTTP API (OCI distribution spec: POST+PUT blob uploads, PUT manifests).
Basic credentials and Bearer challenges are answered. Prints {"image:tag": "manifest digest"}.

usage: oci-push.py URL [--user U --password P] [--cafile CA] [--busybox /bin/busybox]
                        [--big-mb N]
"""
import argparse
import base64
import gzip
import hashlib
import io
import json
import os
import re
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Registry:
    def __init__(self, url, user, password, cafile):
        self.url = url.rstrip("/")
        self.user, self.password = user, password
        self.ctx = ssl.create_default_context(cafile=cafile) if cafile else None
        self.token = None

    def request(self, method, url, body=None, headers=None):
        headers = dict(headers or {})
        for attempt in range(2):
            h = dict(headers)
            if self.token:
                h["Authorization"] = "Bearer " + self.token
            elif self.user:
                cred = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
                h["Authorization"] = "Basic " + cred
            data = body
            if hasattr(body, "seek"):
                body.seek(0)
            req = urllib.request.Request(url, data=data, method=method, headers=h)
            try:
                return urllib.request.urlopen(req, context=self.ctx, timeout=120)
            except urllib.error.HTTPError as e:
                challenge = e.headers.get("WWW-Authenticate", "")
                if e.code == 401 and challenge.startswith("Bearer ") and attempt == 0:
                    self.token = self.fetch_token(challenge)
                    continue
                raise SystemExit(f"{method} {url}: {e.code} {e.read()[:500]!r}")
        raise SystemExit(f"{method} {url}: unauthorized")

    def fetch_token(self, challenge):
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm")
        self.token = None
        url = realm + "?" + urllib.parse.urlencode(params)
        h = {}
        if self.user:
            cred = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            h["Authorization"] = "Basic " + cred
        with urllib.request.urlopen(urllib.request.Request(url, headers=h), context=self.ctx) as r:
            doc = json.load(r)
        return doc.get("token") or doc["access_token"]

    def blob(self, name, data=None, path=None):
        """Uploads a blob (bytes, or a file streamed from `path`); returns its descriptor parts."""
        if path:
            h = hashlib.sha256()
            size = 0
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
                    size += len(chunk)
            digest = "sha256:" + h.hexdigest()
        else:
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            size = len(data)
        r = self.request("POST", f"{self.url}/v2/{name}/blobs/uploads/", b"")
        loc = urllib.parse.urljoin(self.url + "/", r.headers["Location"])
        sep = "&" if "?" in loc else "?"
        put = f"{loc}{sep}digest={urllib.parse.quote(digest)}"
        hdr = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        if path:
            with open(path, "rb") as f:
                self.request("PUT", put, f, hdr)
        else:
            self.request("PUT", put, data, hdr)
        return digest, size

    def manifest(self, name, ref, doc, media_type):
        body = json.dumps(doc).encode()
        self.request("PUT", f"{self.url}/v2/{name}/manifests/{ref}", body,
                     {"Content-Type": media_type})
        return "sha256:" + hashlib.sha256(body).hexdigest()


def tar_layer(entries):
    """entries: (path, kind, arg): kind file (arg: bytes, mode 0o755), dir, symlink (arg: target),
    empty (a zero-byte file such as a whiteout)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, kind, arg in entries:
            info = tarfile.TarInfo(path)
            info.mtime = 0
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, arg, 0o777
                t.addfile(info)
            elif kind == "empty":
                info.size, info.mode = 0, 0o644
                t.addfile(info, io.BytesIO(b""))
            else:
                info.size, info.mode = len(arg), 0o755
                t.addfile(info, io.BytesIO(arg))
    return buf.getvalue()


def compress(raw, how):
    if how == "gzip":
        return gzip.compress(raw, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c"], input=raw, check=True,
                              capture_output=True).stdout
    return raw


def layer_type(how, docker):
    if docker:
        return {"gzip": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "none": "application/vnd.docker.image.rootfs.diff.tar"}[how]
    return {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
            "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
            "none": "application/vnd.oci.image.layer.v1.tar"}[how]


def image(reg, name, layers, arch="amd64", docker=False, entrypoint=None, cmd=None):
    """layers: [(entries, compression)]. Pushes the blobs and returns the manifest (not pushed)."""
    descs, diff_ids = [], []
    for entries, how in layers:
        raw = tar_layer(entries)
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        blob = compress(raw, how)
        digest, size = reg.blob(name, blob)
        descs.append({"mediaType": layer_type(how, docker), "digest": digest, "size": size})
    return finish(reg, name, descs, diff_ids, arch, docker, entrypoint, cmd)


def finish(reg, name, descs, diff_ids, arch, docker, entrypoint, cmd=None):
    run = {"Env": [PATH], "Entrypoint": entrypoint}
    if cmd is not None:
        run["Cmd"] = cmd
    config = {"architecture": arch, "os": "linux", "config": run,
              "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    cbody = json.dumps(config).encode()
    cdigest, csize = reg.blob(name, cbody)
    return {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
            "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
                       "digest": cdigest, "size": csize},
            "layers": descs}


def push(reg, name, tag, manifest, out):
    out[f"{name}:{tag}"] = reg.manifest(name, tag, manifest, manifest["mediaType"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--cafile")
    ap.add_argument("--busybox", default="/bin/busybox")
    ap.add_argument("--big-mb", type=int, default=0)
    a = ap.parse_args()
    reg = Registry(a.url, a.user, a.password, a.cafile)
    busybox = open(a.busybox, "rb").read()
    envoy = b"\x7fELF" + b"\0" * 60 + b"envoy stand-in"
    out = {}

    # busybox: Docker v2 media types, gzip; sh and sleep are links to busybox; CMD ["sh"] as
    # Docker Hub's busybox has.
    bb = [("bin", "dir", None), ("bin/busybox", "file", busybox),
          ("bin/sh", "symlink", "busybox"), ("bin/sleep", "symlink", "busybox")]
    sh = ["sh"]
    push(reg, "busybox", "1", image(reg, "busybox", [(bb, "gzip")], docker=True, cmd=sh), out)
    # what the container runs when its pod says no `command`: an ENTRYPOINT the image lacks
    # (/bin/app), a CMD only, and neither.
    push(reg, "app", "1", image(reg, "app", [(bb, "gzip")], entrypoint=["/bin/app"]), out)
    push(reg, "cmd", "1", image(reg, "cmd", [(bb, "gzip")], cmd=["/bin/sh"]), out)
    push(reg, "bare", "1", image(reg, "bare", [(bb, "gzip")]), out)
    # the seed incident: a shell-less image with only envoy; uncompressed OCI layer.
    ev = [("usr", "dir", None), ("usr/local", "dir", None), ("usr/local/bin", "dir", None),
          ("usr/local/bin/envoy", "file", envoy)]
    for name in ("envoy", "envoy-distroless"):
        m = image(reg, name, [(ev, "none")], entrypoint=["/usr/local/bin/envoy"])
        push(reg, name, "1", m, out)
    # merged /usr: /bin -> usr/bin, links relative and absolute; zstd.
    mu = [("usr", "dir", None), ("usr/bin", "dir", None), ("usr/bin/busybox", "file", busybox),
          ("usr/bin/sleep", "symlink", "busybox"), ("usr/bin/sh", "symlink", "/usr/bin/busybox"),
          ("bin", "symlink", "usr/bin")]
    push(reg, "merged", "1", image(reg, "merged", [(mu, "zstd")], cmd=sh), out)
    # a later layer deletes /bin/sleep (a whiteout) and empties /opt/tools (an opaque folder).
    low = bb + [("opt", "dir", None), ("opt/tools", "dir", None),
                ("opt/tools/drain", "file", envoy)]
    high = [("bin/.wh.sleep", "empty", None), ("opt/tools/.wh..wh..opq", "empty", None),
            ("opt/tools/other", "file", envoy)]
    push(reg, "whiteout", "1", image(reg, "whiteout", [(low, "gzip"), (high, "gzip")], cmd=sh), out)
    # multi-arch: amd64 has busybox's sleep, arm64 only envoy.
    entries = []
    for arch, layer, run in (("amd64", bb, {"cmd": sh}),
                             ("arm64", ev, {"entrypoint": ["/usr/local/bin/envoy"]})):
        m = image(reg, "multi", [(layer, "gzip")], arch=arch, **run)
        body = json.dumps(m).encode()
        digest = reg.manifest("multi", "sha256:" + hashlib.sha256(body).hexdigest(), m,
                              OCI_MANIFEST)
        out[f"multi@{arch}"] = digest
        entries.append({"mediaType": OCI_MANIFEST, "digest": digest, "size": len(body),
                        "platform": {"architecture": arch, "os": "linux"}})
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    out["multi:1"] = reg.manifest("multi", "1", index, OCI_INDEX)

    if a.big_mb:
        # A layer of incompressible data (gzip stored as is), streamed from a temporary file.
        with tempfile.NamedTemporaryFile(suffix=".tar.gz") as f:
            with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=1, mtime=0) as gz:
                with tarfile.open(fileobj=gz, mode="w|") as t:
                    info = tarfile.TarInfo("data/big")
                    info.size = a.big_mb << 20
                    info.mode = 0o644

                    class Random(io.RawIOBase):
                        def __init__(self, n):
                            self.left = n

                        def readable(self):
                            return True

                        def readinto(self, b):
                            n = min(len(b), self.left)
                            b[:n] = os.urandom(n)
                            self.left -= n
                            return n
                    t.addfile(info, io.BufferedReader(Random(info.size), 1 << 20))
            f.flush()
            digest, size = reg.blob("big", path=f.name)
        bbd = compress(tar_layer(bb), "gzip")
        d2, s2 = reg.blob("big", bbd)
        descs = [{"mediaType": layer_type("gzip", False), "digest": digest, "size": size},
                 {"mediaType": layer_type("gzip", False), "digest": d2, "size": s2}]
        push(reg, "big", "1", finish(reg, "big", descs, [], "amd64", False, None, sh), out)
    json.dump(out, sys.stdout)


main()
