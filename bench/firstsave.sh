#!/usr/bin/env bash
# bench/firstsave.sh — A/B of a first save on the reference workspace: alternates the
# given ckpt binaries, each run into a fresh store at a new path, and prints the total
# and the trace of the capture and object-commit phases (CKPT_TRACE=1).
#
# Usage: ROUNDS=3 bench/firstsave.sh WORKSPACE_COPY BIN_A [BIN_B ...]
#
# Nothing is deleted until the end: on an ext4 without a journal (this machine's),
# inode allocation steps over inodes freed in the last 60-360 s one by one, so deleting
# the previous run's store just before a run would be measured too (see BENCHMARKS.md).
set -euo pipefail
ws=$(cd "$1" && pwd); shift
scratch=$(mktemp -d "$(dirname "$ws")/firstsave.XXXXXX")
i=0
for r in $(seq "${ROUNDS:-3}"); do
  for b in "$@"; do
    b=$(realpath "$b")
    i=$((i + 1)); st=$scratch/store-$i
    rm -f "$ws/.ckpt"; sync; sleep 5
    "$b" init --store "$st" "$ws" >/dev/null 2>&1
    out=$(cd "$ws" && CKPT_TRACE=1 "$b" save -m first 2>&1) || { echo "$b: save failed: $out" >&2; exit 1; }
    total=$(echo "$out" | sed -n 's/^saved.*(\(.*\))$/\1/p')
    phases=$(echo "$out" | grep -E 'trace: (scan|objects)' | tr -s ' ' | tr '\n' ' ' || true)
    echo "$b round $r: $total | $phases"
  done
done
rm -f "$ws/.ckpt"
rm -rf "$scratch"
