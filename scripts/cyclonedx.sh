#!/usr/bin/env bash
# cargo-cyclonedx, the CycloneDX project's cargo plugin (github.com/CycloneDX/cyclonedx-rust-cargo,
# Apache-2.0), which writes the release's SBOMs (scripts/release.sh):
#
#   bash scripts/cyclonedx.sh        # installs it if needed, prints the binary's path
#
# Pinned, built from crates.io with its own Cargo.lock (`cargo install --locked`), and cached
# under the cache dir keyed by its version: a warm run only finds the binary. Cold: a build of
# 123 crates, 6 min (3 CPU-min) on a loaded 2-core machine (scripts/test.sh runs this in
# its set-up).
set -euo pipefail

# 0.5.9: the newest release when pinned (2026-12), with --target and --no-default-features.
VERSION=0.5.9
# Same rule as scripts/kubelet.sh.
cache=${HOOKLOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hooklog}
root="$cache/cargo-cyclonedx-$VERSION"
bin="$root/bin/cargo-cyclonedx"
if [ ! -x "$bin" ]; then
  printf '== cyclonedx.sh: cargo install cargo-cyclonedx %s into %s\n' "$VERSION" "$root" >&2
  # Into a temporary root, renamed whole: a build stopped half-way leaves no binary to trust.
  tmp="$root.tmp.$$"
  rm -rf "$tmp"
  cargo install --quiet --locked --root "$tmp" --version "$VERSION" cargo-cyclonedx >&2
  rm -rf "$root"
  mv "$tmp" "$root"
fi
printf '%s\n' "$bin"
