#!/usr/bin/env bash
# Build Broadcom's csg-htsim (packet-level reference for benchmarks/sim_vs_packet.py) from a local source
# snapshot, outside the repository. Not part of `make test`; no network access.
#
#   scripts/build-htsim.sh SNAPSHOT [BUILD_DIR]
#
# SNAPSHOT: a git directory (bare or not) of github.com/Broadcom/csg-htsim, or a plain source tree that has
# sim/Makefile. BUILD_DIR defaults to .cache/htsim (gitignored). Builds sim/libhtsim.a and
# sim/datacenter/htsim_roce; prints the binary's path on success. HTSIM_REV picks a commit (default HEAD).
set -euo pipefail

usage() { echo "usage: $0 SNAPSHOT [BUILD_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
src=$1
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/.cache/htsim}
rev=${HTSIM_REV:-HEAD}
jobs=${JOBS:-$(nproc)}

[ -e "$src" ] || { echo "$0: snapshot $src does not exist" >&2; exit 2; }
mkdir -p "$build"
tree=$build/src
if git --git-dir="$src" rev-parse --verify -q "$rev^{commit}" >/dev/null 2>&1 \
   || git -C "$src" rev-parse --verify -q "$rev^{commit}" >/dev/null 2>&1; then
    gitdir=$(git --git-dir="$src" rev-parse --absolute-git-dir 2>/dev/null || git -C "$src" rev-parse --absolute-git-dir)
    commit=$(git --git-dir="$gitdir" rev-parse "$rev^{commit}")
    if [ "$(cat "$build/commit" 2>/dev/null)" != "$commit" ]; then
        rm -rf "$tree" && mkdir -p "$tree"
        # Export only the sim/ subtree at that commit (other trees may be absent from a partial mirror); no network.
        git --git-dir="$gitdir" archive --prefix=sim/ "$commit:sim" | tar -x -C "$tree"
        echo "$commit" > "$build/commit"
    fi
elif [ -f "$src/sim/Makefile" ]; then
    rm -rf "$tree" && mkdir -p "$tree" && cp -a "$src/sim" "$tree/"
    echo "tree:$(cd "$src" && pwd)" > "$build/commit"
else
    echo "$0: $src is neither a git snapshot of csg-htsim nor a tree with sim/Makefile" >&2; exit 2
fi

command -v g++ >/dev/null || { echo "$0: g++ not found (apt-get install -y g++ make)" >&2; exit 1; }
# The library first, then only the RoCE binary (the other datacenter mains are not needed).
make -C "$tree/sim" -j"$jobs" libhtsim.a >"$build/make-lib.log" 2>&1 \
    || { tail -20 "$build/make-lib.log" >&2; exit 1; }
make -C "$tree/sim/datacenter" -j"$jobs" htsim_roce >"$build/make-roce.log" 2>&1 \
    || { tail -20 "$build/make-roce.log" >&2; exit 1; }
bin=$tree/sim/datacenter/htsim_roce
[ -x "$bin" ] || { echo "$0: build finished but $bin is missing" >&2; exit 1; }

# A second binary, htsim_roce_paths, logs which egress each flow's first packet took at every switch
# ("ECMP <flow id> <egress queue>"), so the fluid model can be fed the reference's own ECMP choices and
# compared flow by flow. One print added after the ECMP choice; the timed runs use the untouched binary.
dc=$tree/sim/datacenter
anchor='FibEntry\* e = (\*available_hops)\[ecmp_choice\];'
grep -q "$anchor" "$dc/fat_tree_switch.cpp" \
    || { echo "$0: fat_tree_switch.cpp has no ECMP choice line to log; path logging unavailable" >&2; exit 1; }
sed -e "s|$anchor|&\n        if (pkt.type() == ROCE \&\& ((RocePacket\&)pkt).seqno() == 1) cout << \"ECMP \" << pkt.flow_id() << \" \" << e->getEgressPort()->at(0)->nodename() << endl;|" \
    -e 's|#include "fat_tree_switch.h"|&\n#include "rocepacket.h"|' \
    "$dc/fat_tree_switch.cpp" > "$dc/fat_tree_switch_paths.cpp"
objs="main_roce.o firstfit.o vl2_topology.o fat_tree_topology.o bcube_topology.o connection_matrix.o
      oversubscribed_fat_tree_topology.o shortflows.o multihomed_fat_tree_topology.o star_topology.o"
(cd "$dc" && g++ -I"$dc/.." -I"$dc" -Wall -std=c++11 -O2 -c fat_tree_switch_paths.cpp \
    && g++ -O2 $objs fat_tree_switch_paths.o -L.. -lhtsim -o htsim_roce_paths) >"$build/make-paths.log" 2>&1 \
    || { tail -20 "$build/make-paths.log" >&2; exit 1; }
echo "$bin"
