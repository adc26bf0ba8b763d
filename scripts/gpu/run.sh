#!/usr/bin/env bash
# On a GPU machine with the NVIDIA driver, the CUDA toolkit, CMake and a C compiler but none of
# ember's Debian packages: unpacks what scripts/gpu/pack_debs.sh packed (.gpu/root.tar.xz) into
# .gpu/root, builds ember's CLI and CUDA suites for the GPU's architecture, runs the suites,
# `ember train mlp|gpt --device cuda` with the recipes' defaults, compute-sanitizer (memcheck and
# racecheck) over the parity suite, the CUDA benchmarks next to PyTorch on the same GPU, `ember
# profile` and `ember compare` on the GPU, and prints one table (also $OUT/summary.txt). A lent
# GPU session has minutes, so the stages run most important first, each cut off where the budget
# (EMBER_GPU_BUDGET_S seconds, default 450) would run out; the table names what was cut or
# skipped. Logs go to $OUT (or .gpu/out): eight files, the most that come back from a lent
# machine. EMBER_GPU_ROUNDS (default 1) sets the benchmark's rounds alternating ember and
# PyTorch; EMBER_GPU_BENCH_ONLY=fashion|gpt benchmarks and profiles those cases alone.
# Usage: bash scripts/gpu/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
out=${OUT:-$PWD/.gpu/out}
mkdir -p "$out"
root=$PWD/.gpu/root
budget=${EMBER_GPU_BUDGET_S:-450}
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
tmp=$PWD/.gpu/tmp # what the table reads but need not come back (the JSON, the traces)
rm -rf "$tmp" && mkdir -p "$tmp"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader)
arch=$(echo "$gpu" | awk -F', ' '{gsub(/\./, "", $4); print $4}')
say "== ember on ${gpu:-no GPU found} (budget ${budget} s)"

# ---- build: the CLI and the CUDA suites, for this GPU only ----
suites="test_cuda_parity test_cuda_training test_cuda test_cuda_kernels test_cuda_loader
        test_device_move"
mpi=$lib/openmpi
within 300 "$out/build.log" cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
    -DEMBER_CUDA_ARCHITECTURES="${arch:-90}" -DCMAKE_PREFIX_PATH="$root/usr" \
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
    within 300 "$out/build.log" cmake --build build-gpu -j"$(nproc)" --target ember $suites
    built=$?
fi
report "build (sm_${arch:-90})" $built
if [ $built != 0 ]; then
    tail -30 "$out/build.log"
    exit 1
fi

# ---- the CUDA suites, the parity suite first ----
export EMBER_DATA_DIR=$PWD/tests/data EMBER_SOURCE_DIR=$PWD OMP_NUM_THREADS=8
: >"$out/cuda.log"
for t in $suites; do
    : >"$out/suite.tmp"
    # the parity suite waits for each kernel, so a fault is reported by the op that launched it
    sync=0
    [ "$t" = test_cuda_parity ] && sync=1
    within 180 "$out/suite.tmp" env EMBER_CUDA_SYNC=$sync "build-gpu/tests/$t" --jobs 1 --verbose
    rc=$?
    counts=$(grep -E "^\[====\] Synthesis" "$out/suite.tmp" | sed 's/.*Synthesis: //; s/ *$//')
    skipped=$(grep -c "^\[SKIP\]" "$out/suite.tmp")
    report "$t" $rc "${counts:+($counts | Skipped: $skipped)}"
    { echo "==== $t"; cat "$out/suite.tmp"; } >>"$out/cuda.log"
done
rm -f "$out/suite.tmp"

# ---- the recipes trained on the GPU through the CLI, with their defaults (the CPU reaches test
# accuracy 0.8878 on mlp and val loss 1.8026 on gpt: README) ----
for recipe in mlp gpt; do
    dir=$data
    [ $recipe = gpt ] && dir=$fortunes
    : >"$tmp/train_$recipe.json"
    within 150 "$out/train.log" sh -c "build-gpu/ember train $recipe --device cuda \
        --data '$dir' >'$tmp/train_$recipe.json'"
    report "ember train $recipe --device cuda" $? "$(tr -d '\n' <"$tmp/train_$recipe.json" |
        grep -oE '"(test_acc|val_loss|wall_s)": *[0-9.]+' | tr '\n' ' ')"
done

# ---- compute-sanitizer over the parity suite: memory errors, then shared-memory races ----
: >"$out/sanitizer.log"
for tool in memcheck racecheck; do
    within 240 "$out/sanitizer.log" compute-sanitizer --tool $tool --error-exitcode 9 \
        build-gpu/tests/test_cuda_parity --jobs 1
    report "compute-sanitizer $tool test_cuda_parity" $?
done

# ---- the benchmarks next to PyTorch on the same GPU, f32 first ----
# (PyTorch runs on the machine's own libraries, not on the unpacked Debian ones)
: >"$out/bench.log"
bench() {
    within 120 "$out/bench.log" env EMBER_PYTHON="env -u LD_LIBRARY_PATH python3" \
        build-gpu/ember bench train --device cuda --amp "$1" --rounds "${EMBER_GPU_ROUNDS:-1}" \
        --threads 8 --data "$data" --gpt-data "$fortunes" --gpt-steps 20 \
        ${EMBER_GPU_BENCH_ONLY:+--only "$EMBER_GPU_BENCH_ONLY"}
    report "bench train --amp $1" $?
}
bench off

# ---- where the time goes on the GPU: each op's kernels timed with CUDA events ----
: >"$out/profile.log"
profiles=("cnn --batch 512" gpt)
[ "${EMBER_GPU_BENCH_ONLY:-}" = gpt ] && profiles=(gpt)
[ "${EMBER_GPU_BENCH_ONLY:-}" = fashion ] && profiles=("cnn --batch 512")
for recipe in "${profiles[@]}"; do
    # shellcheck disable=SC2086 # the recipe and its options are words
    within 60 "$out/profile.log" build-gpu/ember profile $recipe --device cuda --steps 20 \
        --data "$([ "$recipe" = gpt ] && echo "$fortunes" || echo "$data")" \
        --trace "$tmp/profile.json"
    report "ember profile $recipe --device cuda" $?
done

# ---- what autocast and activation checkpointing buy on the GPU ----
: >"$out/compare.log"
for recipe in mlp gpt; do
    within 120 "$out/compare.log" build-gpu/ember compare $recipe --device cuda \
        --data "$([ $recipe = gpt ] && echo "$fortunes" || echo "$data")"
    report "ember compare $recipe --device cuda" $?
done

bench bf16
bench f16

# ---- one table ----
{
    echo
    echo "failures in the suites:"
    grep -E "\[FAIL\]|\[----\].*(Assertion|error)" "$out/cuda.log" | head -20
    echo "parity cases that failed: $(grep -c " FAIL" "$out/cuda.log") lines, the first 40:"
    grep -E " FAIL|^      " "$out/cuda.log" | head -40
    grep -E "ERROR SUMMARY" "$out/sanitizer.log" | sort | uniq -c
    echo "bench train (samples/s, ember vs PyTorch, same GPU):"
    grep -E "^ember bench train on|^case|^ +ember tokens|^(mlp|cnn|gpt)_" "$out/bench.log"
    echo "ember train mlp and gpt --device cuda:"
    cat "$tmp/train_mlp.json" "$tmp/train_gpt.json"
    echo "done at $(($(date +%s) - t0)) s"
} | tee -a "$summary"
exit $status
