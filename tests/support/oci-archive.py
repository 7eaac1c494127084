#!/usr/bin/env python3
"""Writes an OCI image archive from a folder, for `ctr images import` (scripts/kubelet.sh).

    oci-archive.py ROOTFS NAME ENTRYPOINT_JSON OUT.tar

One uncompressed layer holding ROOTFS (owned by root, mtime 0: the same files give the same
digest), a config with the entrypoint, and the name ctr import gives the image
(io.containerd.image.name). Nothing here can be pulled, so the tier's images are made this way.
"""
import hashlib
import io
import json
import os
import sys
import tarfile


def digest(b: bytes) -> str:
    return "sha256:" + hashlib.sha256(b).hexdigest()


def layer_of(rootfs: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for d, dirs, files in os.walk(rootfs):
            dirs.sort()
            for n in dirs + sorted(files):
                p = os.path.join(d, n)
                i = t.gettarinfo(p, os.path.relpath(p, rootfs))
                i.mtime, i.uid, i.gid, i.uname, i.gname = 0, 0, 0, "", ""
                if i.isfile():
                    with open(p, "rb") as f:
                        t.addfile(i, f)
                else:
                    t.addfile(i)
    return out.getvalue()


def main() -> None:
    rootfs, name, entrypoint, out = sys.argv[1:5]
    layer = layer_of(rootfs)
    arch = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
    config = json.dumps(
        {
            "architecture": arch,
            "os": "linux",
            "config": {
                "Entrypoint": json.loads(entrypoint),
                "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            },
            "rootfs": {"type": "layers", "diff_ids": [digest(layer)]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": digest(layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": digest(manifest),
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                    },
                }
            ],
        }
    ).encode()
    with tarfile.open(out, "w") as t:

        def add(path: str, data: bytes) -> None:
            i = tarfile.TarInfo(path)
            i.size = len(data)
            t.addfile(i, io.BytesIO(data))

        add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add("index.json", index)
        for b in (layer, config, manifest):
            add("blobs/sha256/" + digest(b)[len("sha256:"):], b)


if __name__ == "__main__":
    main()
