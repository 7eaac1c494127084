#!/usr/bin/env bash
# A local stand-in for the official `rust:<RUST_VERSION>-bookworm` image, which cannot be pulled
# here, so that tests/image.rs can build the real Dockerfile with podman:
#
#   tests/support/rust-standin.sh 1.95        # prints the image name it made or found
#
# What it is: a Debian bookworm root made by mmdebstrap from Debian's packages (the apt sources
# of this machine, read at run time), with the build tools of the official image's base
# (buildpack-deps:bookworm) that a Rust build uses, and this machine's Rust toolchain of that
# version laid out as the official image lays it out: rustup and its proxies in
# /usr/local/cargo/bin, the toolchain in /usr/local/rustup, RUSTUP_HOME, CARGO_HOME, PATH and
# RUST_VERSION set, profile minimal (rustc, cargo, the host's rust-std).
# How it differs (nothing the Dockerfile uses): no development libraries for other languages'
# extensions (ImageMagick, MySQL, PostgreSQL, ...), no Mercurial or Subversion, the toolchain is
# copied from the host instead of installed by rustup-init, and it trusts the CAs this machine
# adds in /usr/local/share/ca-certificates (so those also end up in the image's CA bundle).
#
# It is tagged docker.io/library/rust:<RUST_VERSION>-bookworm, the name `FROM rust:...` means,
# and labelled with a key (this script, the toolchain, the architecture): a later run with the
# same key finds the image (seconds); one without the image unpacks the Debian root kept in the
# cache dir (${HOOKLOG_CACHE_DIR:-~/.cache/hooklog}/rust-standin/bookworm-*.tar) and copies the
# toolchain in again. A real rust image already in podman's storage under that name (no key
# label) is used as it is. podman's configuration: CONTAINERS_CONF, as tests/image.rs sets it.
set -euo pipefail

rust_version=${1:?usage: rust-standin.sh RUST_VERSION (as in the Dockerfile, e.g. 1.95)}
image="docker.io/library/rust:${rust_version}-bookworm"
label=org.hooklog.standin-key
cache=${HOOKLOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hooklog}/rust-standin
mkdir -p "$cache"
log() { printf 'rust-standin: %s\n' "$*" >&2; }

# One maker at a time (several test processes may ask at once); the others then find the image.
exec 9>"$cache/lock"
flock 9

# Build tools of buildpack-deps:bookworm (curl, scm and the main layer) that a Rust build uses.
packages=ca-certificates,curl,wget,gnupg,netbase,git,openssh-client,procps,dpkg-dev,file,gcc,g++,libc6-dev,make,patch,pkg-config,xz-utils,bzip2,unzip,libssl-dev,zlib1g-dev

# The host's toolchain of this version: `rustc X.Y.Z` with X.Y = rust_version (or X.Y.Z).
toolchain=
for tc in $(rustup toolchain list | awk '{print $1}'); do
  v=$(rustup run "$tc" rustc --version 2>/dev/null | awk '{print $2}') || continue
  case "$v" in
    "$rust_version" | "$rust_version".*) toolchain=$tc; full_version=$v; break ;;
  esac
done
if [ -z "$toolchain" ]; then
  log "no installed toolchain is Rust $rust_version: rustup toolchain install $rust_version"
  rustup toolchain install "$rust_version" --profile minimal >&2
  toolchain=$rust_version
  full_version=$(rustup run "$toolchain" rustc --version | awk '{print $2}')
fi
host=$(rustup run "$toolchain" rustc -vV | awk '/^host:/ {print $2}')
arch=$(dpkg --print-architecture)

key=$(
  { cat "$0"; echo "$packages"; cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true; rustup run "$toolchain" rustc -vV; rustup run "$toolchain" cargo -V; echo "$arch"; } |
    sha256sum | cut -c1-16
)
have=$(podman image inspect --format "{{index .Labels \"$label\"}}" "$image" 2>/dev/null || echo absent)
case "$have" in
  "$key") log "$image: the stand-in (key $key) is there"; echo "$image"; exit 0 ;;
  "" | "<no value>") log "$image: a real image (no $label label), used as it is"; echo "$image"; exit 0 ;;
  absent) ;;
  *) log "$image: a stand-in of another key ($have), replaced" ;;
esac

# The Debian root is kept (its downloads are the slow part), keyed by its package list; the
# toolchain is copied in again when the image is missing (seconds).
base=$cache/bookworm-$(echo "$packages" | sha256sum | cut -c1-16).tar
root=$(mktemp -d "$cache/root.XXXXXX")
trap 'rm -rf "$root" "$base.part"' EXIT
if [ ! -s "$base" ]; then
  # The Debian sources this machine uses (bookworm, its updates and security), as apt has them.
  sources=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -Eq '^[^#]*(deb |URIs:).*/debian' "$f" && sources+=("$f")
  done
  [ ${#sources[@]} -gt 0 ] || log "no Debian source in /etc/apt: mmdebstrap's default mirror"
  log "mmdebstrap bookworm (sources: ${sources[*]:-default})"
  mmdebstrap --quiet --variant=minbase --include="$packages" --aptopt='Acquire::Retries "3"' \
    --format=tar bookworm "$base.part" "${sources[@]}" >&2
  mv "$base.part" "$base"
fi
tar -C "$root" --numeric-owner -xf "$base"

# The CAs this machine adds to Debian's (/usr/local/share/ca-certificates: a TLS-inspecting proxy's,
# say), without which rustup and cargo cannot reach their servers from inside the build.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  log "adding this machine's local CAs: $(cd /usr/local/share/ca-certificates && echo *.crt)"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >&2
fi

log "copying Rust $full_version ($toolchain) into /usr/local/rustup, /usr/local/cargo"
tc_name=$full_version-$host
mkdir -p "$root/usr/local/rustup/toolchains" "$root/usr/local/cargo/bin"
cp -a "$(rustup run "$toolchain" rustc --print sysroot)" "$root/usr/local/rustup/toolchains/$tc_name"
printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\n' "$tc_name" \
  >"$root/usr/local/rustup/settings.toml"
cp "$(command -v rustup)" "$root/usr/local/cargo/bin/rustup"
for proxy in cargo rustc rustdoc rust-gdb rust-gdbgui rust-lldb; do
  ln "$root/usr/local/cargo/bin/rustup" "$root/usr/local/cargo/bin/$proxy"
done
# Profile minimal, as rustup-init --profile minimal leaves it: rustc, cargo, the host's std.
# rustup needs /proc: a private mount and pid namespace gives it one and takes it away after.
in_root() { unshare --mount --pid --fork --mount-proc="$root/proc" chroot "$root" \
  env -i PATH=/usr/local/cargo/bin:/usr/bin:/bin \
  RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo "$@"; }
for c in $(in_root rustup component list --installed); do
  case "$c" in
    rustc-* | cargo-* | rust-std-*) ;; # rust-std of other targets: below
    *) in_root rustup component remove "${c%-"$host"}" >&2 ;;
  esac
done
for t in $(in_root rustup target list --installed); do
  [ "$t" = "$host" ] || in_root rustup target remove "$t" >&2
done
chmod -R a+w "$root/usr/local/rustup" "$root/usr/local/cargo"
in_root rustc --version >&2
# Other sizes' roots are of no use any more.
find "$cache" -maxdepth 1 -name 'bookworm-*.tar' ! -name "${base##*/}" -delete

log "importing the root as $image"
tar -C "$root" --numeric-owner -c . |
  podman import --quiet --arch "$arch" --os linux \
    --change "ENV RUSTUP_HOME=/usr/local/rustup" \
    --change "ENV CARGO_HOME=/usr/local/cargo" \
    --change "ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV RUST_VERSION=$full_version" \
    --change "LABEL $label=$key" \
    --change 'CMD ["bash"]' \
    - "$image" >/dev/null
echo "$image"
