#!/usr/bin/env python3
"""A registry that misbehaves on purpose, on 127.0.0.1 only (issue 26's hostile cases, which
Debian's docker-registry cannot play). It serves one image, `app:1` (a gzip layer with bin/sh,
bin/sleep), and misbehaves as MODE says:

  trickle    the layer's blob comes one byte every 2 s (for the whole-check deadline);
  downgrade  over HTTPS with Basic auth, the blob is a 307 to http:// on the same host, whose
             plain listener records the Authorization header it got;
  realm      over HTTPS, a Bearer challenge whose realm is http:// on the same host (the plain
             listener records the Authorization the token request carried);
  sha512     the manifest asked for by a sha512 digest is answered with other content.

Usage: hostile-registry.py MODE STATE_DIR [CERT KEY]. Prints `ready HTTPS_OR_HTTP_PORT
PLAIN_PORT` once listening; writes each Authorization the plain listener saw to
STATE_DIR/plain-auth (one a line, `-` for none). Ends by itself after 120 s.
"""

import gzip
import hashlib
import http.server
import io
import json
import os
import ssl
import sys
import tarfile
import threading
import time

MODE, STATE = sys.argv[1], sys.argv[2]
LIFETIME = 120


def layer():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name in ["bin/sh", "bin/sleep"]:
            info = tarfile.TarInfo(name)
            info.mode = 0o755
            t.addfile(info, io.BytesIO(b""))
    return gzip.compress(buf.getvalue(), mtime=0)


def sha256(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


LAYER = layer()
CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin"]},
                     "rootfs": {"type": "layers", "diff_ids": []}}).encode()
MANIFEST = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256(CONFIG), "size": len(CONFIG)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha256(LAYER), "size": len(LAYER)}],
}).encode()
BASIC = "Basic dXNlcjpzZWNyZXQ="  # user:secret
PORTS = {}


def record(auth):
    with open(os.path.join(STATE, "plain-auth"), "a") as f:
        f.write((auth or "-") + "\n")


class Registry(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        auth = self.headers.get("Authorization")
        path = self.path.split("?")[0]
        if MODE == "downgrade" and auth != BASIC:
            return self.send(401, b"{}", [("WWW-Authenticate", 'Basic realm="hostile"')])
        if MODE == "realm" and not (auth or "").startswith("Bearer "):
            realm = f"http://127.0.0.1:{PORTS['plain']}/token"
            return self.send(401, b"{}", [("WWW-Authenticate", f'Bearer realm="{realm}",service="hostile"')])
        if "/manifests/" in path:
            ref = path.rsplit("/", 1)[1]
            body = MANIFEST
            if MODE == "sha512" and ref.startswith("sha512:"):
                body = MANIFEST.replace(b'"schemaVersion": 2', b'"schemaVersion": 2 ')
            return self.send(200, body, [("Content-Type", "application/vnd.oci.image.manifest.v1+json")])
        if path.endswith(sha256(CONFIG)):
            return self.send(200, CONFIG)
        if path.endswith(sha256(LAYER)):
            if MODE == "downgrade":
                loc = f"http://127.0.0.1:{PORTS['plain']}/blob"
                return self.send(307, b"", [("Location", loc)])
            if MODE == "trickle":
                self.send_response(200)
                self.send_header("Content-Length", str(len(LAYER)))
                self.end_headers()
                for b in LAYER:
                    self.wfile.write(bytes([b]))
                    self.wfile.flush()
                    time.sleep(2)
                return
            return self.send(200, LAYER)
        return self.send(404, b"{}")


class Plain(Registry):
    def do_GET(self):
        record(self.headers.get("Authorization"))
        if self.path.startswith("/token"):
            return self.send(200, json.dumps({"token": "t0ken"}).encode())
        return self.send(200, LAYER)


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()


main = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
main.daemon_threads = True
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    main.socket = ctx.wrap_socket(main.socket, server_side=True)
plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Plain)
plain.daemon_threads = True
PORTS["plain"] = plain.server_address[1]
serve(main)
serve(plain)
with open(os.path.join(STATE, "manifest-sha512"), "w") as f:
    f.write("sha512:" + hashlib.sha512(MANIFEST).hexdigest())
print(f"ready {main.server_address[1]} {PORTS['plain']}", flush=True)
time.sleep(LIFETIME)
