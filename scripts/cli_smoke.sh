#!/usr/bin/env bash
# A short run of the `ember` program: `ember train mlp` for two steps on a tiny Fashion-MNIST of
# noise (96 training and 32 test images, raw IDX under the .gz names), saved, then `ember eval`
# of the checkpoint. CI runs it on the ASan + UBSan build, where any report fails it.
# usage: scripts/cli_smoke.sh EMBER_BINARY
set -euo pipefail
ember=$(realpath "$1")
dir=$(mktemp -d /tmp/ember_smoke_XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import struct, sys
for split, n in (("train", 96), ("t10k", 32)):
    with open(f"{sys.argv[1]}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">4I", 0x803, n, 28, 28))
        f.write(bytes((i * 37 + i // 784 * 11) & 255 for i in range(n * 784)))
    with open(f"{sys.argv[1]}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">2I", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
"$ember" train mlp --data "$dir" --epochs 1 --max-steps 2 --batch 16 --save "$dir/run.st"
"$ember" eval --data "$dir" --load "$dir/run.st"
"$ember" summary --load "$dir/run.st" >/dev/null
echo "cli_smoke: ok"
