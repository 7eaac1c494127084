#!/usr/bin/env python3
"""A CloudWatch Logs proxy for hooklog's tests: sits between hooklog and moto's server.

It checks every PutLogEvents request the way AWS does (moto does not check the batch limits)
and answers a bad one with AWS's error shape, it can inject throttling and 5xx answers, it can
play "down" (connections closed without an answer), and it can run its clock off the machine's
(`clock_offset_s`): its answers' `Date`, its SigV4 time check and its 14-day / 2-hour window
then follow that clock, as AWS's do. moto checks the same window on the machine's clock:
`store_shift_s` moves the timestamps it stores back by that much, so that events days away
from the machine's clock can be stored at all.

    python3 cwproxy.py --upstream http://127.0.0.1:PORT [--port 0] [--listen-on-stdin]
                       [--tls CERT.pem:KEY.pem]

With --tls it answers HTTPS with that certificate (the client must trust its CA). Prints
"listening PORT" on stdout once ready. With --listen-on-stdin it prints "bound PORT"
instead and only binds the port (a connection to it is refused, as to a server that is down)
until a line arrives on stdin: then it listens and prints "listening PORT". The port stays its
own all along, so nothing else can take it in between. Control, on the same port:
    POST /__cwproxy/faults {"down": true|false, "throttle": N, "error5xx": N, "reject_old": N,
                            "clock_offset_s": S, "store_shift_s": S}
        throttle / error5xx: answer the next N PutLogEvents calls with ThrottlingException (400)
        or ServiceUnavailableException (503).
        reject_old: in the next PutLogEvents call, do not store the first N events and report
        them in rejectedLogEventsInfo.tooOldLogEventEndIndex, as AWS does for events too old.
        clock_offset_s: the proxy's clock is the machine's plus S seconds (may be negative).
        store_shift_s: timestamps are stored in moto S seconds earlier than sent.
    GET  /__cwproxy/stats  -> {"put_ok", "put_invalid", "throttled", "errors5xx", "dropped",
                               "events_ok", "rejected_old", "rejected_new", "signature_refused",
                               "signature_invalid", "stamp_went_back", "max_stamp_error_ms",
                               "violations": [...], "signed_by": {access key: requests},
                               "signed_in": {region: requests}}
        stamp_went_back: accepted PutLogEvents calls whose first timestamp is before the last
        timestamp of the call accepted before them on the same stream (stored events, after
        store_shift_s).

Always, as AWS does: every request's SigV4 signature is computed again with botocore's signer
(botocore.auth.SigV4Auth, from the headers the request says it signed, its body and its
X-Amz-Date) and the test keys (`--keys ACCESS_KEY:SECRET`, default testing:testing): a request
without an Authorization header is refused (400 MissingAuthenticationTokenException), one
without X-Amz-Date (400 IncompleteSignatureException), one with an unknown key (400
UnrecognizedClientException), one whose signature differs (403 InvalidSignatureException, "The
request signature we calculated does not match": counted in `signature_invalid`). A request whose
X-Amz-Date is more than 5 minutes from the proxy's clock is refused (403
InvalidSignatureException, "Signature expired" / "Signature not yet current"), and
PutLogEvents events more than 14 days old or 2 hours ahead of it are not stored and are reported
in rejectedLogEventsInfo. `max_stamp_error_ms` is the largest distance between an accepted
event's timestamp and the proxy's clock when it arrived.

Limits: https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutLogEvents.html
"""

import argparse
import calendar
import email.utils
import http.client
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD = 26
MAX_EVENT_BYTES = MAX_BATCH_BYTES - EVENT_OVERHEAD
MAX_SPAN_MS = 24 * 3600 * 1000
# "Events older than 14 days ... are rejected", "Events more than 2 hours in the future are
# rejected" (PutLogEvents).
MAX_AGE_MS = 14 * 24 * 3600 * 1000
MAX_AHEAD_MS = 2 * 3600 * 1000
# SigV4: "Signature expired: ... (... - 5 min.)", AWS's answer to a request signed 5 minutes or
# more away from its clock.
SIGNATURE_WINDOW_S = 5 * 60

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-connection", "content-length"}

lock = threading.Lock()
faults = {"down": False, "throttle": 0, "error5xx": 0, "reject_old": 0, "clock_offset_s": 0,
          "store_shift_s": 0}
stats = {"put_ok": 0, "put_invalid": 0, "throttled": 0, "errors5xx": 0, "dropped": 0,
         "events_ok": 0, "rejected_old": 0, "rejected_new": 0, "signature_refused": 0,
         "signature_invalid": 0, "stamp_went_back": 0, "max_stamp_error_ms": 0, "violations": [],
         "signed_by": {}, "signed_in": {}}
# (group, stream) -> the last timestamp of the last request accepted for it.
last_stamp = {}
# Access key -> secret key: the keys the tests sign with (--keys).
keys = {}


def clock_offset_s():
    with lock:
        return faults["clock_offset_s"]


def amz_time(t):
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))


def signature_mismatch(method, path, headers, body):
    """What AWS would answer a request whose SigV4 signature is missing, incomplete or wrong, as
    (status, kind, message), or None. The signature is computed again with botocore's signer from
    the headers the request names in SignedHeaders, its body and its own X-Amz-Date."""
    auth = headers.get("Authorization")
    if not auth:
        return 400, "MissingAuthenticationTokenException", "Missing Authentication Token"
    amz_date = headers.get("X-Amz-Date")
    if not amz_date:
        return (400, "IncompleteSignatureException",
                "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
    algorithm, _, fields = auth.partition(" ")
    parts = dict(f.strip().split("=", 1) for f in fields.split(",") if "=" in f)
    try:
        key, day, region, service, terminal = parts["Credential"].split("/")
        signed = parts["SignedHeaders"].split(";")
        given = parts["Signature"]
    except (KeyError, ValueError):
        return 400, "IncompleteSignatureException", f"Authorization header is malformed: {auth!r}"
    if algorithm != "AWS4-HMAC-SHA256" or terminal != "aws4_request" or day != amz_date[:8]:
        return 400, "IncompleteSignatureException", f"Credential is malformed: {parts['Credential']!r}"
    if key not in keys:
        return 400, "UnrecognizedClientException", "The security token included in the request is invalid."
    wanted = {}
    for name in signed:
        if name == "host":
            wanted[name] = headers.get("Host", "")
        elif headers.get(name) is None:
            return 403, "InvalidSignatureException", f"signed header {name} is not in the request"
        else:
            wanted[name] = ", ".join(v.strip() for v in headers.get_all(name))
    request = AWSRequest(method=method, url=f"http://{wanted.get('host', 'localhost')}{path}",
                         data=body, headers=wanted)
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(key, keys[key]), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != given:
        return (403, "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided. "
                "Check your AWS Secret Access Key and signing method.")
    with lock:
        stats["signed_by"][key] = stats["signed_by"].get(key, 0) + 1
        stats["signed_in"][region] = stats["signed_in"].get(region, 0) + 1
    return None


def signature_problem(amz_date):
    """AWS's message for a request signed too far from the proxy's clock, or None."""
    if not amz_date:
        return None
    try:
        signed = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        return f"bad X-Amz-Date {amz_date!r}"
    now = time.time() + clock_offset_s()
    if signed < now - SIGNATURE_WINDOW_S:
        return (f"Signature expired: {amz_date} is now earlier than "
                f"{amz_time(now - SIGNATURE_WINDOW_S)} ({amz_time(now)} - 5 min.)")
    if signed > now + SIGNATURE_WINDOW_S:
        return (f"Signature not yet current: {amz_date} is still later than "
                f"{amz_time(now + SIGNATURE_WINDOW_S)} ({amz_time(now)} + 5 min.)")
    return None


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

    def date_time_string(self, timestamp=None):
        """The `Date` of every answer: the proxy's clock."""
        return email.utils.formatdate((timestamp or time.time()) + clock_offset_s(), usegmt=True)

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
        # AWS checks the signature first: that it is there and right, then its time.
        wrong = signature_mismatch(self.command, self.path, self.headers, body)
        if wrong is not None:
            status, kind, why = wrong
            with lock:
                stats["signature_invalid"] += 1
            print(f"cwproxy: refused {target or self.path}: {kind}: {why}", file=sys.stderr, flush=True)
            return self.aws_error(status, kind, why)
        why = signature_problem(self.headers.get("X-Amz-Date"))
        if why is not None:
            with lock:
                stats["signature_refused"] += 1
            return self.aws_error(403, "InvalidSignatureException", why)
        with lock:
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
        old = new = 0
        if is_put:
            now = int((time.time() + clock_offset_s()) * 1000)
            with lock:
                forced_old, faults["reject_old"] = faults["reject_old"], 0
                shift_ms = int(faults["store_shift_s"] * 1000)
            req = json.loads(body)
            events = req["logEvents"]
            # Sorted (checked above): the too old are a prefix, the too new a suffix.
            while old < len(events) and (old < forced_old or events[old]["timestamp"] < now - MAX_AGE_MS):
                old += 1
            end = len(events)
            while end > old and events[end - 1]["timestamp"] > now + MAX_AHEAD_MS:
                end -= 1
            new = len(events) - end
            kept = events[old:end]
            error = max((abs(ev["timestamp"] - now) for ev in kept), default=0)
            req["logEvents"] = [dict(ev, timestamp=ev["timestamp"] - shift_ms) for ev in kept]
            body = json.dumps(req).encode()
        if is_put and not json.loads(body)["logEvents"]:
            status, headers, data = 200, [("Content-Type", "application/x-amz-json-1.1")], b"{}"
        else:
            status, headers, data = self.forward(body)
        if is_put and status == 200:
            with lock:
                # Arrival order across requests: a stream's accepted timestamps never go down.
                stream = (req.get("logGroupName"), req.get("logStreamName"))
                stamps = [ev["timestamp"] for ev in json.loads(body)["logEvents"]]
                if stamps and stamps[0] < last_stamp.get(stream, stamps[0]):
                    stats["stamp_went_back"] += 1
                    stats["violations"].append(
                        f"{stream}: a request starts at {stamps[0]}, before the last one's {last_stamp[stream]}")
                if stamps:
                    last_stamp[stream] = stamps[-1]
                stats["put_ok"] += 1
                stats["events_ok"] += len(json.loads(body).get("logEvents", []))
                stats["rejected_old"] += old
                stats["rejected_new"] += new
                stats["max_stamp_error_ms"] = max(stats["max_stamp_error_ms"], error)
            info = {}
            if old:
                info["tooOldLogEventEndIndex"] = old - 1
            if new:
                info["tooNewLogEventStartIndex"] = len(events) - new
            if info:
                answer = json.loads(data or b"{}")
                answer["rejectedLogEventsInfo"] = info
                data = json.dumps(answer).encode()
        self.send_response(status)
        for k, v in headers:
            # send_response wrote the proxy's own Date (and Server) already.
            if k.lower() not in HOP_BY_HOP and k.lower() not in ("date", "server"):
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
    ap.add_argument("--listen-on-stdin", action="store_true")
    ap.add_argument("--tls", default=None, help="CERT.pem:KEY.pem: answer HTTPS")
    ap.add_argument("--keys", default="testing:testing",
                    help="ACCESS_KEY:SECRET[,...]: the keys requests may be signed with")
    args = ap.parse_args()
    for pair in args.keys.split(","):
        access, _, secret = pair.partition(":")
        keys[access] = secret
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler, bind_and_activate=False)
    server.daemon_threads = True
    server.upstream = args.upstream
    server.server_bind()
    if args.listen_on_stdin:
        # Bound, not listening: Linux refuses a connection to it (RST), as to a server down.
        print(f"bound {server.server_address[1]}", flush=True)
        sys.stdin.readline()
    server.server_activate()
    if args.tls:
        import ssl
        cert, _, key = args.tls.partition(":")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
