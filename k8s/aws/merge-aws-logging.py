#!/usr/bin/env python3
"""Adds hooklog's parser and filter to an existing aws-logging ConfigMap, keeping everything the
ConfigMap already has (its outputs, filters and parsers, byte for byte):

  kubectl -n aws-observability get configmap aws-logging -o json \\
    | python3 k8s/aws/merge-aws-logging.py | kubectl apply -f -

Reads the ConfigMap as JSON on stdin and writes it, merged, as JSON on stdout. The additions are
k8s/aws/hooklog-parsers.conf (the hooklog_json parser) and k8s/aws/hooklog-filters.conf (a parser
filter for hooklog containers' lines). The filter goes right after the filter that parses the CRI
line (`Parser crio` in the ConfigMap AWS documents), so that it sees the line's JSON and the
kubernetes filter after it sees hooklog's fields; without a CRI parser filter, the crio parser and
its filter are added first. Each cloudwatch_logs output without a log_format gets
`log_format json/emf`, which `hooklog run --emf` needs. Running it again changes nothing. Python 3 only, no modules.
Exit 1 with the reason when the result would break Fargate's rules (5300 characters).
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Fargate refuses a larger ConfigMap
# (https://docs.aws.amazon.com/eks/latest/userguide/fargate-logging.html).
FARGATE_MAX_CHARS = 5300
# The cloudwatch_logs output's format that extracts EMF metrics
# (https://docs.fluentbit.io/manual/pipeline/outputs/cloudwatch: log_format).
EMF_FORMAT = "json/emf"

CRIO_PARSER = """[PARSER]
    Name crio
    Format Regex
    Regex ^(?<time>[^ ]+) (?<stream>stdout|stderr) (?<logtag>P|F) (?<log>.*)$
    Time_Key time
    Time_Format %Y-%m-%dT%H:%M:%S.%L%z
"""
CRIO_FILTER = """[FILTER]
    Name parser
    Match kube.*
    Key_Name log
    Parser crio
"""


def sections(text):
    """[(start, end, {key: value})] of each [SECTION] in a Fluent Bit configuration text."""
    found = []
    starts = [m.start() for m in re.finditer(r"(?m)^[ \t]*\[[A-Z]+\]", text)]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        keys = {}
        for line in text[start:end].splitlines()[1:]:
            parts = line.strip().split(None, 1)
            if len(parts) == 2 and not parts[0].startswith("#"):
                keys[parts[0].lower()] = parts[1].strip()
        found.append((start, end, keys))
    return found


def indent_of(text):
    """The indentation the existing sections use for their keys (four spaces by default)."""
    m = re.search(r"(?m)^([ \t]+)Name\b", text)
    return m.group(1) if m else "    "


def reindent(block, indent):
    return "".join(
        (indent + line.strip() + "\n") if not line.lstrip().startswith("[") else line.strip() + "\n"
        for line in block.splitlines()
        if line.strip()
    )


def has_parser(text, name):
    return any(k.get("name") == name for _, _, k in sections(text))


def merge(data):
    parsers = data.get("parsers.conf", "")
    filters = data.get("filters.conf", "")
    ours_parser = (HERE / "hooklog-parsers.conf").read_text()
    ours_filter = (HERE / "hooklog-filters.conf").read_text()
    add_parsers = []
    if not has_parser(parsers, "crio"):
        add_parsers.append(CRIO_PARSER)
    if not has_parser(parsers, "hooklog_json"):
        add_parsers.append(ours_parser)
    if add_parsers:
        body = parsers if not parsers or parsers.endswith("\n") else parsers + "\n"
        parsers = body + "".join(reindent(p, indent_of(parsers)) for p in add_parsers)

    secs = sections(filters)
    if not any(k.get("parser") == "hooklog_json" for _, _, k in secs):
        indent = indent_of(filters)
        crio = [end for _, end, k in secs if k.get("name") == "parser" and k.get("parser") == "crio"]
        block = reindent(ours_filter, indent)
        if not crio:
            # Parse the CRI line first, before every other filter.
            filters = reindent(CRIO_FILTER, indent) + block + filters
        else:
            at = crio[0]
            head = filters[:at] if filters[:at].endswith("\n") else filters[:at] + "\n"
            filters = head + block + filters[at:]
    data["parsers.conf"] = parsers
    data["filters.conf"] = filters
    data["output.conf"] = with_emf(data.get("output.conf", ""))
    return data


def with_emf(outputs):
    """Each cloudwatch_logs output without a log_format gets `log_format json/emf`, which
    `hooklog run --emf` needs: without it the plugin ships the EMF object as a plain log event
    and CloudWatch extracts no metric. An output with another log_format is kept, and said."""
    for start, end, keys in reversed(sections(outputs)):
        if keys.get("name") != "cloudwatch_logs":
            continue
        if "log_format" in keys:
            if keys["log_format"] != EMF_FORMAT:
                print(f"merge-aws-logging.py: note: an output has log_format {keys['log_format']}, "
                      f"kept: hooklog run --emf needs {EMF_FORMAT}", file=sys.stderr)
            continue
        body = outputs[start:end]
        trimmed = body.rstrip("\n")
        line = indent_of(body) + "log_format " + EMF_FORMAT + "\n"
        outputs = outputs[:start] + trimmed + "\n" + line + body[len(trimmed):].lstrip("\n") + outputs[end:]
    return outputs


def main():
    configmap = json.load(sys.stdin)
    if configmap.get("kind") != "ConfigMap":
        sys.exit(f"merge-aws-logging.py: stdin is a {configmap.get('kind')}, not the aws-logging ConfigMap")
    data = merge(dict(configmap.get("data") or {}))
    chars = sum(len(k) + len(v) for k, v in data.items())
    if chars > FARGATE_MAX_CHARS:
        sys.exit(f"merge-aws-logging.py: the merged ConfigMap has {chars} characters, Fargate takes {FARGATE_MAX_CHARS}")
    configmap["data"] = data
    # What `kubectl apply` must not carry over from `kubectl get`.
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "selfLink"):
        configmap.get("metadata", {}).pop(key, None)
    json.dump(configmap, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
