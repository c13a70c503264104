#!/usr/bin/env bash
# bench/copy.sh — figures for the copy engine (issue 5), side by side in one run,
# medians of N runs (default 5):
#   1. one 1 GiB file, warm cache and after drop_caches: ckpt cp vs rsync -a vs cp -a
#   2. the reference workspace on the scratch filesystem (ext4 here):
#      ckpt cp, ckpt fork vs cp -a vs rsync -a
#   3. the same on a loop-mounted xfs with reflink (root only; skipped otherwise)
#   4. a 1 GiB file with a 4 KiB in-place edit: bytes the second save stores
#   5. the durability floor of a first save: cp -a of the corpus + sync
#      (what making the same bytes durable costs without ckpt) vs ckpt's first save
#
# Usage: bench/copy.sh [--runs N] [--corpus DIR] [--scratch DIR] [--ckpt PATH] [--only 1,2,3,4,5]
# Every timed run starts from a clean destination and a `sync` (untimed). Drop-cache
# runs need root (echo 3 > /proc/sys/vm/drop_caches); without it they are skipped.
set -euo pipefail

RUNS=5
SCRATCH=${BENCH_SCRATCH:-/work/bench-scratch-copy}
HERE=$(cd "$(dirname "$0")" && pwd)
ONLY=1,2,3,4,5
EXTRA_OPT=--only EXTRA_VAR=ONLY
. "$HERE/common.sh" "$@"
want() { [[ ",$ONLY," == *",$1,"* ]]; }
export HOME=$SCRATCH XDG_DATA_HOME=$SCRATCH/xdg
CLEANUP=() # deleted at the very end (see tree_bench)

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# time_cmd LABEL PREP CMD: runs PREP (untimed) then CMD, RUNS times; prints "LABEL median_ms".
time_cmd() {
  local label=$1 prep=$2 cmd=$3 i t0 t1
  local samples=()
  for ((i = 0; i < RUNS; i++)); do
    eval "$prep"
    t0=$(now_ns); eval "$cmd" >/dev/null; t1=$(now_ns)
    samples+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%-34s %8s ms   (runs: %s)\n' "$label" "$(printf '%s\n' "${samples[@]}" | median)" "${samples[*]}"
}

if want 1; then
  echo "## 1. one 1 GiB file ($SCRATCH, $(df -T "$SCRATCH" | awk 'NR==2{print $2}'))"
  BIG=$SCRATCH/big.bin
  [ -f "$BIG" ] || head -c $((1 << 30)) /dev/urandom > "$BIG"
  for cache in warm cold; do
    if [ $cache = cold ] && [ $ROOT = no ]; then echo "(cold: SKIPPED, not root)"; continue; fi
    prep="rm -f $SCRATCH/big.out; sync"
    [ $cache = cold ] && prep="$prep; drop_caches"
    [ $cache = warm ] && prep="$prep; cat $BIG > /dev/null"
    time_cmd "$cache: ckpt cp" "$prep" "$CKPT cp $BIG $SCRATCH/big.out"
    time_cmd "$cache: ckpt cp --strategy userspace" "$prep" "$CKPT cp --strategy userspace $BIG $SCRATCH/big.out"
    time_cmd "$cache: rsync -a" "$prep" "rsync -a $BIG $SCRATCH/big.out"
    time_cmd "$cache: cp -a" "$prep" "cp -a $BIG $SCRATCH/big.out"
  done
  rm -f "$SCRATCH/big.out"
fi

# tree_bench DIR-ON-TARGET-FS LABEL: every timed run copies into a destination of its own.
# On ext4 the destinations are kept until all runs are done: this machine's ext4 has no
# journal, and then inode allocation steps over every inode freed in the last 60-360 s one
# by one, so deleting the previous run's 36k files just before a run inflates it (by up
# to 2x, for whichever tool runs next); they are deleted when the whole script ends
# (CLEANUP), not between sections either. Elsewhere (the 3 GiB xfs image has room for one
# copy only) each run's destination is removed before the next.
tree_bench() {
  local base=$1 label=$2 keep=no
  [ "$(df -T "$base" | awk 'NR==2{print $2}')" = ext4 ] && keep=yes
  echo "## $label: reference workspace ($(du -sh "$CORPUS" | cut -f1), $(find "$CORPUS" | wc -l) entries)"
  rm -rf "$base/ws" "$base/store" "$base"/out.* && cp -a "$CORPUS" "$base/ws"
  "$CKPT" init "$base/ws" --store "$base/store" -q
  "$CKPT" -C "$base/ws" save -q -m bench >/dev/null
  local prep="sync"
  [ $keep = no ] && prep="rm -rf $base/out.*; sync"
  # \$i (the run number inside time_cmd) names each run's destination.
  time_cmd "$label: ckpt cp" "$prep" "$CKPT cp $base/ws $base/out.cp.\$i"
  time_cmd "$label: ckpt fork" "$prep" "$CKPT -C $base/ws fork HEAD $base/out.fork.\$i --store $base/out.fork-store.\$i"
  time_cmd "$label: cp -a" "$prep" "cp -a $base/ws $base/out.cpa.\$i"
  time_cmd "$label: rsync -a" "$prep" "rsync -a $base/ws/ $base/out.rsync.\$i"
  if [ $keep = yes ]; then
    CLEANUP+=("$base"/out.* "$base/ws" "$base/store")
  else
    rm -rf "$base"/out.* "$base/ws" "$base/store"
  fi
}

want 2 && tree_bench "$SCRATCH" "$(df -T "$SCRATCH" | awk 'NR==2{print $2}')"

if want 3; then
  if [ $ROOT = yes ] && command -v mkfs.xfs >/dev/null; then
    IMG=$SCRATCH/xfs.img MNT=$SCRATCH/xfs
    mkdir -p "$MNT"; truncate -s 3G "$IMG"; mkfs.xfs -q -f -m reflink=1 "$IMG"
    mount -o loop "$IMG" "$MNT"
    trap 'umount "$MNT" 2>/dev/null || umount -l "$MNT"; rm -f "$IMG"' EXIT
    tree_bench "$MNT" "xfs (loop, reflink)"
  else
    echo "## xfs: SKIPPED (needs root and mkfs.xfs)"
  fi
fi

if want 4; then
  echo "## 4. 1 GiB file, 4 KiB in-place edit: bytes stored by the second save"
  W=$SCRATCH/edit
  rm -rf "$W" "$W-store"; mkdir -p "$W"
  head -c $((1 << 30)) /dev/urandom > "$W/db.bin"
  "$CKPT" init "$W" --store "$W-store" -q
  "$CKPT" -C "$W" save -q -m one >/dev/null
  before=$(du -sb "$W-store/objects" | cut -f1)
  head -c 4096 /dev/urandom | dd of="$W/db.bin" bs=4096 seek=1000 conv=notrunc status=none
  "$CKPT" -C "$W" save -q -m two >/dev/null
  after=$(du -sb "$W-store/objects" | cut -f1)
  echo "second save stored $(( (after - before) / 1048576 )) MiB (goal ≤ 8 MiB)"
  rm -rf "$W" "$W-store"
fi

if want 5; then
  echo "## 5. first save vs the durability floor (same bytes, cp -a + sync)"
  base=$SCRATCH/first
  mkdir -p "$base"; rm -rf "$base"/*; cp -a "$CORPUS" "$base/ws"
  # Each run writes somewhere new and nothing is deleted until the end (see tree_bench).
  prep="rm -f $base/ws/.ckpt; sync"
  time_cmd "floor: cp -a + sync" "$prep" "cp -a $base/ws $base/floor.cpa.\$i && sync"
  time_cmd "floor: ckpt cp + sync" "$prep" "$CKPT cp $base/ws $base/floor.cp.\$i && sync"
  time_cmd "ckpt init + first save" "$prep" "$CKPT init $base/ws --store $base/store.\$i -q && $CKPT -C $base/ws save -q -m first"
  CLEANUP+=("$base")
fi

if [ ${#CLEANUP[@]} -gt 0 ]; then
  echo "(removing the kept destinations)"
  rm -rf "${CLEANUP[@]}"
fi
