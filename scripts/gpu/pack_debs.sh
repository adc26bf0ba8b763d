#!/usr/bin/env bash
# Packs, on a Debian machine with ember's set-up, the packages setup.sh installs and the
# libraries they load into .gpu/root.tar.xz, for a GPU machine that has the NVIDIA driver, the
# CUDA toolkit, CMake and a C compiler but no Debian packages; scripts/gpu/run.sh unpacks it there.
# Headers come from the packages setup.sh names only (their own -dev dependencies stay behind),
# and libraries every Linux system has (glibc, libstdc++, zlib, OpenSSL, Kerberos) stay behind
# too. The archive goes to the GPU machine with the working tree, so it is kept small: the
# packages' contents without documentation, static libraries or LAPACK, compressed with xz
# (about 45 MB, most of it the Fashion-MNIST images; the .deb files themselves are 59 MB);
# .gpu/packages.txt lists the packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
debs=.gpu/debs root=.gpu/pack
rm -rf "$debs" "$root" .gpu/root.tar.xz
mkdir -p "$debs" "$root"
# setup.sh's packages but the tools the GPU machine has and the fuzzing compiler
skip='cmake|make|gcc|pkg-config|python3-venv|libopenblas-dev|clang|libclang-rt-.*'
wanted=$(sed -n '/^packages=(/,/)/p' setup.sh | tr -d '()' | sed 's/packages=//' | tr ' ' '\n' |
         grep -v -E "^($skip|)$")
# the OpenBLAS build the GPU machine links (the pthread one, with its headers) and pkg-config
wanted="$wanted libopenblas-pthread-dev pkgconf-bin"
base='^(libc6|libgcc-s1|libstdc\+\+6|gcc-12-base|zlib1g|libssl3|libcom-err2|libgssapi-krb5-2|'
base+='libk5crypto3|libkeyutils1|libkrb5-3|libkrb5support0|libcrypt1|debconf|dpkg|perl.*|'
base+='libpython.*|python3.*|libselinux1|libpcre2-8-0|libzstd1|liblzma5|libbz2-1.0|libgmp10|'
base+='libc6-dev|linux-libc-dev|libc-dev-bin|libcrypt-dev|'
base+='libnsl-dev|libtirpc-dev|rpcsvc-proto|'
# compilers and their tools (the GPU machine has its own C compiler; OpenMPI's -dev package asks
# for gfortran), and what only the programs around OpenMPI need (ssh, accounts, jQuery docs):
# with them the archive would be several times larger
base+='gcc-[0-9]+|cpp-[0-9]+|gfortran-[0-9]+|binutils.*|libbinutils|libgprofng0|libctf.*|'
base+='lib(asan|ubsan|tsan|lsan|hwasan|itm|cc1|atomic|isl|mpc|mpfr)[0-9-]*|lib32.*|libc6-i386|'
base+='clang.*|libclang.*|llvm.*|libllvm.*|libz3-.*|libicu.*|libobjc.*|'
base+='openssh-client|passwd|adduser|libpam.*|libsemanage.*|libsepol.*|libaudit.*|libjs-.*)$'
# breadth first over Depends: every wanted package, then only the libraries below them
declare -A seen
# shellcheck disable=SC2206 # one word per package
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
# virtual packages (an alternative such as ssh-client) have no candidate to download: the real
# package beside them in the same Depends line is in the set
real=$(apt-cache policy "${!seen[@]}" |
       awk '/^[^ ].*:$/ {p = substr($0, 1, length($0) - 1)}
            /Candidate:/ && $2 != "(none)" {print p}')
# (apt-get warns that root downloads unsandboxed: said once per file, left out)
# shellcheck disable=SC2086 # one word per package
(cd "$debs" && apt-get download $real >/dev/null) 2>&1 |
    { grep -v '^W: Download is performed unsandboxed' || true; } >&2
for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$root"; done
find "$root" -name '*.a' -delete
rm -rf "$root"/usr/share/{doc,man,info,locale,lintian} "$root"/usr/lib/x86_64-linux-gnu/fortran \
       "$root"/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack.*
tar -cJf .gpu/root.tar.xz -C "$root" .
echo "$(ls "$debs" | wc -l) packages: $(du -sh .gpu/root.tar.xz | cut -f1) in .gpu/root.tar.xz"
ls "$debs" | sed 's/_.*//' >.gpu/packages.txt
rm -rf "$debs" "$root"
