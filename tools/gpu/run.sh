#!/usr/bin/env bash
# On a GPU machine with the NVIDIA driver, the CUDA toolkit, CMake and a C compiler but none of
# ember's Debian packages: unpacks the .deb files tools/gpu/fetch_debs.sh brought (.gpu/debs)
# into .gpu/root, builds ember with its CUDA backend, runs the whole test suite (the CUDA parity,
# training and kernel suites among it) and compute-sanitizer over the CUDA suites, then the
# CUDA benchmarks next to PyTorch on the same GPU and one epoch of `ember train mlp --device
# cuda`, and prints one table. Logs go to $OUT (or .gpu/out).
# Usage: bash tools/gpu/run.sh [quick]   (quick: one benchmark round)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/.gpu/out}
mkdir -p "$out"
root=$PWD/.gpu/root
rounds=3
[ "${1:-}" = quick ] && rounds=1

# ---- the Debian packages, unpacked where the build and the tests find them ----
rm -rf "$root" && mkdir -p "$root"
for f in .gpu/debs/*.deb; do dpkg-deb -x "$f" "$root"; done
lib=$root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$root/usr/bin:$PATH
export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$root/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
zlib=$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
data=$root/usr/share/datasets/fashion-mnist

# ---- build ----
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
start=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
    -DCMAKE_PREFIX_PATH="$root/usr" \
    -DOPENBLAS_LIB="$lib/openblas-pthread/libopenblas.so" \
    -DCBLAS_INCLUDE_DIR="$root/usr/include/x86_64-linux-gnu/openblas-pthread" \
    -DCRITERION_LIB="$lib/libcriterion.so" \
    -DZLIB_INCLUDE_DIR="$root/usr/include" -DZLIB_LIBRARY="$zlib" \
    -DCMAKE_C_FLAGS="-I$root/usr/include" >"$out/build.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >>"$out/build.log" 2>&1
built=$?
echo "build: $([ $built = 0 ] && echo ok || echo FAILED) in $(( $(date +%s) - start )) s"
if [ $built != 0 ]; then
    tail -30 "$out/build.log"
    exit 1
fi

# ---- tests: the whole suite, then the CUDA suites' own output and compute-sanitizer ----
export EMBER_DATA_DIR=$PWD/tests/data
ctest --test-dir build-gpu -j8 --output-on-failure >"$out/ctest.log" 2>&1
suite=$(grep -E "tests passed|tests failed" "$out/ctest.log" | tail -1)
cuda_tests=$(ls build-gpu/tests | grep -E '^test_cuda' | grep -v '\.')
: >"$out/cuda.log"
for t in $cuda_tests; do
    OMP_NUM_THREADS=8 "build-gpu/tests/$t" --jobs 1 --verbose >>"$out/cuda.log" 2>&1
    echo "$t exit $?" >>"$out/cuda.log"
done
: >"$out/sanitizer.log"
for t in $cuda_tests; do
    for tool in memcheck racecheck; do
        timeout 900 compute-sanitizer --tool $tool --error-exitcode 9 \
            "build-gpu/tests/$t" --jobs 1 >>"$out/sanitizer.log" 2>&1
        echo "$tool $t exit $?" >>"$out/sanitizer.log"
    done
done

# ---- benchmarks next to PyTorch on the same GPU ----
: >"$out/bench.log"
for amp in off bf16 f16; do
    EMBER_PYTHON=python3 build-gpu/ember bench train --device cuda --amp $amp --rounds $rounds \
        --threads 8 --data "$data" >>"$out/bench.log" 2>&1
done

# ---- a recipe trained on the GPU through the CLI: one epoch of mlp ----
build-gpu/ember train mlp --device cuda --epochs 1 --data "$data" >"$out/train_mlp.json" \
    2>"$out/train_mlp.log"
trained=$?

# ---- one table ----
echo
echo "== ember on $(cat "$out/gpu.txt")"
echo "whole suite: $suite"
grep -E "^test_cuda.* exit|^\[(PASS|FAIL|SKIP)\]" "$out/cuda.log" | sort | uniq -c | sort -rn | head -20
grep -E "FAIL|error:" "$out/cuda.log" | head -20
echo "compute-sanitizer:"
grep -E " exit " "$out/sanitizer.log"
grep -E "ERROR SUMMARY" "$out/sanitizer.log" | sort | uniq -c
echo "bench train (samples/s, ember vs PyTorch, same GPU):"
grep -E "^ember bench train on|^case|^(mlp|cnn)_" "$out/bench.log"
echo "ember train mlp --device cuda --epochs 1: exit $trained"
cat "$out/train_mlp.json"
[ $trained = 0 ] || tail -5 "$out/train_mlp.log"
