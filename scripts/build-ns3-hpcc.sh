#!/usr/bin/env bash
# Build the HPCC ns-3 simulator (github.com/alibaba-edu/High-Precision-Congestion-Control, simulation/: ns-3.17 with
# DCQCN, PFC, ECN and a shared-buffer switch), the packet-level reference with DCQCN for benchmarks/sim_vs_ns3.py,
# from a local snapshot, outside the repository. Not part of `make test`; no network access.
#
#   scripts/build-ns3-hpcc.sh SNAPSHOT [BUILD_DIR]
#
# SNAPSHOT: a git directory (bare or not) of the HPCC repository, or a plain tree that has simulation/waf.
# BUILD_DIR defaults to .cache/ns3-hpcc (gitignored); the tree goes to BUILD_DIR/simulation. HPCC_REV picks a
# commit (default HEAD), JOBS the parallel compiles (default: every CPU), PYTHON2 the interpreter for waf.
# Prints the binary's path (BUILD_DIR/simulation/build/scratch/third) on success. Run it as
#   cd BUILD_DIR/simulation && LD_LIBRARY_PATH=build ./build/scratch/third CONFIG
#
# What this script changes in their tree (applied here with sed, idempotent):
#   * src/point-to-point/model/switch-node.cc: one added print after the ECMP choice, "PATH sip dip sport dport
#     node ifindex" for the first packet (sequence 0) of each flow at each switch, so the fluid model can be run
#     on the reference's own ECMP paths (tensorfabric.sim.reference_ns3.parse_paths), and <cstdio> for it.
# What a current toolchain (gcc 12) needs: no source change; the 2013 code compiles with
#   CXXFLAGS="-O2 -w -fpermissive -std=gnu++11"
# (gnu++11: it predates C++17's removal of dynamic exception specifications and register; -fpermissive: a
# few narrowing conversions and a missing return in third.cc's get_nic_rate), and waf 1.7 needs Python 2.
set -euo pipefail

usage() { echo "usage: $0 SNAPSHOT [BUILD_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
src=$1
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/.cache/ns3-hpcc}
rev=${HPCC_REV:-HEAD}
jobs=${JOBS:-$(nproc)}
flags="-O2 -w -fpermissive -std=gnu++11"

[ -e "$src" ] || { echo "$0: snapshot $src does not exist" >&2; exit 2; }
mkdir -p "$build"
tree=$build/simulation
if git --git-dir="$src" rev-parse --verify -q "$rev^{commit}" >/dev/null 2>&1 \
   || git -C "$src" rev-parse --verify -q "$rev^{commit}" >/dev/null 2>&1; then
    gitdir=$(git --git-dir="$src" rev-parse --absolute-git-dir 2>/dev/null || git -C "$src" rev-parse --absolute-git-dir)
    commit=$(git --git-dir="$gitdir" rev-parse "$rev^{commit}")
    if [ "$(cat "$build/commit" 2>/dev/null)" != "$commit" ]; then
        rm -rf "$tree"
        # Only the simulation/ subtree at that commit; no network.
        git --git-dir="$gitdir" archive "$commit" simulation | tar -x -C "$build"
        echo "$commit" > "$build/commit"
    fi
elif [ -f "$src/simulation/waf" ]; then
    if [ "$(cat "$build/commit" 2>/dev/null)" != "tree:$(cd "$src" && pwd)" ]; then
        rm -rf "$tree" && cp -a "$src/simulation" "$build/"
        echo "tree:$(cd "$src" && pwd)" > "$build/commit"
    fi
else
    echo "$0: $src is neither a git snapshot of High-Precision-Congestion-Control nor a tree with simulation/waf" >&2
    exit 2
fi

# waf 1.7 runs on Python 2 only: PYTHON2, else pyenv's newest 2.7, else python2 / python2.7 on PATH.
py=${PYTHON2:-}
if [ -z "$py" ] && command -v pyenv >/dev/null; then
    v=$(pyenv versions --bare 2>/dev/null | grep -E '^2\.7(\.[0-9]+)?$' | sort -V | tail -1 || true)
    [ -n "$v" ] && py=$(PYENV_VERSION=$v pyenv which python2 2>/dev/null || true)
fi
for cand in python2 python2.7; do
    [ -n "$py" ] || py=$(command -v "$cand" || true)
done
if [ -z "$py" ] || ! "$py" -c 'import sys; sys.exit(sys.version_info[0] != 2)' 2>/dev/null; then
    echo "$0: waf 1.7 (ns-3.17) needs Python 2.7 and none was found; install one (pyenv install 2.7.18, or" \
         "apt-get install python2) or point PYTHON2 at it" >&2
    exit 1
fi
command -v g++ >/dev/null || { echo "$0: g++ not found (apt-get install -y g++)" >&2; exit 1; }

sw=$tree/src/point-to-point/model/switch-node.cc
if ! grep -q 'tensorfabric: first packet egress' "$sw"; then
    anchor='^\tint idx = GetOutDev(p, ch);$'
    grep -q "$anchor" "$sw" || { echo "$0: switch-node.cc has no ECMP choice line to log" >&2; exit 1; }
    sed -i -e "s|$anchor|&\n\tif (idx >= 0 \&\& ch.l3Prot == 0x11 \&\& ch.udp.seq == 0) printf(\"PATH %08x %08x %u %u %u %d\\\\n\", ch.sip, ch.dip, ch.udp.sport, ch.udp.dport, GetId(), idx); /* tensorfabric: first packet egress per switch */|" \
           -e 's|^#include <cmath>$|&\n#include <cstdio>|' "$sw"
fi

cd "$tree"
# Configure once; delete BUILD_DIR/simulation/build to configure again.
if [ ! -f build/c4che/_cache.py ]; then
    CXXFLAGS="$flags" "$py" ./waf configure --build-profile=optimized --disable-examples --disable-tests \
        --disable-python --enable-modules=point-to-point,internet,applications,network,core \
        >"$build/configure.log" 2>&1 || { tail -20 "$build/configure.log" >&2; exit 1; }
fi
"$py" ./waf build -j"$jobs" >"$build/build.log" 2>&1 || { grep -m5 -B2 -A5 'error' "$build/build.log" >&2; exit 1; }
bin=$tree/build/scratch/third
[ -x "$bin" ] || { echo "$0: build finished but $bin is missing" >&2; exit 1; }
echo "$bin"
