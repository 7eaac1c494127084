#!/usr/bin/env bash
# The real-kubelet tier (tests/kubelet.rs): a kubelet and containerd of the tests' own, on this
# machine, from Debian's packages only.
#
#   bash scripts/kubelet.sh build           # kubelet + kube-apiserver, cached; prints their folder
#   bash scripts/kubelet.sh start STATE     # containerd + kubelet under STATE; writes STATE/env
#   bash scripts/kubelet.sh stop STATE      # stops both by PID, unmounts, restores the host
#
# build: bookworm's `kubernetes` source package (1.20.2, with vendor/), fetched with a private
# APT_CONFIG (its own sources list, lists and caches: the machine's sources stay as they are),
# built with Debian's golang-1.19 in GOPATH mode after `make generated_files`. The vendored
# github.com/modern-go/reflect2 1.0.1 crashes under Go 1.19 (it reads runtime internals that
# moved); Debian's golang-github-modern-go-reflect2-dev (1.0.2) replaces it. The binaries and
# Go's build cache are kept under the cache dir, keyed by every input's version: a warm run
# only checks the key.
#
# start: Debian's containerd on a socket and root of its own (never the system's), runc, and
# the kubelet with static pods only (no API server): a pod is a manifest in STATE/manifests,
# and deleting it means removing the file. Nothing is pulled: the pause image (a static build
# of tests/support/pause.c) is imported into containerd, and both the kubelet and containerd are
# told to use it.
# The kubelet changes sysctls (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, ...);
# start saves them in STATE and stop writes them back.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

log() { printf '== kubelet.sh: %s\n' "$*" >&2; }
die() { printf 'kubelet.sh: %s\n' "$*" >&2; exit 1; }

# Same rule as tests/util/podman.rs and tests/support/rust-standin.sh.
cache=${HOOKLOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hooklog}/kubelet
# The upstream version in bookworm's source package (1.20.5+really1.20.2-1.1+deb12u1: the 1.20.2
# tree). The tree is fetched once and kept; a Debian update to it is not picked up until the
# cache's src-* folder is removed.
K8S_SRC_VERSION=1.20.2
GO=/usr/lib/go-1.19/bin/go
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
PKGS=(golang-1.19-go golang-github-modern-go-reflect2-dev containerd runc busybox-static dpkg-dev make rsync)

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

# Runs "$@" holding the cache's lock: two test runs on one machine share ~/.cache/hooklog, and
# the second waits for the first one's build instead of building into the same folders.
locked() {
  mkdir -p "$cache"
  exec 8>"$cache/lock"
  flock 8
  "$@"
}

# The source tree, unpacked once into $cache/src-$K8S_SRC_VERSION with reflect2 replaced.
fetch_source() {
  local src=$cache/src-$K8S_SRC_VERSION
  if [ -f "$src/.hooklog-ready" ]; then echo "$src"; return; fi
  local apt=$cache/apt
  rm -rf "$apt" "$src"
  mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/fetch"
  # One deb-src line, in a sources list nobody else reads.
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
    > "$apt/sources.list"
  cat > "$apt/apt.conf" <<EOF
Dir::Etc::SourceList "$apt/sources.list";
Dir::Etc::SourceParts "$apt/sources.list.d";
Dir::State::Lists "$apt/lists";
Dir::Cache "$apt/cache";
APT::Sandbox::User "root";
EOF
  log "fetching the kubernetes $K8S_SRC_VERSION source package (private APT_CONFIG in $apt)"
  APT_CONFIG=$apt/apt.conf apt-get update -qq
  local version
  version=$(APT_CONFIG=$apt/apt.conf apt-cache showsrc kubernetes | sed -n 's/^Version: //p' | head -n1)
  case "$version" in
    *"$K8S_SRC_VERSION"-*) ;;
    *) die "bookworm's kubernetes source is '$version', not the $K8S_SRC_VERSION tree this script builds" ;;
  esac
  (cd "$apt/fetch" && APT_CONFIG=$apt/apt.conf apt-get source -qq --download-only "kubernetes=$version" >&2)
  local dsc
  dsc=$(ls "$apt"/fetch/kubernetes_*.dsc)
  # dpkg-source warns that it cannot check the uploader's signature (no debian-keyring here):
  # apt has already checked every file against the signed Release file.
  dpkg-source -x "$dsc" "$src.tmp" >&2
  # reflect2 1.0.1 (vendored) panics at start under Go 1.19; 1.0.2 from Debian does not.
  rm -rf "$src.tmp/vendor/github.com/modern-go/reflect2"
  cp -a "$REFLECT2" "$src.tmp/vendor/github.com/modern-go/reflect2"
  touch "$src.tmp/.hooklog-ready"
  mv "$src.tmp" "$src"
  # The downloads and the orig tarball dpkg-source links beside the tree are of no more use.
  rm -rf "$apt" "$cache"/kubernetes_*
  echo "$src"
}

# Builds cmd/kubelet and cmd/kube-apiserver into $cache/bin-<key>/ unless that exists; prints it.
build() {
  need_packages
  # Every input that changes the binaries: the source, the compiler, the reflect2 swap and
  # this function's text.
  local key
  key=$({ echo "$K8S_SRC_VERSION"; pkg_version golang-1.19-go; pkg_version golang-github-modern-go-reflect2-dev
          declare -f build fetch_source; } | sha256sum | cut -c1-16)
  local out=$cache/bin-$key
  if [ -x "$out/kubelet" ] && [ -x "$out/kube-apiserver" ]; then
    log "kubelet and kube-apiserver $K8S_SRC_VERSION cached in $out"
    echo "$out"; return
  fi
  local src started=$SECONDS
  src=$(fetch_source)
  export GOROOT=/usr/lib/go-1.19 PATH=/usr/lib/go-1.19/bin:$PATH
  # GOPATH mode: the tree's hack/ scripts make their own GOPATH under _output and find vendor/.
  export GO111MODULE=off GOFLAGS= GOTOOLCHAIN=local
  # No .git in a source package: the version the binaries report comes from here.
  printf "KUBE_GIT_VERSION='v%s'\nKUBE_GIT_TREE_STATE='clean'\nKUBE_GIT_MAJOR='1'\nKUBE_GIT_MINOR='20'\n" \
    "$K8S_SRC_VERSION" > "$src/.hooklog-version"
  export KUBE_GIT_VERSION_FILE=$src/.hooklog-version
  # Only reached when the key changed or a build failed: a failed build can leave an empty
  # generator binary that make then takes as up to date, so start from no _output (Go's own
  # cache keeps the rebuild short).
  rm -rf "$src/_output"
  # hack/lib/golang.sh sets GOCACHE to _output/local/go/cache: point that at a folder that
  # outlives _output (2.1 GB after a build; with it a rebuild compiles nothing that is cached).
  mkdir -p "$src/_output/local/go" "$cache/gocache"
  ln -s "$cache/gocache" "$src/_output/local/go/cache"
  log "make generated_files (Go $("$GO" env GOVERSION), Go cache $cache/gocache)"
  make -C "$src" generated_files >&2
  log "generated_files after $((SECONDS - started)) s; building kubelet and kube-apiserver"
  make -C "$src" WHAT="cmd/kubelet cmd/kube-apiserver" >&2
  mkdir -p "$out.tmp"
  cp "$src/_output/bin/kubelet" "$src/_output/bin/kube-apiserver" "$out.tmp/"
  rm -rf "$out"; mv "$out.tmp" "$out"
  # Older keys' binaries are of no more use.
  for d in "$cache"/bin-*; do [ "$d" = "$out" ] || rm -rf "$d"; done
  log "built in $((SECONDS - started)) s: $("$out/kubelet" --version)"
  echo "$out"
}

# --- images -----------------------------------------------------------------------------------
# Names the tests use; nothing is ever pulled (imagePullPolicy: Never in every test pod).
PAUSE_IMAGE=localhost/hooklog-kubelet/pause:1
BUSYBOX_IMAGE=localhost/hooklog-kubelet/busybox:1
SHELL_LESS_IMAGE=localhost/hooklog-kubelet/shell-less:1

# The three images the tests need besides hooklog's, as OCI archives in $cache/images
# (tests/support/oci-archive.py), remade only when their inputs change:
# - pause: tests/support/pause.c, static, the pod sandbox (containerd's sandbox_image);
# - busybox: Debian's static busybox at /bin with its applets linked (a shell and sleep), and
#   the pause binary as its entrypoint (busybox's sleep as PID 1 ignores SIGTERM, so every pod
#   would take its whole grace period to stop);
# - shell-less: the pause binary alone, as /usr/local/bin/envoy: no shell, no sleep, like the
#   distroless envoy of the seed incident.
make_images() {
  local dir=$cache/images key
  key=$({ pkg_version busybox-static; cat tests/support/pause.c tests/support/oci-archive.py
          declare -f make_images; } | sha256sum | cut -c1-16)
  if [ -f "$dir/$key.ready" ]; then echo "$dir"; return; fi
  rm -rf "$dir"
  local roots=$dir/roots cc=musl-gcc applet
  command -v musl-gcc >/dev/null || cc=gcc
  mkdir -p "$roots/pause" "$roots/busybox/bin" "$roots/busybox/tmp" \
    "$roots/shell-less/usr/local/bin" "$roots/shell-less/tmp"
  "$cc" -static -O2 -o "$roots/pause/pause" tests/support/pause.c
  cp "$roots/pause/pause" "$roots/shell-less/usr/local/bin/envoy"
  cp "$roots/pause/pause" "$roots/busybox/pause"
  cp /bin/busybox "$roots/busybox/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$roots/busybox/bin/$applet"
  done
  python3 tests/support/oci-archive.py "$roots/pause" "$PAUSE_IMAGE" '["/pause"]' "$dir/pause.tar"
  python3 tests/support/oci-archive.py "$roots/busybox" "$BUSYBOX_IMAGE" '["/pause"]' "$dir/busybox.tar"
  python3 tests/support/oci-archive.py "$roots/shell-less" "$SHELL_LESS_IMAGE" '["/usr/local/bin/envoy"]' "$dir/shell-less.tar"
  rm -rf "$roots"
  touch "$dir/$key.ready"
  echo "$dir"
}

# --- start and stop ---------------------------------------------------------------------------
# Host settings the kubelet changes (pkg/kubelet/cm: setupKernelTunables), saved by start and
# written back by stop.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
         kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# How long start waits for containerd's socket and for the kubelet's sync loop.
START_TIMEOUT_S=60

# Polls "$@" every 0.2 s until it succeeds; dies after START_TIMEOUT_S or when PID exits.
wait_for() { # WHAT PID LOG CMD...
  local what=$1 pid=$2 logfile=$3 t=0
  shift 3
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then tail -30 "$logfile" >&2; die "$what exited"; fi
    t=$((t + 1))
    [ $t -lt $((START_TIMEOUT_S * 5)) ] || { tail -30 "$logfile" >&2; die "$what not ready in ${START_TIMEOUT_S}s"; }
    sleep 0.2
  done
}

start() {
  local state=${1:?usage: kubelet.sh start STATE}
  [ "$(id -u)" = 0 ] || die "the kubelet tier needs root"
  local bin images
  bin=$(locked build)
  images=$(locked make_images)
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  [ ! -e "$state/env" ] || die "$state/env exists: stop that kubelet first (kubelet.sh stop $state)"
  mkdir -p "$state"/{manifests,kubelet,pki,volume-plugins,containerd/root,containerd/state,cni/conf,cni/bin}
  local s v
  : > "$state/sysctls"
  for s in "${SYSCTLS[@]}"; do
    if v=$(sysctl -n "$s" 2>/dev/null); then echo "$s=$v" >> "$state/sysctls"; fi
  done
  local sock=$state/containerd.sock
  # Every path containerd writes is under STATE; the CRI plugin is told the pause image (it
  # would pull registry.k8s.io/pause otherwise) and finds no CNI (every test pod is hostNetwork).
  # restrict_oom_score_adj: where root lacks CAP_SYS_RESOURCE (this machine's sandbox), runc
  # cannot lower oom_score_adj to the sandbox's -998 and no pod starts ("can't get final
  # child's PID from pipe"); restricted, containerd keeps scores at or above its own.
  printf '%s\n' \
    'version = 2' \
    "root = \"$state/containerd/root\"" \
    "state = \"$state/containerd/state\"" \
    '[grpc]' "  address = \"$sock\"" \
    '[ttrpc]' "  address = \"$sock.ttrpc\"" \
    '[plugins."io.containerd.internal.v1.opt"]' "  path = \"$state/containerd/opt\"" \
    '[plugins."io.containerd.grpc.v1.cri"]' \
    "  sandbox_image = \"$PAUSE_IMAGE\"" \
    '  disable_apparmor = true' \
    '  restrict_oom_score_adj = true' \
    '  [plugins."io.containerd.grpc.v1.cri".containerd]' \
    '    snapshotter = "overlayfs"' \
    '    default_runtime_name = "runc"' \
    '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]' \
    '      runtime_type = "io.containerd.runc.v2"' \
    '  [plugins."io.containerd.grpc.v1.cri".cni]' \
    "    bin_dir = \"$state/cni/bin\"" \
    "    conf_dir = \"$state/cni/conf\"" \
    > "$state/containerd.toml"
  log "containerd on $sock"
  containerd --config "$state/containerd.toml" > "$state/containerd.log" 2>&1 &
  echo $! > "$state/containerd.pid"
  wait_for containerd "$(cat "$state/containerd.pid")" "$state/containerd.log" ctr --address "$sock" version
  local i
  for i in pause busybox shell-less; do
    ctr --address "$sock" -n k8s.io images import "$images/$i.tar" >/dev/null
  done
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  log "$("$bin/kubelet" --version) on 127.0.0.1:$port, static pods from $state/manifests"
  # No API server: standalone, static pods only. The flags keep it off the host's iptables,
  # swap, cgroup hierarchy and well-known ports; image GC and eviction off, so that a full
  # disk elsewhere never deletes the test's imported images.
  "$bin/kubelet" \
    --container-runtime=remote --container-runtime-endpoint="unix://$sock" \
    --pod-manifest-path="$state/manifests" --file-check-frequency=1s \
    --cgroup-driver=cgroupfs --cgroups-per-qos=false --enforce-node-allocatable= \
    --fail-swap-on=false --read-only-port=0 --healthz-port=0 --make-iptables-util-chains=false \
    --root-dir="$state/kubelet" --cert-dir="$state/pki" --volume-plugin-dir="$state/volume-plugins" \
    --pod-infra-container-image="$PAUSE_IMAGE" --address=127.0.0.1 --port="$port" \
    --hostname-override="$(node_name "$state")" --image-gc-high-threshold=100 --eviction-hard= \
    --v=2 > "$state/kubelet.log" 2>&1 &
  echo $! > "$state/kubelet.pid"
  wait_for kubelet "$(cat "$state/kubelet.pid")" "$state/kubelet.log" \
    grep -q 'Starting kubelet main sync loop' "$state/kubelet.log"
  {
    echo "HOOKLOG_TEST_KUBELET=$state"
    echo "HOOKLOG_TEST_KUBELET_BIN=$bin"
    echo "HOOKLOG_TEST_KUBELET_NODE=$(node_name "$state")"
    echo "HOOKLOG_TEST_KUBELET_PAUSE_IMAGE=$PAUSE_IMAGE"
    echo "HOOKLOG_TEST_KUBELET_BUSYBOX_IMAGE=$BUSYBOX_IMAGE"
    echo "HOOKLOG_TEST_KUBELET_SHELL_LESS_IMAGE=$SHELL_LESS_IMAGE"
  } > "$state/env"
  log "ready ($state/env)"
}

# The node name of the tier in STATE: its own, so that two tiers on one machine never share
# the names of their pods' log folders (a static pod is named <name>-<node>).
node_name() {
  echo "hooklog-kubelet-$(printf '%s' "$1" | sha256sum | cut -c1-8)"
}

# Waits for a PID to go, SIGKILL after 30 s.
wait_gone() {
  local pid=$1
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  log "pid $pid did not stop in 30 s: SIGKILL"
  kill -9 "$pid" 2>/dev/null || true
}

# Stops what start started, by the PIDs it wrote, from whatever state it is in; safe to repeat.
stop() {
  local state=${1:?usage: kubelet.sh stop STATE}
  [ -d "$state" ] || return 0
  local sock=$state/containerd.sock pid c
  rm -f "$state"/manifests/*
  if [ -f "$state/kubelet.pid" ]; then
    pid=$(cat "$state/kubelet.pid")
    kill "$pid" 2>/dev/null || true
    wait_gone "$pid"
    rm -f "$state/kubelet.pid"
  fi
  if [ -f "$state/containerd.pid" ]; then
    # Whatever the kubelet left running: kill every task, then delete tasks and containers,
    # which ends their shims (containerd-shim-runc-v2 would outlive containerd).
    local ctr=(ctr --address "$sock" -n k8s.io)
    for c in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    for c in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      for _ in $(seq 1 50); do "${ctr[@]}" tasks delete "$c" >/dev/null 2>&1 && break; sleep 0.1; done
    done
    for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do
      "${ctr[@]}" containers delete "$c" >/dev/null 2>&1 || true
    done
    pid=$(cat "$state/containerd.pid")
    kill "$pid" 2>/dev/null || true
    wait_gone "$pid"
    rm -f "$state/containerd.pid"
  fi
  # Mounts under STATE (kubelet volumes, containerd's snapshots and shm), deepest first.
  local m
  for m in $(awk -v p="$state/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
  done
  # The logs of pods the kubelet had no time to clean up (it writes them to /var/log/pods in
  # 1.20, whatever its root dir), and the symlinks to them.
  # A static pod's name ends in its node's, which is this tier's own.
  local node link
  node=$(node_name "$state")
  rm -rf /var/log/pods/*_*-"$node"_*
  for link in /var/log/containers/*.log; do
    case "$(readlink "$link" 2>/dev/null)" in /var/log/pods/*_*-"$node"_*) rm -f "$link" ;; esac
  done
  if [ -f "$state/sysctls" ]; then
    while IFS= read -r s; do
      sysctl -q -w "$s" >/dev/null 2>&1 || log "cannot restore $s"
    done < "$state/sysctls"
    rm -f "$state/sysctls"
  fi
  rm -f "$state/env"
}

case "${1:-}" in
  build) locked build ;;
  images) need_packages; locked make_images ;;
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  *) die "usage: $0 build | images | start STATE | stop STATE" ;;
esac
