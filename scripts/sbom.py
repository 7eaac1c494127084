#!/usr/bin/env python3
"""A release SBOM of one binary from cargo-cyclonedx's (scripts/release.sh).

  python3 scripts/sbom.py VERSION COMMIT WORKDIR HOME SBOM LINKED > NAME-VERSION-TARGET.cdx.json

SBOM is cargo-cyclonedx's for the binary's features and target, LINKED the crates cargo builds
into that binary (`cargo tree -e normal --prefix none --format '{p}'`, one `NAME vVERSION` a
line). cargo-cyclonedx reads `cargo metadata`, whose features are unified with the
dev-dependencies' and the build's host side: it listed crates the binary does not link
(time-macros, and aho-corasick in the full CLI), which cargo's own resolver (resolver 2, cargo
tree's) leaves out (its open issue 760, "Support Cargo resolver v2": cargo metadata cannot tell
it). Those are taken out here, with the dependency edges that name them, and
listed in the property `hooklog:not-linked`; a crate the binary links and the SBOM lacks is an
error, and so is an SBOM that does not describe hooklog VERSION.

cargo-cyclonedx names hooklog's own package (and the vendored libyaml-safer) by the folder it ran
in (`path+file:///tmp/...`): that folder is replaced by the release's source, HOME at COMMIT, in
cargo's form for a git source, so that the same commit gives the same SBOM. The targets differ in
their dependency edges (ring and cpufeatures use libc on aarch64 only), hence one SBOM a binary.
"""

import json
import sys

# This script's property: the crates cargo-cyclonedx listed that the binary does not link.
NOT_LINKED_PROPERTY = "hooklog:not-linked"


def die(message):
    sys.exit(f"sbom.py: {message}")


def main():
    if len(sys.argv) != 7:
        die("usage: sbom.py VERSION COMMIT WORKDIR HOME SBOM LINKED")
    version, commit, workdir, home, sbom_path, linked_path = sys.argv[1:]
    with open(sbom_path, encoding="utf-8") as f:
        bom = json.loads(f.read().replace(f"path+file://{workdir}", f"git+{home}?rev={commit}"))
    if bom.get("bomFormat") != "CycloneDX":
        die(f"{sbom_path} is not a CycloneDX BOM")
    component = bom["metadata"]["component"]
    if (component["name"], component["version"]) != ("hooklog", version):
        die(f"{sbom_path} describes {component['name']} {component['version']}, not hooklog {version}")

    with open(linked_path, encoding="utf-8") as f:
        # `name vX.Y.Z`, with ` (path)`, ` (proc-macro)` or ` (*)` after some.
        linked = {line.split(" (")[0].strip() for line in f if line.strip()}
    linked.discard(f"hooklog v{version}")
    named = {f"{c['name']} v{c['version']}": c for c in bom["components"]}
    missing = sorted(linked - set(named))
    if missing:
        die(f"the binary links crates {sbom_path} lacks: {missing}")
    dropped = {named[n]["bom-ref"]: n for n in sorted(set(named) - linked)}
    bom["components"] = [c for c in bom["components"] if c["bom-ref"] not in dropped]
    bom["dependencies"] = [
        {**d, "dependsOn": [r for r in d.get("dependsOn", []) if r not in dropped]}
        for d in bom["dependencies"] if d["ref"] not in dropped]
    bom["metadata"].setdefault("properties", []).extend(
        {"name": NOT_LINKED_PROPERTY, "value": n} for n in sorted(dropped.values()))
    json.dump(bom, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
