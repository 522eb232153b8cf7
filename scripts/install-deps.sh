#!/usr/bin/env bash
# Installs strata's build and test dependencies: Debian 12 packages, and Python packages (PyPI) in .venv.
# Idempotent: packages already present are skipped; uses sudo when not root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libsimdjson-dev libspdlog-dev libfmt-dev liburing-dev libxxhash-dev
  libtomlplusplus-dev libcli11-dev libpcre2-dev libssl-dev
  libhiredis-dev libzmq3-dev cppzmq-dev redis-server
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  curl gnuplot-nox fio e2fsprogs
  # The web pages' libraries, embedded into the binary at build time, and the browser their tests drive.
  libjs-chart.js libjs-highlight.js libjs-marked chromium chromium-driver
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: Debian packages present"
fi

# The source of xgrammar's C++ core, which cmake/xgrammar.cmake builds into the grammar engine.
scripts/fetch-xgrammar.sh >/dev/null

# Python for the tests, tools and benchmarks: a virtual environment inside the project (.venv/,
# ignored by git) with the packages pinned in requirements.txt, then those of
# requirements-nodeps.txt without their declared dependencies (see that file). pip keeps its cache
# where it always does (~/.cache/pip), so a fresh checkout on the same machine downloads nothing again.
venv=.venv
stamp=$venv/.requirements.sha256
want=$(cat requirements.txt requirements-nodeps.txt | sha256sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install-deps: Python packages into $venv (requirements.txt)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r requirements.txt
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    -r requirements-nodeps.txt
  echo "$want" >"$stamp"
else
  echo "install-deps: Python packages present in $venv"
fi
