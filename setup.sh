#!/usr/bin/env bash
# Installs ember's build dependencies from Debian packages (when missing) and builds it in build/.
# Usage: bash setup.sh [extra cmake options]
set -euo pipefail
cd "$(dirname "$0")"

packages=(cmake make gcc pkg-config libopenblas-dev libcriterion-dev zlib1g-dev libpng-dev
          libjpeg62-turbo-dev libmicrohttpd-dev python3-venv libjansson-dev
          dataset-fashion-mnist fortunes clang libclang-rt-14-dev libopenmpi-dev openmpi-bin
          libdnnl-dev)
# The tests' Python consumers of ember's files (PyPI), in the virtualenv build/venv; add a
# package here and the next setup installs it.
venv_packages=(onnx onnxruntime tensorboard safetensors)
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

venv=build/venv
if [ "$(cat "$venv/ember-packages" 2>/dev/null)" != "${venv_packages[*]}" ]; then
    echo "setup: installing ${venv_packages[*]} into $venv"
    [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "${venv_packages[@]}"
    echo "${venv_packages[*]}" > "$venv/ember-packages"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
