#!/usr/bin/env bash
# Installs ember into a temporary prefix, then builds and runs a consumer program twice: through
# pkg-config and through find_package(ember). Usage: check.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(dirname "$(find "$work/prefix" -name ember.pc)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc "$src/tests/install/consumer.c" -o "$work/consumer_pc" $(pkg-config --cflags --libs ember)
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"
cmake -S "$src/tests/install" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"
echo "install check: pkg-config and find_package consumers both ran"
