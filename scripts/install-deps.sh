#!/usr/bin/env bash
# Installs strata's build and test dependencies from Debian 12 and npm.
# Idempotent: packages already present are skipped; uses sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libsimdjson-dev libspdlog-dev libfmt-dev liburing-dev libxxhash-dev
  libtomlplusplus-dev libcli11-dev libpcre2-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  curl nodejs gnuplot-nox fio e2fsprogs
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# nodesource's nodejs bundles npm; Debian's does not.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: Debian packages present"
fi

# Node test clients (openai SDK, ws), pinned by package-lock.json.
if [ -f tests/e2e/package.json ]; then
  if [ ! -d tests/e2e/node_modules ] || [ tests/e2e/package-lock.json -nt tests/e2e/node_modules ]; then
    echo "install-deps: npm ci in tests/e2e"
    (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
