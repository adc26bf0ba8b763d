#!/usr/bin/env bash
# Installs ember into a temporary prefix and checks what a program outside the tree gets:
#   - every installed header compiles on its own, as C11 and as C++17 (-pedantic), with only
#     <prefix>/include on the path, and a program's own backend/, tensor/ or nn/ headers named
#     like ours do not shadow them;
#   - the package files name no folder of this machine;
#   - C and C++ consumers build and run through pkg-config and through find_package(ember),
#     the shared-library one also with the CUDA toolkit hidden from CMake.
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
cmake -S "$src/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"
"$work/consumer/consumer_cxx"
cmake -S "$src/tests/install" -B "$work/shared_only" -DCMAKE_PREFIX_PATH="$prefix" \
  -DEMBER_SHARED_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >/dev/null
cmake --build "$work/shared_only" >/dev/null
"$work/shared_only/consumer_cxx"
echo "install check: pkg-config and find_package consumers, C and C++, all ran"
