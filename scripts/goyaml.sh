#!/usr/bin/env bash
# The go-yaml oracle (tests/goyaml.rs and the manifest property tests): a small decoder,
# tests/support/goyaml/main.go, that reads a YAML stream as Kubernetes does (go-yaml v2, then
# sigs.k8s.io/yaml's YAMLToJSON conversion) and answers one JSON line per request line.
#
#   bash scripts/goyaml.sh build     # builds it if needed, prints the binary's path
#
# Built from Debian's packages only: golang-gopkg-yaml.v2-dev (bookworm: 2.4.0, the go-yaml v2
# that sigs.k8s.io/yaml reads with) and golang-1.19-go (the kubelet tier's), in GOPATH mode.
# Cached under the cache dir, keyed by both packages' versions and the source: a warm run only
# checks the key.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== goyaml.sh: %s\n' "$*" >&2; }
die() { printf 'goyaml.sh: %s\n' "$*" >&2; exit 1; }

# Same rule as scripts/kubelet.sh.
cache=${HOOKLOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hooklog}
GO=/usr/lib/go-1.19/bin/go
PKGS=(golang-1.19-go golang-gopkg-yaml.v2-dev)

need_packages() {
  local missing=() p
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "not root: cannot install ${missing[*]}"
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq -o DPkg::Lock::Timeout=600
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
    --no-install-recommends "${missing[@]}" >/dev/null
}

pkg_version() { dpkg-query -W -f='${Version}' "$1"; }

build() {
  need_packages
  local key
  key=$({ pkg_version golang-1.19-go; pkg_version golang-gopkg-yaml.v2-dev
          cat tests/support/goyaml/main.go; declare -f build; } | sha256sum | cut -c1-16)
  local out=$cache/goyaml-$key
  if [ -x "$out/goyaml" ]; then
    echo "$out/goyaml"; return
  fi
  local gopath
  gopath=$(mktemp -d)
  mkdir -p "$gopath/src/goyaml" "$out"
  cp tests/support/goyaml/main.go "$gopath/src/goyaml/"
  # A temporary name, renamed at the end: a build that fails half-way leaves no binary.
  (cd "$gopath/src/goyaml" &&
    GO111MODULE=off GOFLAGS= GOTOOLCHAIN=local GOROOT=/usr/lib/go-1.19 \
    GOPATH="$gopath:/usr/share/gocode" GOCACHE="$gopath/cache" \
    "$GO" build -o "$out/goyaml.tmp" .) || { rm -rf "$gopath"; die "go build failed"; }
  rm -rf "$gopath"
  mv "$out/goyaml.tmp" "$out/goyaml"
  log "built $out/goyaml"
  echo "$out/goyaml"
}

case "${1:-}" in
  build) build ;;
  *) die "usage: $0 build" ;;
esac
