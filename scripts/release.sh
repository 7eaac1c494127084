#!/usr/bin/env bash
# Makes and checks every release artifact, from a clean checkout, into dist/ (or $HOOKLOG_DIST):
#   bash scripts/release.sh
# Nothing is published: .github/workflows/release.yml uploads what this leaves in dist/.
#
#   hooklog-VERSION-x86_64-unknown-linux-musl    static binaries; `--version` names VERSION,
#   hooklog-VERSION-aarch64-unknown-linux-musl   the commit and the target (checked: x86_64 run,
#                                                aarch64 under qemu-aarch64-static when present)
#   kubectl-hooklog-VERSION-TARGET.tar.gz        the kubectl plugin: the binary as kubectl-hooklog
#   hooklog.krew.yaml                            its krew manifest, with the archives' sha256
#   hooklog-VERSION.tgz                          the Helm chart (linted strictly, packaged by Helm)
#   hooklog-helm-plugin-VERSION.tgz              the Helm 4 post-renderer plugin
#   hooklog-VERSION-completions.tar.gz           bash, zsh, fish, elvish, PowerShell completions
#   hooklog-VERSION-man.tar.gz                   man pages (hooklog.1, hooklog-run.1, ...)
#   SHA256SUMS                                   sha256sum of every file above
#
# HOOKLOG_RELEASE_BIN / HOOKLOG_AARCH64_BIN: binaries already built from this commit (as
# scripts/test.sh builds them) are used instead of building again, if their --version names this
# commit. HOOKLOG_RELEASE_ALLOW_DIRTY=1 skips the clean-checkout check (the tests use it).
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
commit=$(git rev-parse --short=12 HEAD)
export HOOKLOG_COMMIT=$commit
dist=${HOOKLOG_DIST:-$PWD/dist}
rm -rf "$dist" && mkdir -p "$dist"
log "hooklog $version, commit $commit, into $dist"

# --- binaries ---------------------------------------------------------------------------------
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
binary() { # TARGET PREBUILT -> the path of a static binary of this commit for TARGET
  local target=$1 prebuilt=$2
  if [ -n "$prebuilt" ] && [ -x "$prebuilt" ]; then
    log "using $prebuilt for $target"
    printf '%s\n' "$prebuilt"
    return
  fi
  log "cargo build --release --target $target"
  if [ "$target" = aarch64-unknown-linux-musl ]; then
    CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc \
      cargo build --release --locked --target "$target" >&2
  else
    cargo build --release --locked --target "$target" >&2
  fi
  printf '%s\n' "$target_dir/$target/release/hooklog"
}
check_version() { # BINARY TARGET [RUNNER]
  local bin=$1 target=$2 runner=${3:-} want printed
  want="hooklog $version (commit $commit, $target)"
  printed=$($runner "$bin" --version)
  [ "$printed" = "$want" ] || die "$bin --version says '$printed', not '$want' (built from another commit?)"
}
for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
  case $target in
    x86_64*) bin=$(binary "$target" "${HOOKLOG_RELEASE_BIN:-}"); machine=x86-64; runner= ;;
    *) bin=$(binary "$target" "${HOOKLOG_AARCH64_BIN:-}"); machine=aarch64; runner=qemu-aarch64-static ;;
  esac
  description=$(file -b "$bin")
  case $description in
    *"$machine"*static*|*"$machine"*"statically linked"*) ;;
    *) die "$bin is not a static $machine binary: $description" ;;
  esac
  if [ -z "$runner" ] || command -v "$runner" >/dev/null 2>&1; then
    check_version "$bin" "$target" $runner
  else
    log "no $runner: the $target binary's --version is not run"
  fi
  cp "$bin" "$dist/hooklog-$version-$target"
  # The kubectl plugin: kubectl runs kubectl-hooklog from PATH as `kubectl hooklog ...`; it is
  # the binary itself under that name (the CLI does not depend on its argv[0]).
  stage=$(mktemp -d)
  cp "$bin" "$stage/kubectl-hooklog"
  cp LICENSE "$stage/LICENSE"
  chmod 0755 "$stage/kubectl-hooklog"
  tar -C "$stage" --owner=0 --group=0 --mtime=@0 --sort=name -czf "$dist/kubectl-hooklog-$version-$target.tar.gz" \
    kubectl-hooklog LICENSE
  rm -rf "$stage"
done

# --- the krew manifest ------------------------------------------------------------------------
sha() { sha256sum "$1" | cut -d' ' -f1; }
# The repository the release is published from: the workflow's GITHUB_REPOSITORY.
repository=${GITHUB_REPOSITORY:-OWNER/hooklog}
[ -n "${GITHUB_REPOSITORY:-}" ] || log "GITHUB_REPOSITORY is not set: the krew manifest names $repository"
url_base=https://github.com/$repository/releases/download/v$version
sed -e "s|@VERSION@|$version|g" -e "s|@URL@|$url_base|g" -e "s|@HOME@|https://github.com/$repository|g" \
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
