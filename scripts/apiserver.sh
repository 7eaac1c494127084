#!/usr/bin/env bash
# The API server tier (tests/apiserver.rs): a kube-apiserver 1.20.2 of the tests' own, with
# Debian's etcd, both on 127.0.0.1 at free ports, and nothing else (no scheduler, controllers or
# kubelet: a pod is stored, never run).
#
#   bash scripts/apiserver.sh start STATE   # etcd + kube-apiserver under STATE; writes STATE/env
#   bash scripts/apiserver.sh stop STATE    # stops both by PID; safe to repeat
#
# The binary comes from scripts/kubelet.sh's cached build (the same 1.20.2 tree as the kubelet).
# A CA and serving certificate for 127.0.0.1 and the service-account signing key are made with
# openssl under STATE. One static token, in system:masters (--token-auth-file), is the tests'
# identity. The ServiceAccount admission plugin is off: nothing creates the default account.
# STATE/env exports HOOKLOG_TEST_APISERVER (the URL), _TOKEN and _CA.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

log() { printf '== apiserver.sh: %s\n' "$*" >&2; }
die() { printf 'apiserver.sh: %s\n' "$*" >&2; exit 1; }

# Long enough for a cold etcd and an API server on a loaded 2-core machine (its post-start hooks
# take a few seconds idle).
START_TIMEOUT_S=120

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_for() {
  local what=$1 pid=$2 logfile=$3 t=0
  shift 3
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then tail -30 "$logfile" >&2; die "$what exited"; fi
    t=$((t + 1))
    [ $t -lt $((START_TIMEOUT_S * 5)) ] || { tail -30 "$logfile" >&2; die "$what not ready in ${START_TIMEOUT_S}s"; }
    sleep 0.2
  done
}

wait_gone() {
  local pid=$1 i
  for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

start() {
  local state=${1:?usage: apiserver.sh start STATE}
  command -v etcd >/dev/null || die "etcd is not installed (apt-get install etcd-server)"
  command -v openssl >/dev/null || die "openssl is not installed"
  local bin
  bin=$(bash scripts/kubelet.sh build)
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  [ ! -e "$state/env" ] || die "$state/env exists: stop that API server first (apiserver.sh stop $state)"
  mkdir -p "$state"/{pki,etcd,certs}
  local pki=$state/pki
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=hooklog-test-apiserver-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > "$pki/ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$pki/ext" -out "$pki/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  local token
  token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  echo "$token,hooklog-test,hooklog-test,system:masters" > "$pki/tokens.csv"

  local etcd_port peer_port port
  etcd_port=$(free_port); peer_port=$(free_port); port=$(free_port)
  log "etcd $(etcd --version | head -1) on 127.0.0.1:$etcd_port"
  etcd --name hooklog-test --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "hooklog-test=http://127.0.0.1:$peer_port" > "$state/etcd.log" 2>&1 &
  echo $! > "$state/etcd.pid"
  wait_for etcd "$(cat "$state/etcd.pid")" "$state/etcd.log" \
    curl -sf "http://127.0.0.1:$etcd_port/health"

  log "$("$bin/kube-apiserver" --version) on 127.0.0.1:$port"
  "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" --insecure-port 0 \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --cert-dir "$state/certs" \
    --token-auth-file "$pki/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$pki/sa.key" \
    --service-account-signing-key-file "$pki/sa.key" --api-audiences https://kubernetes.default.svc \
    --service-cluster-ip-range 10.96.0.0/24 \
    --disable-admission-plugins ServiceAccount \
    --enable-admission-plugins MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    > "$state/apiserver.log" 2>&1 &
  echo $! > "$state/apiserver.pid"
  wait_for kube-apiserver "$(cat "$state/apiserver.pid")" "$state/apiserver.log" \
    curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" "https://127.0.0.1:$port/readyz"
  printf 'HOOKLOG_TEST_APISERVER=https://127.0.0.1:%s\nHOOKLOG_TEST_APISERVER_TOKEN=%s\nHOOKLOG_TEST_APISERVER_CA=%s\n' \
    "$port" "$token" "$pki/ca.crt" > "$state/env"
  log "ready: $state/env"
}

stop() {
  local state=${1:?usage: apiserver.sh stop STATE}
  [ -d "$state" ] || return 0
  local p pid
  for p in apiserver etcd; do
    [ -f "$state/$p.pid" ] || continue
    pid=$(cat "$state/$p.pid")
    kill "$pid" 2>/dev/null || true
    wait_gone "$pid"
    rm -f "$state/$p.pid"
  done
  rm -f "$state/env"
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  *) die "usage: $0 start STATE | stop STATE" ;;
esac
