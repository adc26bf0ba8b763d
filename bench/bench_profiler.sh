#!/usr/bin/env bash
# The profiler's cost on a recipe's training: samples/s with its hooks compiled out
# (-DEMBER_PROFILER=OFF, built in build-noprof/), compiled in but off, and on (every micro-batch
# recorded, the trace written), in rounds that alternate the three so a busy machine slows them
# alike; prints each round, the medians and their ratios to the compiled-out build.
# Usage: bench/bench_profiler.sh [RECIPE (cnn)] [MICRO-BATCHES (300)] [ROUNDS (3)]
set -euo pipefail
cd "$(dirname "$0")/.."
recipe=${1:-cnn}
steps=${2:-300}
rounds=${3:-3}
if [ ! -x build/ember ]; then
    echo "bench_profiler: build ember first (bash setup.sh)" >&2
    exit 1
fi
cmake -S . -B build-noprof -DCMAKE_BUILD_TYPE=Release -DEMBER_PROFILER=OFF -DEMBER_TESTS=OFF \
      >/dev/null
cmake --build build-noprof -j2 --target ember >/dev/null
trace=$(mktemp --suffix=.json)
trap 'rm -f "$trace"' EXIT
run="train $recipe --epochs 1 --max-steps $steps --no-val --seed 1"

# samples/s of one run: the train_samples_per_s of its JSON summary
samples_per_s() {
    "$@" 2>/dev/null | sed -n 's/.*"train_samples_per_s":\([0-9.]*\).*/\1/p'
}

median() {
    printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

out=() in=() on=()
for r in $(seq 1 "$rounds"); do
    out+=("$(samples_per_s build-noprof/ember $run)")
    in+=("$(samples_per_s build/ember $run)")
    on+=("$(samples_per_s build/ember $run --profile "$trace" --profile-steps "1:$steps")")
    echo "round $r: compiled out ${out[-1]}, compiled in ${in[-1]}, on ${on[-1]} samples/s"
done
m_out=$(median "${out[@]}")
m_in=$(median "${in[@]}")
m_on=$(median "${on[@]}")
echo "ember train $recipe, $steps micro-batches, median of $rounds rounds (samples/s):"
awk -v o="$m_out" -v i="$m_in" -v n="$m_on" 'BEGIN {
    printf "  compiled out %8.0f  1.000\n  compiled in  %8.0f  %.3f\n  on           %8.0f  %.3f\n",
           o, i, i / o, n, n / o }'
