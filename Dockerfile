# syntax=docker/dockerfile:1
# hooklog's two images, each one static binary, a CA bundle, nothing else (issue 27):
#   hooklog-sidecar (the last stage, the default): the sidecar (`run`, `hook`, `sleep`, `install`,
#     `emit`), what `hooklog inject` and the webhook put into every pod;
#   hooklog (`--target hooklog`): the full CLI, the sidecar's roles plus `check`, `inject`,
#     `uninject` and `webhook`; what the webhook Deployment (k8s/webhook/) runs.
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/hooklog-sidecar:0.1.0 --push .
#   docker buildx build --platform linux/amd64,linux/arm64 --target hooklog -t REGISTRY/hooklog:0.1.0 --push .
#
# (add --build-arg HOOKLOG_VERSION=0.1.0 --build-arg HOOKLOG_COMMIT=$(git rev-parse --short=12 HEAD)
# for the version and revision labels.) A release does not build this file: scripts/release.sh
# writes both images as OCI archives from its binaries (scripts/oci.py reads the two last stages'
# lines, so they hold only ARG, COPY --from=... /out/ /, LABEL, USER, ENTRYPOINT and CMD), and
# tests/release.rs compares those with podman's build of this file.
#
# podman (4.3 tested) does not fill in $BUILDPLATFORM in a FROM line as BuildKit does: name the
# builder's platform yourself, once per target platform (README, Deploy, shows the whole thing):
#
#   podman build --platform linux/arm64 --build-arg BUILDPLATFORM=linux/amd64 -t hooklog-sidecar:arm64 .
#
# The `toolchain` stage runs on the builder's own platform; `build` and `build-sidecar` on it
# cross-compile to the musl target of TARGETARCH (no QEMU: a fat-LTO build under emulation takes
# many times longer), the full CLI (`--profile control`: the release profile, but a panic in one
# webhook review unwinds and is answered) and the sidecar (`--release --no-default-features`) in
# the one cached target dir; a build of one image builds only its binary. Each holds a lock over
# its build and the copy out.
# Each stage's output is /out, laid out as its image's root: /out/usr/local/bin/hooklog and
# /out/etc/ssl/certs/ca-certificates.crt.
# tests/dockerfile.rs builds this file as it is, both images, for both platforms (see README, Test).

ARG RUST_VERSION=1.95

FROM --platform=$BUILDPLATFORM rust:${RUST_VERSION}-bookworm AS toolchain
ARG TARGETARCH
# The C in the dependency tree (ring, mimalloc) needs a C compiler for the target:
# - native (builder arch = target arch): musl-gcc, from musl-tools;
# - cross: Debian's GNU cross compiler for the target *and* the target's C headers,
#   libc6-dev-<arch>-cross. The headers are only a Recommends of gcc-<triple>, so
#   --no-install-recommends alone leaves them out and the compiler falls back to the builder's
#   own /usr/include (`bits/libc-header-start.h: No such file or directory`, issue 11).
#   Rust's musl targets bring their own libc and crt objects, so these only compile and link.
# The builder's arch is the stage's own (dpkg), not a build argument: if a builder ignored
# --platform=$BUILDPLATFORM and emulated the target, this still picks the native compiler.
RUN set -eu; \
    buildarch=$(dpkg --print-architecture); \
    case "$TARGETARCH" in \
      amd64) triple=x86_64-unknown-linux-musl; gnu=x86_64-linux-gnu ;; \
      arm64) triple=aarch64-unknown-linux-musl; gnu=aarch64-linux-gnu ;; \
      *) echo "unsupported TARGETARCH '$TARGETARCH' (amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    case "$buildarch" in \
      amd64|arm64) ;; \
      *) echo "unsupported builder architecture '$buildarch' (amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    if [ "$TARGETARCH" = "$buildarch" ]; then \
      cc=musl-gcc; linker=cc; pkgs=musl-tools; \
    else \
      cc=$gnu-gcc; linker=$cc; \
      pkgs="gcc-$(echo "$gnu" | tr _ -) libc6-dev-$TARGETARCH-cross"; \
    fi; \
    echo "builder $buildarch, target $TARGETARCH ($triple): $pkgs"; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates $pkgs; \
    rm -rf /var/lib/apt/lists/*; \
    rustup target add "$triple"; \
    upper=$(echo "$triple" | tr 'a-z-' 'A-Z_'); lower=$(echo "$triple" | tr '-' '_'); \
    key=$({ dpkg-query -W; rustc -vV; rustup target list --installed; } | sha256sum | cut -c1-16); \
    { echo "export TRIPLE=$triple"; \
      echo "export CC_$lower=$cc"; \
      echo "export CARGO_TARGET_${upper}_LINKER=$linker"; \
      echo "export CARGO_TARGET_DIR=/cache/target/$TARGETARCH-$key"; } > /env.sh
# The target dir is a cache mount keyed by the build environment (every Debian package's version,
# the toolchain): cargo does not notice a changed C compiler or headers, so a build environment
# that changed starts from a clean target dir instead of reusing objects the old one compiled
# (a warm cache would have hidden issue 11). Older dirs of the same platform are removed.
# `build.sh PROFILE [CARGO FLAGS]` builds one binary into /out.
RUN { echo 'set -eu; . /env.sh'; \
      echo 'exec 9>"/cache/target/$TARGETARCH.lock"; flock 9'; \
      echo 'for d in /cache/target/"$TARGETARCH"-*; do'; \
      echo '  if [ "$d" != "$CARGO_TARGET_DIR" ]; then rm -rf "$d"; fi'; \
      echo 'done'; \
      echo 'profile=$1; shift'; \
      echo 'cargo build --profile "$profile" --locked --target "$TRIPLE" "$@"'; \
      echo 'mkdir -p /out/usr/local/bin /out/etc/ssl/certs'; \
      echo 'cp "$CARGO_TARGET_DIR/$TRIPLE/$profile/hooklog" /out/usr/local/bin/hooklog'; \
      echo 'cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt'; \
    } > /build.sh
WORKDIR /src
# Only what `cargo build` reads, so that a change to tests or docs reuses every layer.
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# `hooklog --version` names the commit: there is no .git here, so the build passes it
# (scripts/release.sh: --build-arg HOOKLOG_COMMIT=$(git rev-parse --short=12 HEAD)).
ARG HOOKLOG_COMMIT=unknown
ENV HOOKLOG_COMMIT=$HOOKLOG_COMMIT
# The vendored libyaml-safer (Cargo.toml's [patch.crates-io]: hooklog's fixes to its panics).
COPY vendor ./vendor
# The musl targets' rustflags (no unwind tables: the sidecar's size budget, issue 27).
COPY .cargo ./.cargo

FROM toolchain AS build
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/cache/target \
    TARGETARCH=$TARGETARCH sh /build.sh control

FROM toolchain AS build-sidecar
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/cache/target \
    TARGETARCH=$TARGETARCH sh /build.sh release --no-default-features

# The full CLI. The binary at /usr/local/bin/hooklog and the CA bundle (CloudWatch's HTTPS, the
# registries `check` reads); no shell, no libc.
FROM scratch AS hooklog
COPY --from=build /out/ /
# The labels scripts/release.sh's images carry too (it passes both build arguments; scripts/oci.py
# reads these lines): the source is Cargo.toml's `repository`, hooklog's one home.
ARG HOOKLOG_VERSION=unknown
ARG HOOKLOG_COMMIT=unknown
LABEL org.opencontainers.image.source="https://github.com/hooklog/hooklog" \
      org.opencontainers.image.version="$HOOKLOG_VERSION" \
      org.opencontainers.image.revision="$HOOKLOG_COMMIT"
# 65532 is distroless's "nonroot"; numeric so runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/hooklog"]
CMD ["run"]

# The sidecar, last: what a plain `docker build .` makes. The binary at /usr/local/bin/hooklog
# and the CA bundle CloudWatch's HTTPS needs; no shell, no libc. Not at /hooklog: `hooklog
# inject` mounts its emptyDir at /hooklog in the install init container that runs this image,
# and runc cannot mount a volume over a file ("not a directory": the pod never starts, issue
# 16). Nothing in this root is under a path inject mounts.
FROM scratch AS hooklog-sidecar
COPY --from=build-sidecar /out/ /
ARG HOOKLOG_VERSION=unknown
ARG HOOKLOG_COMMIT=unknown
LABEL org.opencontainers.image.source="https://github.com/hooklog/hooklog" \
      org.opencontainers.image.version="$HOOKLOG_VERSION" \
      org.opencontainers.image.revision="$HOOKLOG_COMMIT"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/hooklog"]
CMD ["run"]
