# syntax=docker/dockerfile:1
# hooklog's image: one static binary, a CA bundle, nothing else.
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/hooklog:0.1.0 --push .
#
# The `build` stage runs on the builder's own platform and cross-compiles to the musl target of
# TARGETARCH (no QEMU: a fat-LTO build under emulation takes many times longer). Its output is
# /out, laid out as the final root: /out/hooklog and /out/etc/ssl/certs/ca-certificates.crt.
# That stage can be replaced by a folder with the same layout under out/:
#   podman build --build-context build=DIR .
# (tests/image.rs does exactly that with a release build made on the host).

ARG RUST_VERSION=1.95

FROM --platform=$BUILDPLATFORM rust:${RUST_VERSION}-bookworm AS build
ARG TARGETARCH
ARG BUILDARCH
# musl-gcc compiles ring's C for a native build; for the other architecture Debian's GNU cross
# compiler does (Rust's musl targets bring their own libc and crt, so it only compiles and links).
RUN set -eu; \
    case "$TARGETARCH" in \
      amd64) triple=x86_64-unknown-linux-musl; cross=x86_64-linux-gnu ;; \
      arm64) triple=aarch64-unknown-linux-musl; cross=aarch64-linux-gnu ;; \
      *) echo "unsupported TARGETARCH $TARGETARCH (amd64 or arm64)" >&2; exit 1 ;; \
    esac; \
    if [ "$TARGETARCH" = "$BUILDARCH" ]; then cc=musl-gcc; linker=cc; pkg=musl-tools; \
    else cc=$cross-gcc; linker=$cc; pkg=gcc-$(echo "$cross" | tr _ -); fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates "$pkg"; \
    rm -rf /var/lib/apt/lists/*; \
    upper=$(echo "$triple" | tr 'a-z-' 'A-Z_'); lower=$(echo "$triple" | tr '-' '_'); \
    { echo "export TRIPLE=$triple"; \
      echo "export CC_$lower=$cc"; \
      echo "export CARGO_TARGET_${upper}_LINKER=$linker"; } > /env.sh; \
    rustup target add "$triple"
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    set -eu; . /env.sh; \
    cargo build --release --locked --target "$TRIPLE"; \
    mkdir -p /out/etc/ssl/certs; \
    cp "target/$TRIPLE/release/hooklog" /out/hooklog; \
    cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt

FROM scratch
# The binary at /hooklog and the CA bundle CloudWatch's HTTPS needs; no shell, no libc.
COPY --from=build /out/ /
# 65532 is distroless's "nonroot"; numeric so runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/hooklog"]
CMD ["run"]
