#!/usr/bin/env bash
# Makes and checks every release artifact, from a clean checkout, into dist/ (or $HOOKLOG_DIST):
#   bash scripts/release.sh
# Nothing is published: .github/workflows/release.yml uploads what this leaves in dist/.
#
#   hooklog-VERSION-x86_64-unknown-linux-musl    the full CLI, static binaries; `--version` names
#   hooklog-VERSION-aarch64-unknown-linux-musl   VERSION, the commit and the target (checked:
#                                                x86_64 run, aarch64 under qemu-aarch64-static
#                                                when present); `check` is one of its subcommands
#   hooklog-sidecar-VERSION-TARGET               the sidecar (`--no-default-features`), the binary
#                                                pods run and `hooklog install` copies; checked
#                                                alike, and that it has no `check`
#   hooklog-VERSION-TARGET.cdx.json              CycloneDX SBOMs of each binary above: the crates it
#   hooklog-sidecar-VERSION-TARGET.cdx.json      links (cargo-cyclonedx, scripts/cyclonedx.sh, and
#                                                scripts/sbom.py: checked against cargo tree)
#   hooklog-VERSION.oci.tar                      the images as OCI archives (scripts/oci.py): each an
#   hooklog-sidecar-VERSION.oci.tar              index of linux/amd64 and linux/arm64, built from the
#                                                binaries above as the Dockerfile's stages say
#   kubectl-hooklog-VERSION-TARGET.tar.gz        the kubectl plugin: the binary as kubectl-hooklog
#   hooklog.krew.yaml                            its krew manifest, with the archives' sha256
#   hooklog-VERSION.tgz                          the Helm chart (linted strictly, packaged by Helm)
#   hooklog-helm-plugin-VERSION.tgz              the Helm 4 post-renderer plugin
#   hooklog-VERSION-completions.tar.gz           bash, zsh, fish, elvish, PowerShell completions
#   hooklog-VERSION-man.tar.gz                   man pages (hooklog.1, hooklog-run.1, ...)
#   SHA256SUMS                                   sha256sum of every file above
#
# HOOKLOG_RELEASE_BIN / HOOKLOG_AARCH64_BIN (the full CLI) and HOOKLOG_SIDECAR_BIN /
# HOOKLOG_SIDECAR_AARCH64_BIN (the sidecar): binaries already built from this commit (as
# scripts/test.sh builds them) are used instead of building again, if their --version names this
# commit. HOOKLOG_RELEASE_ALLOW_DIRTY=1 skips the clean-checkout check (the tests use it).
# The release's home is Cargo.toml's `repository`: in a workflow (GITHUB_REPOSITORY) of another
# repository, it refuses (a fork changes that one line).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== release.sh: %s\n' "$*" >&2; }
die() { printf 'release.sh: %s\n' "$*" >&2; exit 1; }

# --- what is released -------------------------------------------------------------------------
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || die "no version in Cargo.toml"
chart_version=$(sed -n 's/^version: *\(.*\)$/\1/p' charts/hooklog/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/hooklog/Chart.yaml)
plugin_version=$(sed -n 's/^version: *\(.*\)$/\1/p' helm-plugin/hooklog/plugin.yaml)
for pair in "charts/hooklog/Chart.yaml version:$chart_version" "charts/hooklog/Chart.yaml appVersion:$app_version" \
            "helm-plugin/hooklog/plugin.yaml version:$plugin_version"; do
  [ "${pair##*:}" = "$version" ] || die "${pair%:*} is ${pair##*:}, Cargo.toml says $version"
done
if [ "${HOOKLOG_RELEASE_ALLOW_DIRTY:-}" != 1 ] && [ -n "$(git status --porcelain)" ]; then
  die "the checkout has changes (git status): a release is made from a commit"
fi
# The release's home, hooklog's one: Cargo.toml's `repository` (the krew manifest's URLs, the
# images' source label; tests/release.rs holds every file to it).
home=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml | head -1)
case $home in
  https://github.com/*/*) ;;
  *) die "Cargo.toml's repository is '$home', not https://github.com/<owner>/<name>" ;;
esac
if [ -n "${GITHUB_REPOSITORY:-}" ] && [ "$(echo "$GITHUB_REPOSITORY" | tr '[:upper:]' '[:lower:]')" != \
     "$(echo "${home#https://github.com/}" | tr '[:upper:]' '[:lower:]')" ]; then
  die "the workflow runs in $GITHUB_REPOSITORY, but Cargo.toml's repository is $home: a release names one home (a fork changes that line)"
fi
commit=$(git rev-parse --short=12 HEAD)
export HOOKLOG_COMMIT=$commit
# Every time in the archives and images: the commit's, so that a rebuild gives the same bytes.
epoch=$(git log -1 --format=%ct HEAD)
dist=${HOOKLOG_DIST:-$PWD/dist}
rm -rf "$dist" && mkdir -p "$dist"
log "hooklog $version, commit $commit, into $dist"

# --- binaries ---------------------------------------------------------------------------------
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
targets="x86_64-unknown-linux-musl aarch64-unknown-linux-musl"
binary() { # NAME TARGET PREBUILT PROFILE [CARGO FLAGS] -> $dist/NAME-$version-TARGET, a static binary of this commit
  local name=$1 target=$2 prebuilt=$3 profile=$4 out
  shift 4
  out="$dist/$name-$version-$target"
  if [ -n "$prebuilt" ] && [ -x "$prebuilt" ]; then
    log "using $prebuilt for $name on $target"
  else
    log "cargo build --profile $profile --target $target $*"
    if [ "$target" = aarch64-unknown-linux-musl ]; then
      CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
      CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
        cargo build --profile "$profile" --locked --target "$target" "$@" >&2
    else
      cargo build --profile "$profile" --locked --target "$target" "$@" >&2
    fi
    prebuilt="$target_dir/$target/$profile/hooklog"
  fi
  cp "$prebuilt" "$out"
  chmod 0755 "$out"
}
check_binary() { # FILE TARGET KIND (full|sidecar)
  local bin=$1 target=$2 kind=$3 machine runner= want printed description
  case $target in
    x86_64*) machine=x86-64 ;;
    *) machine=aarch64; runner=qemu-aarch64-static ;;
  esac
  description=$(file -b "$bin")
  case $description in
    *"$machine"*static*|*"$machine"*"statically linked"*) ;;
    *) die "$bin is not a static $machine binary: $description" ;;
  esac
  if [ -n "$runner" ] && ! command -v "$runner" >/dev/null 2>&1; then
    log "no $runner: the $target binary's --version is not run"
    return
  fi
  want="hooklog $version (commit $commit, $target)"
  printed=$($runner "$bin" --version)
  [ "$printed" = "$want" ] || die "$bin --version says '$printed', not '$want' (built from another commit?)"
  # The kind, by what it can do: the control plane's `check` is in the full CLI only.
  if $runner "$bin" check --help >/dev/null 2>&1; then
    [ "$kind" = full ] || die "$bin has \`check\`: a full CLI, not the sidecar (--no-default-features)"
  else
    [ "$kind" = sidecar ] || die "$bin has no \`check\`: the sidecar, not the full CLI"
  fi
}
for target in $targets; do
  case $target in
    x86_64*) full=${HOOKLOG_RELEASE_BIN:-}; sidecar=${HOOKLOG_SIDECAR_BIN:-} ;;
    *) full=${HOOKLOG_AARCH64_BIN:-}; sidecar=${HOOKLOG_SIDECAR_AARCH64_BIN:-} ;;
  esac
  binary hooklog-sidecar "$target" "$sidecar" release --no-default-features
  check_binary "$dist/hooklog-sidecar-$version-$target" "$target" sidecar
  # The full CLI unwinds on a panic (Cargo.toml's [profile.control]); the sidecar aborts.
  binary hooklog "$target" "$full" control
  check_binary "$dist/hooklog-$version-$target" "$target" full
  # The kubectl plugin: kubectl runs kubectl-hooklog from PATH as `kubectl hooklog ...`; it is
  # the full CLI itself under that name (the CLI does not depend on its argv[0]).
  stage=$(mktemp -d)
  cp "$dist/hooklog-$version-$target" "$stage/kubectl-hooklog"
  cp LICENSE "$stage/LICENSE"
  chmod 0755 "$stage/kubectl-hooklog"
  tar -C "$stage" --owner=0 --group=0 --mtime=@0 --sort=name -czf "$dist/kubectl-hooklog-$version-$target.tar.gz" \
    kubectl-hooklog LICENSE
  rm -rf "$stage"
done

# --- SBOMs: the crates each binary links -------------------------------------------------------
# cargo-cyclonedx (the CycloneDX project's cargo plugin, pinned in scripts/cyclonedx.sh) from
# `cargo metadata` with the binary's features and target, without dev- and build-dependencies
# (nothing of them is in the binary; proc-macro crates, normal dependencies that run in the
# compiler, are listed as cargo lists them); scripts/sbom.py takes out what cargo metadata lists
# beyond what cargo tree says the binary links, and checks the rest. One SBOM a binary: the
# targets' dependency edges differ.
cyclonedx=${HOOKLOG_CYCLONEDX:-$(bash scripts/cyclonedx.sh)}
# It writes beside Cargo.toml: it runs on a copy of what cargo metadata reads, not in the checkout.
sbom_work=$(mktemp -d)
cp -r Cargo.toml Cargo.lock build.rs src examples vendor "$sbom_work/"
for kind in hooklog hooklog-sidecar; do
  flags=()
  [ "$kind" = hooklog-sidecar ] && flags=(--no-default-features)
  for target in $targets; do
    # SOURCE_DATE_EPOCH: the SBOM's timestamp is the commit's, not now.
    (cd "$sbom_work" && SOURCE_DATE_EPOCH=$epoch "$cyclonedx" cyclonedx --format json --spec-version 1.5 \
        --target "$target" --no-build-deps "${flags[@]}" --override-filename sbom -q) \
      || die "cargo cyclonedx for $kind on $target failed"
    (cd "$sbom_work" && cargo tree --locked -e normal --target "$target" "${flags[@]}" --prefix none --format '{p}') \
      > "$sbom_work/linked.txt" || die "cargo tree for $kind on $target failed"
    python3 scripts/sbom.py "$version" "$commit" "$sbom_work" "$home" "$sbom_work/sbom.json" "$sbom_work/linked.txt" \
      > "$dist/$kind-$version-$target.cdx.json" || die "no SBOM of $kind for $target (scripts/sbom.py)"
  done
done
rm -rf "$sbom_work"

# --- the images as OCI archives: linux/amd64 and linux/arm64 of each Dockerfile stage -----------
# From the binaries above (no build under emulation): scripts/oci.py reads the stage's user,
# entrypoint, command and labels from the Dockerfile; the CA bundle is this machine's (Debian's
# ca-certificates, as in the Dockerfile's rust:*-bookworm build stage; the workflow runs in it).
epoch_args=(--epoch "$epoch" --ca-bundle "${HOOKLOG_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
            --build-arg "HOOKLOG_VERSION=$version" --build-arg "HOOKLOG_COMMIT=$commit")
for kind in hooklog hooklog-sidecar; do
  python3 scripts/oci.py --stage "$kind" "${epoch_args[@]}" --ref-name "$kind:$version" \
    --binary "amd64=$dist/$kind-$version-x86_64-unknown-linux-musl" \
    --binary "arm64=$dist/$kind-$version-aarch64-unknown-linux-musl" \
    --out "$dist/$kind-$version.oci.tar"
done

# --- the krew manifest ------------------------------------------------------------------------
sha() { sha256sum "$1" | cut -d' ' -f1; }
url_base=$home/releases/download/v$version
sed -e "s|@VERSION@|$version|g" -e "s|@URL@|$url_base|g" -e "s|@HOME@|$home|g" \
    -e "s|@SHA_X86_64@|$(sha "$dist/kubectl-hooklog-$version-x86_64-unknown-linux-musl.tar.gz")|" \
    -e "s|@SHA_AARCH64@|$(sha "$dist/kubectl-hooklog-$version-aarch64-unknown-linux-musl.tar.gz")|" \
    krew/hooklog.yaml > "$dist/hooklog.krew.yaml"
if grep -q '@[A-Z_0-9]*@' "$dist/hooklog.krew.yaml"; then die "krew manifest: a placeholder is left"; fi

# --- the chart and the Helm plugin, with Helm's own engine (helm-python-sdk) --------------------
python3 -c 'import helm_python' 2>/dev/null || die "helm-python-sdk is needed: python3 -m pip install helm-python-sdk"
python3 - "$dist" <<'EOF'
import sys, helm_python as helm
dist = sys.argv[1]
report = helm.lint("charts/hooklog", strict=True)
bad = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
if bad:
    sys.exit(f"release.sh: the chart does not lint: {bad}")
path = helm.package("charts/hooklog", destination=dist)
with open(path, "rb") as f, helm.Chart.load_archive(f.read()) as chart:
    print(f"== release.sh: chart {chart.name} {chart.version} in {path}", file=sys.stderr)
EOF
[ -f "$dist/hooklog-$version.tgz" ] || die "helm package made no $dist/hooklog-$version.tgz"
tar -C helm-plugin --owner=0 --group=0 --mtime=@0 --sort=name -czf "$dist/hooklog-helm-plugin-$version.tgz" hooklog

# --- completions and man pages, from the CLI's definition (examples/generate.rs) ---------------
gen=$(mktemp -d)
cargo run --quiet --locked --example generate -- "$gen" >/dev/null
tar -C "$gen" --owner=0 --group=0 --mtime=@0 --sort=name -czf "$dist/hooklog-$version-completions.tar.gz" completions
tar -C "$gen" --owner=0 --group=0 --mtime=@0 --sort=name -czf "$dist/hooklog-$version-man.tar.gz" man
rm -rf "$gen"

# --- sums -------------------------------------------------------------------------------------
(cd "$dist" && sha256sum -- * > SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
log "done:"
(cd "$dist" && ls -l) >&2
