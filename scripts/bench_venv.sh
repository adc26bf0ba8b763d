#!/usr/bin/env bash
# Makes the benchmark venv: the newest PyTorch from PyPI (with numpy), the yardstick `ember bench
# train|infer|sample` run beside ember. It is large (~5 GB with PyTorch's CUDA libraries), so it
# is never part of setup.sh or CI; Debian's python3-torch (1.13) still works without it.
#   bash scripts/bench_venv.sh [DIR]          DIR defaults to build/bench-venv
#   export EMBER_PYTHON=DIR/bin/python        what the benchmarks then run
set -euo pipefail
dir=${1:-"$(cd "$(dirname "$0")/.." && pwd)/build/bench-venv"}
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --upgrade pip
"$dir/bin/pip" install --quiet --upgrade torch numpy
"$dir/bin/python" "$(dirname "$0")/../bench/torch_about.py"
echo "export EMBER_PYTHON=$(cd "$dir" && pwd)/bin/python"
