#!/usr/bin/env python3
"""One of the Dockerfile's FROM-scratch images, multi-arch, as an OCI archive, from static binaries.

  python3 scripts/oci.py --stage hooklog-sidecar --build-arg HOOKLOG_VERSION=0.1.0 \\
      --build-arg HOOKLOG_COMMIT=0123456789ab --epoch 1796112331 \\
      --binary amd64=hooklog-sidecar-0.1.0-x86_64-unknown-linux-musl \\
      --binary arm64=hooklog-sidecar-0.1.0-aarch64-unknown-linux-musl \\
      --ca-bundle /etc/ssl/certs/ca-certificates.crt --ref-name 0.1.0 --out hooklog-sidecar.oci.tar

Both of hooklog's images (Dockerfile) are FROM scratch and hold one layer, the build stage's /out:
/usr/local/bin/hooklog and /etc/ssl/certs/ca-certificates.crt. scripts/release.sh has those
binaries already (cross-compiled, checked), so this writes the image layout directly instead of
building the Dockerfile again under emulation: one gzip tar layer per platform, its config, a
manifest per platform, an image index naming both, and the layout's index.json naming that index
by --ref-name (what `skopeo copy --all oci-archive:FILE docker://...` pushes as one multi-arch tag).

One source: the config (user, entrypoint, command, labels) is read from the stage's own lines in
the Dockerfile, with its ARG defaults and --build-arg as a build substitutes them; an instruction
this does not model (RUN, ENV, WORKDIR, ...) is an error, not a silent difference. tests/release.rs
compares the result with podman's build of the same Dockerfile.

Deterministic: the same inputs give the same bytes (every time is --epoch, the commit's; owners
0:0; entries in name order; gzip without a name or time), so the digests name the content.
"""

import argparse
import gzip
import hashlib
import io
import json
import re
import shlex
import sys
import tarfile
import time

# The OCI image spec's media types (image-spec v1.1, media-types.md).
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
# image-spec v1.1, image-layout.md: the layout's version file.
LAYOUT_VERSION = "1.0.0"
# The PATH a builder gives an image whose base has none: BuildKit's and buildah's default
# (moby/buildkit util/system DefaultPathEnvUnix; buildah's definitions: the same string). Both
# Dockerfile builds of hooklog's images carry it; so do these.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Where the Dockerfile's build stages put the two files (its build.sh), and their modes.
BINARY_PATH = "usr/local/bin/hooklog"
CA_PATH = "etc/ssl/certs/ca-certificates.crt"
# Docker's platform names for Rust's (the OCI image index's `platform`); arm64 is ARMv8.
PLATFORMS = {"amd64": {"architecture": "amd64", "os": "linux"},
             "arm64": {"architecture": "arm64", "os": "linux", "variant": "v8"}}
# The instructions a FROM-scratch stage may hold here; anything else is refused.
MODELLED = {"ARG", "COPY", "LABEL", "USER", "ENTRYPOINT", "CMD"}


def die(message):
    sys.exit(f"oci.py: {message}")


def logical_lines(text):
    """The Dockerfile's instructions: comments and blank lines out, `\\` continuations joined."""
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current)
    return lines


def substitute(value, args):
    """`$NAME` and `${NAME}` from the stage's ARGs, as a Dockerfile build does; unknown: empty."""
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: args.get(m.group(1) or m.group(2), ""), value)


def stage_config(dockerfile, stage, build_args):
    """The image config's `config` that the Dockerfile's FROM-scratch `stage` gives."""
    with open(dockerfile, encoding="utf-8") as f:
        lines = logical_lines(f.read())
    body, inside = [], False
    for line in lines:
        word = line.split(None, 1)[0].upper()
        if word == "FROM":
            parts = line.split()
            named = len(parts) >= 4 and parts[-2].upper() == "AS" and parts[-1] == stage
            if inside:
                break
            if named:
                if parts[1] != "scratch":
                    die(f"stage {stage} is FROM {parts[1]}, not scratch")
                inside = True
            continue
        if inside:
            body.append(line)
    if not inside:
        die(f"no stage {stage} in {dockerfile}")
    args, labels = {}, {}
    config = {"Env": [f"PATH={DEFAULT_PATH}"]}
    copies = 0
    for line in body:
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word not in MODELLED:
            die(f"stage {stage}: {word} is not modelled here (only {sorted(MODELLED)})")
        if word == "ARG":
            name, eq, default = rest.partition("=")
            args[name] = build_args.get(name, default if eq else "")
        elif word == "COPY":
            copies += 1
            if not re.fullmatch(r"--from=\S+ /out/ /", rest):
                die(f"stage {stage}: COPY {rest}: only `COPY --from=STAGE /out/ /` is modelled")
        elif word == "LABEL":
            for pair in shlex.split(rest):
                key, eq, value = pair.partition("=")
                if not eq:
                    die(f"stage {stage}: LABEL {pair}: the old `LABEL key value` form")
                labels[key] = substitute(value, args)
        elif word == "USER":
            config["User"] = substitute(rest, args)
        elif word in ("ENTRYPOINT", "CMD"):
            try:
                value = json.loads(rest)
            except json.JSONDecodeError:
                die(f"stage {stage}: {word} {rest}: only the exec (JSON) form is modelled")
            config["Entrypoint" if word == "ENTRYPOINT" else "Cmd"] = value
    if copies != 1:
        die(f"stage {stage}: {copies} COPY lines, one is modelled")
    if labels:
        config["Labels"] = labels
    return config


def layer(binary, ca_bundle, epoch):
    """The stage's one layer, an uncompressed tar: the folders, the binary and the CA bundle."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(name, mode, data=None):
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        with open(binary, "rb") as f:
            hooklog = f.read()
        with open(ca_bundle, "rb") as f:
            ca = f.read()
        entries = {"etc/": None, "etc/ssl/": None, "etc/ssl/certs/": None, CA_PATH: (0o644, ca),
                   "usr/": None, "usr/local/": None, "usr/local/bin/": None, BINARY_PATH: (0o755, hooklog)}
        for name in sorted(entries):
            if entries[name] is None:
                add(name.rstrip("/"), 0o755)
            else:
                add(name, *entries[name])
    return out.getvalue()


class Layout:
    """An OCI image layout being written: blobs by digest, in memory until `write`."""

    def __init__(self):
        self.blobs = {}

    def add(self, media_type, data, **extra):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return {"mediaType": media_type, "digest": digest, "size": len(data), **extra}

    def add_json(self, media_type, value, **extra):
        return self.add(media_type, canonical(value), **extra)

    def write(self, path, index, epoch):
        with open(path, "wb") as f, tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
            files = {"oci-layout": canonical({"imageLayoutVersion": LAYOUT_VERSION}),
                     "index.json": canonical(index)}
            for digest, data in self.blobs.items():
                files["blobs/sha256/" + digest.split(":", 1)[1]] = data
            folders = {"blobs", "blobs/sha256"}
            for name in sorted(folders | set(files)):
                info = tarfile.TarInfo(name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
                if name in folders:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                else:
                    info.mode, info.size = 0o644, len(files[name])
                    tar.addfile(info, io.BytesIO(files[name]))


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--dockerfile", default="Dockerfile")
    p.add_argument("--stage", required=True, help="the Dockerfile's FROM-scratch stage")
    p.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--binary", action="append", required=True, metavar="ARCH=PATH",
                   help=f"the static binary for linux/ARCH ({', '.join(PLATFORMS)})")
    p.add_argument("--ca-bundle", required=True)
    p.add_argument("--epoch", type=int, required=True, help="every time in the image (the commit's)")
    p.add_argument("--ref-name", required=True, help="the index's org.opencontainers.image.ref.name")
    p.add_argument("--out", required=True)
    a = p.parse_args()

    build_args = dict(arg.partition("=")[::2] for arg in a.build_arg)
    config = stage_config(a.dockerfile, a.stage, build_args)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(a.epoch))
    layout, manifests = Layout(), []
    for pair in a.binary:
        arch, _, binary = pair.partition("=")
        if arch not in PLATFORMS:
            die(f"--binary {pair}: the platforms are {sorted(PLATFORMS)}")
        tar = layer(binary, a.ca_bundle, a.epoch)
        platform = PLATFORMS[arch]
        image_config = {
            **platform,
            "created": created,
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar).hexdigest()]},
            "history": [{"created": created, "created_by": f"scripts/oci.py: {a.stage}'s COPY of /out/ (hooklog, CA bundle)"}],
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": layout.add_json(CONFIG, image_config),
            "layers": [layout.add(LAYER, gzip.compress(tar, compresslevel=9, mtime=0))],
        }
        if config.get("Labels"):
            manifest["annotations"] = config["Labels"]
        manifests.append(layout.add_json(MANIFEST, manifest, platform=platform))
    index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}
    if config.get("Labels"):
        index["annotations"] = config["Labels"]
    top = {"schemaVersion": 2, "mediaType": INDEX, "manifests": [
        layout.add_json(INDEX, index, annotations={"org.opencontainers.image.ref.name": a.ref_name})]}
    layout.write(a.out, top, a.epoch)
    print(f"oci.py: {a.out}: {a.stage} for {', '.join(m['platform']['architecture'] for m in manifests)}, "
          f"index {top['manifests'][0]['digest']}", file=sys.stderr)


if __name__ == "__main__":
    main()
