#!/usr/bin/env bash
# Fuzz campaign: builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan) in build-fuzz/
# and runs each for SECONDS from its seed corpus (plus what earlier campaigns found, kept in
# build-fuzz/tests/fuzz/corpus/), one after another, at low priority. Prints each target's
# executions and findings; an input that breaks a target is saved as
# build-fuzz/tests/fuzz/findings/<target>-crash-*. Exits 1 when any target had a finding. A
# target's own libFuzzer flags (tests/fuzz/fuzz_<target>.options) follow the common ones, with its
# dictionary (tests/fuzz/fuzz_<target>.dict) where it has one.
# Usage: scripts/fuzz_campaign.sh SECONDS [TARGET...]   (default: every target)
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:?usage: scripts/fuzz_campaign.sh SECONDS [TARGET...]}
shift
build=build-fuzz
cmake -S . -B $build -DCMAKE_C_COMPILER=clang -DEMBER_FUZZ=ON -DEMBER_TESTS=OFF -DEMBER_CUDA=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build $build -j2 >/dev/null || { echo "fuzz build failed"; exit 1; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//'))
found=0
printf '%-18s %12s %8s %9s %s\n' target executions exec/s corpus findings
for t in "${targets[@]}"; do
    dir=$build/tests/fuzz
    mkdir -p $dir/corpus/$t $dir/findings
    log=$dir/campaign-$t.log
    before=$(ls $dir/findings | grep -c "^$t-")
    own=$(cat tests/fuzz/fuzz_$t.options 2>/dev/null) # the target's own flags override these
    [ -f tests/fuzz/fuzz_$t.dict ] && own="$own -dict=tests/fuzz/fuzz_$t.dict"
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 10 $dir/fuzz_$t -max_total_time=$secs \
        -timeout=10 -rss_limit_mb=2048 $own -print_final_stats=1 \
        -artifact_prefix=$dir/findings/$t- $dir/corpus/$t tests/fuzz/corpus/$t >$log 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' $log | grep -o '[0-9]*$')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' $log | grep -o '[0-9]*$')
    findings=$(( $(ls $dir/findings | grep -c "^$t-") - before ))
    [ $rc -ne 0 ] && [ $findings -eq 0 ] && findings="rc $rc (see $log)"
    [ "$findings" != 0 ] && found=1
    printf '%-18s %12s %8s %9s %s\n' $t "${execs:-?}" "${rate:-?}" \
        "$(ls $dir/corpus/$t | wc -l)" "$findings"
done
exit $found
