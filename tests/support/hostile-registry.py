#!/usr/bin/env python3
"""A registry that misbehaves on purpose, on 127.0.0.1 only (issue 26's hostile cases, which
Debian's docker-registry cannot play). It serves one image, `app:1` (a gzip layer with bin/sh,
bin/sleep), and misbehaves as MODE says:

  trickle    the layer's blob comes one byte every 2 s (for the whole-check deadline);
  downgrade  over HTTPS with Basic auth, the blob is a 307 to http:// on the same host and port
             (the one listener speaks TLS or plain HTTP, by the first byte), which records
             the Authorization header it got in plain HTTP;
  realm      over HTTPS, a Bearer challenge whose realm is http:// on the same host and port
             (the Authorization the token request carried is recorded);
  sha512     the manifest asked for by a sha512 digest is answered with other content;
  tampered-gzip, tampered-zstd, tampered-none
             the layer (in that compression) is listed under its honest digest and size, and
             its blob is other bytes of the same size: bin/sh and bin/sleeq.

Usage: hostile-registry.py MODE STATE_DIR [CERT KEY]. Prints `ready PORT` once listening;
writes each Authorization that came in plain HTTP to STATE_DIR/plain-auth (one a line, `-` for
none). Ends by itself after 120 s.
"""

import gzip
import hashlib
import http.server
import io
import json
import os
import socket
import ssl
import sys
import tarfile
import threading
import time

MODE, STATE = sys.argv[1], sys.argv[2]
LIFETIME = 120


def tar(names):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name in names:
            info = tarfile.TarInfo(name)
            info.mode = 0o755
            t.addfile(info, io.BytesIO(b""))
    return buf.getvalue()


def zstd(data):
    """One zstd frame of raw blocks (RFC 8878 3.1.1): no compressor needed."""
    out = bytearray(b"\x28\xb5\x2f\xfd")
    out += bytes([0xA0])  # single segment, 4-byte content size, no checksum, no dictionary
    out += len(data).to_bytes(4, "little")
    blocks = [data[i:i + 65536] for i in range(0, len(data), 65536)] or [b""]
    for i, block in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        out += ((len(block) << 3) | last).to_bytes(3, "little")  # block type 0: raw
        out += block
    return bytes(out)


COMPRESS = {
    "gzip": (lambda b: gzip.compress(b, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip"),
    "zstd": (zstd, "application/vnd.oci.image.layer.v1.tar+zstd"),
    "none": (lambda b: b, "application/vnd.oci.image.layer.v1.tar"),
}
KIND = MODE.split("-", 1)[1] if MODE.startswith("tampered-") else "gzip"


def layer(names=("bin/sh", "bin/sleep")):
    return COMPRESS[KIND][0](tar(names))


def sha256(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


LAYER = layer()
# The tampered blob: another file where bin/sleep was, the same size in every compression here.
SERVED = layer(("bin/sh", "bin/sleeq")) if MODE.startswith("tampered-") else LAYER
assert len(SERVED) == len(LAYER), (len(SERVED), len(LAYER))
CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin"]},
                     "rootfs": {"type": "layers", "diff_ids": []}}).encode()
MANIFEST = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256(CONFIG), "size": len(CONFIG)},
    "layers": [{"mediaType": COMPRESS[KIND][1], "digest": sha256(LAYER), "size": len(LAYER)}],
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
        if not isinstance(self.connection, ssl.SSLSocket) and len(sys.argv) > 4:
            record(auth)
            if path == "/token":
                return self.send(200, json.dumps({"token": "t0ken"}).encode())
            return self.send(200, LAYER)
        if MODE == "downgrade" and auth != BASIC:
            return self.send(401, b"{}", [("WWW-Authenticate", 'Basic realm="hostile"')])
        if MODE == "realm" and not (auth or "").startswith("Bearer "):
            realm = f"http://127.0.0.1:{PORTS['main']}/token"
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
                loc = f"http://127.0.0.1:{PORTS['main']}/blob"
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
            return self.send(200, SERVED)
        return self.send(404, b"{}")


class Server(http.server.ThreadingHTTPServer):
    """TLS or plain HTTP on one port, by the connection's first byte (0x16 opens TLS)."""

    daemon_threads = True
    tls = None

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.tls is not None:
            sock.settimeout(10)
            first = sock.recv(1, socket.MSG_PEEK)
            if first == b"\x16":
                sock = self.tls.wrap_socket(sock, server_side=True)
            sock.settimeout(None)
        return sock, addr


main = Server(("127.0.0.1", 0), Registry)
if len(sys.argv) > 4:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    main.tls = ctx
PORTS["main"] = main.server_address[1]
threading.Thread(target=main.serve_forever, daemon=True).start()
with open(os.path.join(STATE, "manifest-sha512"), "w") as f:
    f.write("sha512:" + hashlib.sha512(MANIFEST).hexdigest())
with open(os.path.join(STATE, "layer-digest"), "w") as f:
    f.write(sha256(LAYER))
print(f"ready {PORTS['main']}", flush=True)
time.sleep(LIFETIME)
