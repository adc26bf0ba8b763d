#!/usr/bin/env bash
# Installs ember into a temporary prefix and checks what a program outside the tree gets:
#   - every installed header compiles on its own, as C11 and as C++17 (-pedantic), with only
#     <prefix>/include on the path, and a program's own backend/, tensor/ or nn/ headers named
#     like ours do not shadow them;
#   - the package files name no folder of this machine;
#   - C and C++ consumers build and run through pkg-config and through find_package(ember),
#     the shared-library one also with the CUDA toolkit hidden from CMake; the README's run-time
#     advice holds: a pkg-config build needs LD_LIBRARY_PATH or -Wl,-rpath (and runs with the
#     rpath alone), an installed find_package build runs with CMAKE_INSTALL_RPATH_USE_LINK_PATH;
#   - the example programs (examples/: a CSV classifier in C, a residual CNN in C++) build through
#     pkg-config and through find_package, train to their accuracy, reload bit for bit, and
#     print the same results from both builds; the installed `ember` takes the classifier's
#     whole-model file as it is.
# Usage: check.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
inc=$prefix/include

# a program's own headers with our names, found first on its include path
for h in backend/dtype.h tensor/tensor.h tensor/error.h nn/nn.h optim/optim.h data/data.h; do
  mkdir -p "$work/own/$(dirname "$h")"
  echo "#error \"the program's own $h was included instead of ember's\"" >"$work/own/$h"
done
n=0
for h in $(cd "$inc" && find ember -name '*.h' | sort); do
  printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$work/one.c"
  cp "$work/one.c" "$work/one.cpp"
  cc -std=c11 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$work/own" -I"$inc" "$work/one.c"
  c++ -std=c++17 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$work/own" -I"$inc" \
    "$work/one.cpp"
  n=$((n + 1))
done
echo "install check: $n headers compile alone as C and C++, not shadowed by a program's own"

libdir=$(dirname "$(find "$prefix" -name ember.pc)")/..
for f in $(find "$prefix" -name '*.cmake' -o -name '*.pc'); do
  for p in "$src" "$build" /usr/lib /usr/local; do
    if grep -q "$p" "$f"; then
      echo "install check: $f names a folder of this machine: $p" >&2
      exit 1
    fi
  done
done

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc "$src/tests/install/consumer.c" -o "$work/consumer_pc" $(pkg-config --cflags --libs ember)
c++ "$src/tests/install/consumer.cpp" -o "$work/consumer_pc_cxx" $(pkg-config --cflags --libs ember)
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc_cxx"
# the README's advice for a prefix outside the loader's path: pkg-config's flags alone leave
# libember.so unfound at run time; -Wl,-rpath with pkg-config's libdir finds it
if env -u LD_LIBRARY_PATH "$work/consumer_pc" >/dev/null 2>&1; then
  echo "install check: a pkg-config build found libember without LD_LIBRARY_PATH or an rpath" >&2
  exit 1
fi
cc "$src/tests/install/consumer.c" -o "$work/consumer_rpath" $(pkg-config --cflags --libs ember) \
  -Wl,-rpath,"$(pkg-config --variable=libdir ember)"
env -u LD_LIBRARY_PATH "$work/consumer_rpath"
cmake -S "$src/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"
"$work/consumer/consumer_cxx"
# find_package: the build tree's binaries carry the rpath; an installed one keeps it with
# CMAKE_INSTALL_RPATH_USE_LINK_PATH
cmake -S "$src/tests/install" -B "$work/consumer_inst" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON -DCMAKE_INSTALL_PREFIX="$work/consumer_prefix" >/dev/null
cmake --build "$work/consumer_inst" >/dev/null
cmake --install "$work/consumer_inst" >/dev/null
env -u LD_LIBRARY_PATH "$work/consumer_prefix/bin/consumer_cxx"
cmake -S "$src/tests/install" -B "$work/shared_only" -DCMAKE_PREFIX_PATH="$prefix" \
  -DEMBER_SHARED_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >/dev/null
cmake --build "$work/shared_only" >/dev/null
"$work/shared_only/consumer_cxx"
echo "install check: pkg-config and find_package consumers, C and C++, all ran"

# 400 rows: an id, 4 features around one centre per species (k at k, -k, 2k, 0; uniform noise
# in [-0.9, 0.9) from a Park-Miller generator; every 40th row misses f3) and the species' name
awk 'BEGIN { s = 1; split("red green blue", name, " "); print "id,f1,f2,f3,f4,species"
  for (i = 0; i < 400; i++) { k = i % 3; c[0] = k; c[1] = -k; c[2] = 2 * k; c[3] = 0; row = i ","
    for (j = 0; j < 4; j++) { s = (16807 * s) % 2147483647
      v = sprintf("%.4f", c[j] + 1.8 * (s / 2147483647 - 0.5))
      row = row (j == 2 && i % 40 == 7 ? "" : v) "," }
    print row name[k + 1] } }' >"$work/species.csv"
warn="-Wall -Wextra -pedantic -Werror"
cc -std=c11 $warn "$src/examples/csv_classifier.c" -o "$work/csv_pc" \
  $(pkg-config --cflags --libs ember)
c++ -std=c++17 $warn "$src/examples/residual_cnn.cpp" -o "$work/cnn_pc" \
  $(pkg-config --cflags --libs ember)
cmake -S "$src/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/examples" >/dev/null
csv_pc=$(LD_LIBRARY_PATH="$libdir" "$work/csv_pc" "$work/species.csv" "$work/csv_pc.safetensors")
csv_cm=$("$work/examples/csv_classifier" "$work/species.csv" "$work/csv_cm.safetensors")
cnn_pc=$(LD_LIBRARY_PATH="$libdir" "$work/cnn_pc" "$work/cnn_pc.safetensors")
cnn_cm=$("$work/examples/residual_cnn" "$work/cnn_cm.safetensors")
echo "examples: $csv_pc | $cnn_pc"
# every number printed, checked: the accuracy reached, the data's shape, the model's size
check_line() { # LINE PATTERN MIN_ACCURACY
  if ! [[ $1 =~ $2 ]] || ! awk -v a="${BASH_REMATCH[1]}" -v m="$3" 'BEGIN { exit !(a >= m) }'; then
    echo "install check: example printed '$1', expected /$2/ with accuracy >= $3" >&2
    exit 1
  fi
}
check_line "$csv_pc" '^accuracy ([0-9.]+) classes 3 \(blue green red\) rows 400$' 0.95
check_line "$cnn_pc" '^accuracy ([0-9.]+) params 2483 body_params 1184$' 0.9
if [ "$csv_pc" != "$csv_cm" ] || [ "$cnn_pc" != "$cnn_cm" ]; then
  echo "install check: the pkg-config and find_package builds disagree:" >&2
  printf '  %s\n' "$csv_pc" "$csv_cm" "$cnn_pc" "$cnn_cm" >&2
  exit 1
fi
echo "install check: examples built through pkg-config and find_package agree"
# the classifier's whole-model file, a user's own model, in the installed ember command:
# 4 x 32 + 32 + 32 x 3 + 3 parameters of an input of 4 features
summary=$("$prefix/bin/ember" summary --load "$work/csv_pc.safetensors")
if ! grep -q '^Input shape: \[1,4\]$' <<<"$summary" ||
   ! grep -q '^Total params: 259$' <<<"$summary"; then
  echo "install check: ember summary of the example's model printed:" >&2
  echo "$summary" >&2
  exit 1
fi
echo "install check: ember summary takes the example's own model"
