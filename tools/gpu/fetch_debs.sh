#!/usr/bin/env bash
# Downloads, on a Debian machine with ember's set-up, the .deb files of the packages setup.sh
# installs and the libraries they load into .gpu/debs, for a GPU machine that has the NVIDIA
# driver, the CUDA toolkit, CMake and a C compiler but no Debian packages; tools/gpu/run.sh
# unpacks them there. Headers come from the packages setup.sh names only (their own -dev
# dependencies stay behind), and libraries every Linux system has (glibc, libstdc++, zlib,
# OpenSSL, Kerberos) stay behind too.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .gpu/debs
mkdir -p .gpu/debs
wanted=$(sed -n '/^packages=(/,/)/p' setup.sh | tr -d '()' | sed 's/packages=//' | tr ' ' '\n' |
         grep -v -E '^(cmake|make|gcc|pkg-config|python3-venv|libopenblas-dev|)$')
# the OpenBLAS build the GPU machine links (the pthread one, with its headers) and pkg-config
wanted="$wanted libopenblas-pthread-dev pkgconf-bin"
base='^(libc6|libgcc-s1|libstdc\+\+6|gcc-12-base|zlib1g|libssl3|libcom-err2|libgssapi-krb5-2|'
base+='libk5crypto3|libkeyutils1|libkrb5-3|libkrb5support0|libcrypt1|debconf|dpkg|perl.*|'
base+='libpython.*|python3.*|libselinux1|libpcre2-8-0|libzstd1|liblzma5|libbz2-1.0|libgmp10|'
base+='libc6-dev|linux-libc-dev|libc-dev-bin|libcrypt-dev|'
base+='libnsl-dev|libtirpc-dev|rpcsvc-proto)$'
# breadth first over Depends: every wanted package, then only the libraries below them
declare -A seen
queue=($wanted)
while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    [ -n "${seen[$p]:-}" ] && continue
    seen[$p]=1
    for d in $(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
               --no-replaces --no-enhances "$p" 2>/dev/null | sed -n 's/^ *|\?Depends: //p' |
               tr -d '<>' | sort -u); do
        [[ "$d" =~ $base || "$d" == *-dev || -n "${seen[$d]:-}" ]] && continue
        queue+=("$d")
    done
done
(cd .gpu/debs && apt-get download "${!seen[@]}" >/dev/null)
echo "$(ls .gpu/debs | wc -l) packages, $(du -sh .gpu/debs | cut -f1) in .gpu/debs"
