#!/usr/bin/env python3
"""A Docker registry token server (the distribution "token" auth scheme) for tests/registry.rs.

usage: token-server.py PORT KEY.pem CERT.pem SERVICE ISSUER USER PASSWORD LOG

Prints "listening PORT" on stdout once it listens (PORT 0: the port the kernel chose).

GET /token?service=...&scope=repository:NAME:ACTIONS answers {"token": JWT}: an RS256 JWT signed
with KEY (openssl CLI: no Python crypto library needed), CERT in its x5c header (the registry's
`rootcertbundle` holds CERT). Anonymous callers get `pull`; USER:PASSWORD (Basic) gets what it
asks; a wrong password gets 401. Each request is logged to LOG as `anonymous|USER|denied SCOPE`.
"""
import base64
import json
import subprocess
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

port, key, cert, service, issuer, user, password, log = sys.argv[1:9]
der = subprocess.run(["openssl", "x509", "-in", cert, "-outform", "DER"], check=True,
                     capture_output=True).stdout


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign(claims):
    header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input.encode(),
                         check=True, capture_output=True).stdout
    return signing_input + "." + b64url(sig)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlparse(self.path)
        q = parse_qs(url.query)
        who = "anonymous"
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            u, _, p = base64.b64decode(auth[6:]).decode().partition(":")
            who = u if (u, p) == (user, password) else "denied"
        scopes = q.get("scope", [])
        with open(log, "a") as f:
            f.write(f"{who} {' '.join(scopes)}\n")
        if who == "denied":
            self.send_response(401)
            self.end_headers()
            return
        access = []
        for s in scopes:
            kind, name, actions = s.split(":", 2)
            wanted = actions.split(",")
            granted = wanted if who != "anonymous" else [a for a in wanted if a == "pull"]
            access.append({"type": kind, "name": name, "actions": granted})
        now = int(time.time())
        token = sign({"iss": issuer, "sub": who, "aud": q.get("service", [service])[0],
                      "exp": now + 300, "nbf": now - 10, "iat": now, "jti": str(uuid.uuid4()),
                      "access": access})
        body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
# The port it listens on (PORT 0: one the kernel chose), for the test to read.
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
