#!/usr/bin/env bash
# Crash test of checkpoint saves: kills `ember train mlp --save FILE` (a few hundred samples of
# Fashion-MNIST, a save every epoch) at random moments N times, then, when strace can trace,
# kills it again inside each save's fsync, link and rename and makes those calls fail. After every
# run FILE must be absent or a whole checkpoint that `ember eval` loads, and no temporary
# FILE.tmp.* may outlive the next save (a kill between link and rename leaves one named
# temporary, which the next save of FILE removes; a failed call leaves none at all).
# Usage: scripts/crash_test.sh N [EMBER]   (EMBER: the ember binary, default build/ember)
set -uo pipefail
n=${1:?usage: scripts/crash_test.sh N [EMBER]}
ember=$(realpath "${2:-build/ember}")
data=${EMBER_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ckpt=$work/run/ckpt.st
mkdir -p "$work/data" "$work/run"

# a small Fashion-MNIST: the first 256 training and 64 test samples
python3 - "$data" "$work/data" <<'PY'
import gzip, sys
src, dst = sys.argv[1], sys.argv[2]
for split, n in (("train", 256), ("t10k", 64)):
    for kind, head, size in (("images", 16, 784), ("labels", 8, 1)):
        name = f"{split}-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz"
        raw = gzip.open(f"{src}/{name}").read()
        hdr = bytearray(raw[:head]); hdr[4:8] = n.to_bytes(4, "big")
        gzip.open(f"{dst}/{name}", "wb").write(bytes(hdr) + raw[head:head + n * size])
PY

train=("$ember" train mlp --data "$work/data" --save "$ckpt" --epochs 1000 --batch 64
       --workers 1 --threads 1 --no-val)
fails=0 checked=0 present=0 leftover=0

# FILE absent or loadable; temporaries either none or removed by the next save
check() {
    local what=$1
    checked=$((checked + 1))
    if [ -e "$ckpt" ]; then
        present=$((present + 1))
        if ! "$ember" eval mlp --data "$work/data" --load "$ckpt" >/dev/null \
             2>"$work/eval.err"; then
            echo "FAIL ($what): $(cat "$work/eval.err")"
            fails=$((fails + 1))
        fi
    fi
    local tmps=("$ckpt".tmp.*)
    if [ -e "${tmps[0]}" ]; then
        leftover=$((leftover + 1))
        "$ember" train mlp --data "$work/data" --save "$ckpt" --epochs 1 --batch 64 --workers 1 \
            --threads 1 --no-val --max-steps 1 >/dev/null 2>&1
        tmps=("$ckpt".tmp.*)
        if [ -e "${tmps[0]}" ]; then
            echo "FAIL ($what): the next save left ${tmps[*]}"
            fails=$((fails + 1))
            rm -f "$ckpt".tmp.*
        fi
    fi
    local others
    others=$(ls -A "$work/run" | grep -v '^ckpt\.st$')
    if [ -n "$others" ]; then
        echo "FAIL ($what): left in the directory: $others"
        fails=$((fails + 1))
        find "$work/run" -mindepth 1 ! -name ckpt.st -delete
    fi
}

for ((k = 0; k < n; k++)); do
    rm -f "$ckpt"
    { "${train[@]}" >/dev/null 2>&1 &
      pid=$!
      sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", 0.2 + 2.0 * r / 32767 }')"
      kill -KILL $pid
      wait $pid; } 2>/dev/null
    check "kill $k"
done
echo "random kills: $n runs, $checked checks, checkpoint present $present times, a temporary" \
     "left for the next save $leftover times, $fails failures"

if command -v strace >/dev/null && strace -f -o /dev/null true 2>/dev/null; then
    # the 1st..4th save's call killed (signal) or failed (error)
    before=$fails
    runs=0
    for call in fsync linkat rename; do
        for when in 1 2 3 4; do
            for how in signal=KILL error=EIO; do
                rm -f "$ckpt"
                { timeout 120 strace -f -o /dev/null -e trace=$call \
                    -e inject=$call:$how:when=$when "${train[@]}" --epochs 6 \
                    >/dev/null 2>"$work/train.err"; rc=$?; } 2>/dev/null
                runs=$((runs + 1))
                # the injection must have hit: killed, or a failed save named as such
                if { [ $how = signal=KILL ] && [ $rc -ne 137 ]; } ||
                   { [ $how = error=EIO ] && ! grep -q "ember train: .*$ckpt" "$work/train.err"; }
                then
                    echo "FAIL ($call #$when $how): exit $rc: $(tail -1 "$work/train.err")"
                    fails=$((fails + 1))
                fi
                check "$call #$when $how"
            done
        done
    done
    echo "strace injection: $runs runs (fsync, linkat, rename; killed or EIO at the 1st-4th" \
         "call), $((fails - before)) failures"
else
    echo "strace cannot trace here: no injection runs"
fi
[ $fails -eq 0 ] && echo "crash test passed" || { echo "crash test FAILED"; exit 1; }
