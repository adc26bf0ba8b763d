#!/usr/bin/env bash
# On a GPU machine with the NVIDIA driver, the CUDA toolkit, CMake, a C compiler and PyTorch (its
# nvidia-cudnn wheel gives cuDNN) but none of ember's Debian packages: unpacks what
# scripts/gpu/pack_debs.sh packed (.gpu/root.tar.xz) into .gpu/root, builds ember's CLI and CUDA
# suites for sm_90 with cuDNN where the wheel has it, and runs, most important first, each stage
# cut off where the budget (EMBER_GPU_BUDGET_S seconds, default 480) would run out:
#   the CUDA suites (the op-case parity suite first, then the graph replay and launch-count
#   suites), `ember bench train --device cuda` in f32 beside PyTorch eager, the same with
#   --cuda-graph beside torch.compile(mode="reduce-overhead") on mlp_b64 and gpt_b32,
#   compute-sanitizer's memcheck and racecheck over the parity suite, `ember profile gpt|cnn`
#   (device launches per step), the benchmark in bf16 and f16, the CNN cases with ember's own
#   convolutions (EMBER_CUDNN=0) and with cuDNN's measured algorithms (EMBER_CUDNN=find),
#   `ember train mlp|gpt --device cuda` (gpt also with --cuda-graph), `ember compare mlp|gpt`,
#   and the graph benchmark in bf16 and f16.
# It goes on past a failure, prints one table last (also $OUT/summary.txt), and leaves six files
# in $OUT (or .gpu/out): summary.txt, build.log, suites.log, sanitizer.log, bench.log, runs.log.
# EMBER_GPU_ROUNDS (default 1) sets the benchmark's rounds alternating ember and PyTorch.
# Usage: bash scripts/gpu/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
out=${OUT:-$PWD/.gpu/out}
mkdir -p "$out"
root=$PWD/.gpu/root
budget=${EMBER_GPU_BUDGET_S:-480}
rounds=${EMBER_GPU_ROUNDS:-1}
t0=$(date +%s)
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# within CAP LOG CMD...: CMD with its output appended to LOG, stopped after CAP seconds or where
# the budget runs out, whichever is first; its exit status (124: stopped, 125: no time to start)
within() {
    local cap=$1 log=$2 left=$((budget - ($(date +%s) - t0)))
    shift 2
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 15 ]; then
        echo "(not run: the budget is spent) $*" >>"$log"
        return 125
    fi
    timeout -k 10 "$cap" "$@" >>"$log" 2>&1
}
# report WHAT RC [DETAIL]: one line of the table; any stage not ok makes the script's status 1
status=0
report() {
    local v
    case $2 in 0) v=ok ;; 124) v="CUT at the time limit" ;; 125) v="SKIPPED (budget spent)" ;;
               *) v="FAILED (exit $2)" ;; esac
    [ "$2" = 0 ] || status=1
    say "$1: $v${3:+ $3} (at $(($(date +%s) - t0)) s)"
}
# section LOG TITLE: a header in LOG before a stage's output
section() { printf '\n==== %s (at %s s)\n' "$2" "$(($(date +%s) - t0))" >>"$1"; }

build=$out/build.log suites_log=$out/suites.log sanitizer=$out/sanitizer.log
bench_log=$out/bench.log runs=$out/runs.log
for f in "$build" "$suites_log" "$sanitizer" "$bench_log" "$runs"; do : >"$f"; done

# ---- the Debian packages, unpacked where the build and the programs find them ----
rm -rf "$root" && mkdir -p "$root"
if ! tar -xJf .gpu/root.tar.xz -C "$root"; then
    say "no .gpu/root.tar.xz: run scripts/gpu/pack_debs.sh first and carry the file along"
    exit 1
fi
lib=$root/usr/lib/x86_64-linux-gnu
# private requirements only count when linking statically, and theirs (gnutls for
# libmicrohttpd) are -dev packages the archive leaves out
sed -i '/^Requires.private:/d' "$lib"/pkgconfig/*.pc
unpacked=$lib:$lib/openblas-pthread:$lib/openmpi/lib
export LD_LIBRARY_PATH=$unpacked${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$root/usr/bin:$PATH
export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$root/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
export OPAL_PREFIX=$root/usr # OpenMPI's files, moved under .gpu/root
command -v compute-sanitizer >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
zlib=$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
data=$root/usr/share/datasets/fashion-mnist fortunes=$root/usr/share/games/fortunes
tmp=$PWD/.gpu/tmp # what the table reads but need not come back (the JSON lines)
rm -rf "$tmp" && mkdir -p "$tmp"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader \
      2>/dev/null)
say "== ember on ${gpu:-no GPU found} (budget ${budget} s)"

# ---- cuDNN from the nvidia-cudnn wheel of the Python that has PyTorch ----
cudnn=$(env -u LD_LIBRARY_PATH python3 -c \
        'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null)
if [ -n "$cudnn" ] && [ -d "$cudnn/lib" ]; then
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
    say "cuDNN: the wheel at $cudnn"
else
    say "cuDNN: no nvidia-cudnn wheel under python3; CMake looks beside the toolkit"
fi

# ---- build: the CLI and the CUDA suites, for sm_90 ----
suites="test_cuda_parity test_cuda_graph test_cuda_launches test_cuda_training test_cuda
        test_cuda_kernels test_cuda_loader test_device_move"
mpi=$lib/openmpi
within 300 "$build" cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
    -DEMBER_CUDA_ARCHITECTURES="${EMBER_GPU_ARCH:-90}" -DEMBER_CUDNN_ROOT="$cudnn" \
    -DCMAKE_PREFIX_PATH="$root/usr" \
    -DOPENBLAS_LIB="$lib/openblas-pthread/libopenblas.so" \
    -DCBLAS_INCLUDE_DIR="$root/usr/include/x86_64-linux-gnu/openblas-pthread" \
    -DCRITERION_LIB="$lib/libcriterion.so" \
    -DZLIB_INCLUDE_DIR="$root/usr/include" -DZLIB_LIBRARY="$zlib" \
    -DMPI_C_COMPILER="$root/usr/bin/mpicc.openmpi" -DMPI_C_HEADER_DIR="$mpi/include" \
    -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$mpi/lib/libmpi.so" \
    -DMPIEXEC_EXECUTABLE="$root/usr/bin/mpirun.openmpi" \
    -DCMAKE_C_FLAGS="-I$root/usr/include -I$root/usr/include/x86_64-linux-gnu"
built=$?
if [ $built = 0 ]; then
    # shellcheck disable=SC2086 # the suites are one word each
    within 300 "$build" cmake --build build-gpu -j"$(nproc)" --target ember $suites
    built=$?
fi
report "build (sm_${EMBER_GPU_ARCH:-90})" $built \
    "$(grep -oE 'ember: cuDNN [^ ]+|cuDNN not found' "$build" | head -1)"
if [ $built != 0 ]; then
    tail -30 "$build"
    exit 1
fi
ember=$PWD/build-gpu/ember

# ---- the CUDA suites: the parity suite first (waiting for each kernel, so that a fault is
# reported by the op that launched it), then the graphs' replays and the launch counts ----
export EMBER_DATA_DIR=$PWD/tests/data EMBER_SOURCE_DIR=$PWD OMP_NUM_THREADS=8
for t in $suites; do
    : >"$tmp/suite"
    sync=0
    [ "$t" = test_cuda_parity ] && sync=1
    within 180 "$tmp/suite" env EMBER_CUDA_SYNC=$sync "build-gpu/tests/$t" --jobs 1 --verbose
    rc=$?
    counts=$(grep -E "^\[====\] Synthesis" "$tmp/suite" | sed 's/.*Synthesis: //; s/ *$//')
    skipped=$(grep -c "^\[SKIP\]" "$tmp/suite")
    report "$t" $rc "${counts:+($counts | Skipped: $skipped)}"
    section "$suites_log" "$t"
    cat "$tmp/suite" >>"$suites_log"
done

# ---- benchmarks next to PyTorch on the same GPU (PyTorch on the machine's own libraries) ----
# bench CAP TITLE [ENV=VALUE...] -- ARGS...: one `ember bench train --device cuda` run
bench() {
    local cap=$1 title=$2 envs=()
    shift 2
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    section "$bench_log" "$title"
    within "$cap" "$bench_log" env EMBER_PYTHON="env -u LD_LIBRARY_PATH python3" "${envs[@]}" \
        "$ember" bench train --device cuda --rounds "$rounds" --threads 8 --data "$data" \
        --gpt-data "$fortunes" --gpt-steps 20 "$@"
    report "bench: $title" $?
}
graph_cases=mlp_b64,gpt_b32
bench 150 "f32, eager, beside PyTorch eager" -- --amp off
bench 200 "f32, --cuda-graph, beside torch.compile reduce-overhead" -- --amp off \
    --cuda-graph --cases "$graph_cases"

# ---- compute-sanitizer over the parity suite: memory errors, then shared-memory races ----
for tool in memcheck racecheck; do
    section "$sanitizer" "$tool"
    within 240 "$sanitizer" compute-sanitizer --tool $tool --error-exitcode 9 \
        build-gpu/tests/test_cuda_parity --jobs 1
    report "compute-sanitizer $tool test_cuda_parity" $?
done

# ---- where the time goes: each op's kernels timed with CUDA events, device launches per step
for recipe in gpt "cnn --batch 512"; do
    section "$runs" "ember profile $recipe --device cuda"
    # shellcheck disable=SC2086 # the recipe and its options are words
    within 60 "$runs" "$ember" profile $recipe --device cuda --steps 20 \
        --data "$([ "$recipe" = gpt ] && echo "$fortunes" || echo "$data")" \
        --trace "$tmp/profile.json"
    report "ember profile $recipe --device cuda" $? \
        "$(grep -A0 'device launches' "$runs" | tail -1 | sed 's/ (.*//')"
done

bench 150 "bf16, eager, beside PyTorch eager" -- --amp bf16
bench 150 "f16, eager, beside PyTorch eager" -- --amp f16

# ---- the convolutions: ember's own kernels, and cuDNN's measured algorithms, beside the
# heuristic's in the f32 run above ----
bench 90 "f32 CNN, ember's own convolutions (EMBER_CUDNN=0)" EMBER_CUDNN=0 -- --amp off \
    --cases cnn_b64,cnn_b512
bench 90 "f32 CNN, cuDNN's measured algorithms (EMBER_CUDNN=find)" EMBER_CUDNN=find -- \
    --amp off --cases cnn_b64,cnn_b512

# ---- the recipes trained through the CLI with their defaults (the CPU reaches test accuracy
# 0.8878 on mlp and val loss 1.8026 on gpt: README) ----
# train_recipe NAME DATA [OPTION...]: its JSON line into .gpu/tmp, the rest into runs.log
n_train=0
train_recipe() {
    local name=$1 dir=$2 json
    shift 2
    n_train=$((n_train + 1))
    json=$tmp/train_$n_train.json
    : >"$json"
    section "$runs" "ember train $name --device cuda${*:+ $*}"
    # shellcheck disable=SC2016 # the inner shell expands them
    within 150 "$runs" sh -c 'json=$1; shift; exec "$@" >"$json"' sh "$json" \
        "$ember" train "$name" --device cuda --data "$dir" "$@"
    report "ember train $name --device cuda${*:+ $*}" $? "$(tr -d '\n' <"$json" |
        grep -oE '"(test_acc|val_loss|wall_s|cuda_graph_replays)": *[0-9.]+' | tr '\n' ' ')"
}
train_recipe mlp "$data"
train_recipe gpt "$fortunes"
train_recipe gpt "$fortunes" --cuda-graph

# ---- what autocast and activation checkpointing buy on the GPU ----
for recipe in mlp gpt; do
    section "$runs" "ember compare $recipe --device cuda"
    within 120 "$runs" "$ember" compare $recipe --device cuda \
        --data "$([ $recipe = gpt ] && echo "$fortunes" || echo "$data")"
    report "ember compare $recipe --device cuda" $?
done

bench 150 "bf16, --cuda-graph, beside torch.compile reduce-overhead" -- --amp bf16 \
    --cuda-graph --cases "$graph_cases,gpt_b64_t256"
bench 120 "f16, --cuda-graph (the grad scaler: eager, saying why)" -- --amp f16 --cuda-graph \
    --cases "$graph_cases"

# ---- one table ----
{
    echo
    echo "failures in the suites:"
    grep -E "\[FAIL\]|\[----\].*(Assertion|error)" "$suites_log" | head -20
    echo "parity cases that failed: $(grep -c " FAIL" "$suites_log") lines, the first 40:"
    grep -E " FAIL|^      " "$suites_log" | head -40
    grep -E "ERROR SUMMARY" "$sanitizer" | sort | uniq -c
    echo "bench train (samples/s or tokens/s, ember vs PyTorch, same GPU), run by run:"
    rows="^==== |^ember bench train on|^beside|^ember's steps|^case|^ +ember tokens"
    grep -E "$rows|cannot compile|cuda graph:|^(mlp|cnn|gpt)_" "$bench_log"
    echo "device launches per step:"
    grep -E "^==== ember profile|device launches" "$runs"
    echo "ember train --device cuda (JSON lines):"
    cat "$tmp"/train_*.json
    echo "done at $(($(date +%s) - t0)) s"
} | tee -a "$summary"
exit $status
