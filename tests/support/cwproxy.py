#!/usr/bin/env python3
"""A CloudWatch Logs proxy for hooklog's tests: sits between hooklog and moto's server.

It checks every PutLogEvents request the way AWS does (moto does not check the batch limits)
and answers a bad one with AWS's error shape, it can inject throttling and 5xx answers, and it
can play "down" (connections closed without an answer).

    python3 cwproxy.py --upstream http://127.0.0.1:PORT [--port 0]

Prints "listening PORT" on stdout once ready. Control, on the same port:
    POST /__cwproxy/faults {"down": true|false, "throttle": N, "error5xx": N, "reject_old": N}
        throttle / error5xx: answer the next N PutLogEvents calls with ThrottlingException (400)
        or ServiceUnavailableException (503).
        reject_old: in the next PutLogEvents call, do not store the first N events and report
        them in rejectedLogEventsInfo.tooOldLogEventEndIndex, as AWS does for events too old.
    GET  /__cwproxy/stats  -> {"put_ok", "put_invalid", "throttled", "errors5xx", "dropped",
                               "events_ok", "violations": [...]}

Limits: https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutLogEvents.html
"""

import argparse
import http.client
import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD = 26
MAX_EVENT_BYTES = MAX_BATCH_BYTES - EVENT_OVERHEAD
MAX_SPAN_MS = 24 * 3600 * 1000

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-connection", "content-length"}

lock = threading.Lock()
faults = {"down": False, "throttle": 0, "error5xx": 0, "reject_old": 0}
stats = {"put_ok": 0, "put_invalid": 0, "throttled": 0, "errors5xx": 0, "dropped": 0,
         "events_ok": 0, "rejected_old": 0, "violations": []}


def violation(body):
    """What AWS would reject in a PutLogEvents body, or None."""
    try:
        req = json.loads(body)
    except ValueError as e:
        return f"body is not JSON: {e}"
    events = req.get("logEvents") or []
    if not events:
        return "logEvents is empty"
    if len(events) > MAX_BATCH_EVENTS:
        return f"{len(events)} events, more than {MAX_BATCH_EVENTS}"
    total = 0
    for i, ev in enumerate(events):
        size = len(ev.get("message", "").encode("utf-8"))
        if size == 0:
            return f"event {i} has an empty message"
        if size > MAX_EVENT_BYTES:
            return f"event {i} is {size} bytes, more than {MAX_EVENT_BYTES}"
        total += size + EVENT_OVERHEAD
    if total > MAX_BATCH_BYTES:
        return f"batch is {total} bytes with overhead, more than {MAX_BATCH_BYTES}"
    ts = [ev.get("timestamp", 0) for ev in events]
    if any(a > b for a, b in zip(ts, ts[1:])):
        return "log events are not in chronological order"
    if ts[-1] - ts[0] > MAX_SPAN_MS:
        return f"batch spans {ts[-1] - ts[0]} ms, more than 24 hours"
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the test prints what it needs
        pass

    def reply(self, status, body, content_type="application/x-amz-json-1.1", headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def aws_error(self, status, kind, message):
        self.reply(status, {"__type": kind, "message": message}, headers=[("x-amzn-ErrorType", kind)])

    def control(self, body):
        path = urllib.parse.urlparse(self.path).path
        if path == "/__cwproxy/faults" and self.command == "POST":
            with lock:
                faults.update(json.loads(body or b"{}"))
                snapshot = dict(faults)
            return self.reply(200, snapshot, "application/json")
        if path == "/__cwproxy/stats":
            with lock:
                snapshot = json.loads(json.dumps(stats))
            return self.reply(200, snapshot, "application/json")
        return self.reply(404, {"error": "unknown control path"}, "application/json")

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/__cwproxy/"):
            return self.control(body)
        target = self.headers.get("X-Amz-Target", "")
        is_put = target.endswith(".PutLogEvents")
        with lock:
            if faults["down"]:
                stats["dropped"] += 1
                self.close_connection = True
                return  # No answer: the client sees the connection close.
            if is_put and faults["throttle"] > 0:
                faults["throttle"] -= 1
                stats["throttled"] += 1
                throttle = True
            else:
                throttle = False
            if not throttle and is_put and faults["error5xx"] > 0:
                faults["error5xx"] -= 1
                stats["errors5xx"] += 1
                fail = True
            else:
                fail = False
        if throttle:
            return self.aws_error(400, "ThrottlingException", "Rate exceeded")
        if fail:
            return self.aws_error(503, "ServiceUnavailableException", "The service is unavailable")
        if is_put:
            why = violation(body)
            if why is not None:
                with lock:
                    stats["put_invalid"] += 1
                    stats["violations"].append(why)
                print(f"cwproxy: rejected PutLogEvents: {why}", file=sys.stderr, flush=True)
                return self.aws_error(400, "InvalidParameterException", why)
        reject = 0
        if is_put:
            with lock:
                reject, faults["reject_old"] = faults["reject_old"], 0
            if reject:
                req = json.loads(body)
                reject = min(reject, len(req["logEvents"]))
                req["logEvents"] = req["logEvents"][reject:]
                body = json.dumps(req).encode()
        if is_put and reject and not json.loads(body)["logEvents"]:
            status, headers, data = 200, [("Content-Type", "application/x-amz-json-1.1")], b"{}"
        else:
            status, headers, data = self.forward(body)
        if is_put and status == 200:
            with lock:
                stats["put_ok"] += 1
                stats["events_ok"] += len(json.loads(body).get("logEvents", []))
                stats["rejected_old"] += reject
            if reject:
                answer = json.loads(data or b"{}")
                answer["rejectedLogEventsInfo"] = {"tooOldLogEventEndIndex": reject - 1}
                data = json.dumps(answer).encode()
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def forward(self, body):
        up = urllib.parse.urlparse(self.server.upstream)
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, resp.getheaders(), data

    do_GET = handle_any
    do_POST = handle_any
    do_PUT = handle_any
    do_DELETE = handle_any


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.upstream = args.upstream
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
