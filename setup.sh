#!/usr/bin/env bash
# Installs ember's build dependencies from Debian packages (when missing) and builds it in build/.
# Usage: bash setup.sh [extra cmake options]
set -euo pipefail
cd "$(dirname "$0")"

packages=(cmake make gcc pkg-config libopenblas-dev libcriterion-dev zlib1g-dev libstb-dev
          dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
