#!/usr/bin/env bash
# Installs the Debian 12 packages Petrel needs, only those that are missing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config liburing-dev libzstd-dev libjson-c-dev libpcre2-dev
      libutf8proc-dev libmicrohttpd-dev libcriterion-dev fio curl
      haproxy # haproxy: deploy/haproxy.cfg and tests/test_replicas.c
      clang libclang-rt-14-dev libomp-14-dev) # the ASan + UBSan and libFuzzer build (fuzz/, build-asan)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm run the OpenAI-client test suite; any install of node will do
# (Debian's nodejs and npm packages when none is present).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
