#!/usr/bin/env bash
# ckpt at scale: 1x, 10x (and with --25x, 25x) replicas of the reference workspace, one run.
#
# Usage: bench/scale.sh [--25x] [--sizes 1,10] [--runs N] [--fair-rounds N] [--scratch DIR]
#                       [--ckpt PATH] [--stat-floor PATH] [--keep] ...
# Builds what is missing (`cargo build --release -p ckpt-cli` and the stat_floor example,
# into $CARGO_TARGET_DIR or target/), then runs scale.py. Results: stdout (markdown) and
# bench/results/scale.json. See bench/README.md, "Scale".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
command -v python3 >/dev/null || { echo "bench: python3 (>= 3.11) is required" >&2; exit 1; }
rel=$(python3 "$here/scale.py" --print-release-dir)
custom_ckpt=0 custom_floor=0
for a in "$@"; do
  case "$a" in
    --ckpt|--ckpt=*) custom_ckpt=1 ;;
    --stat-floor|--stat-floor=*) custom_floor=1 ;;
    -h|--help) exec python3 "$here/scale.py" --help ;;
  esac
done
if [ "$custom_ckpt" = 0 ] && [ ! -x "$rel/ckpt" ]; then
  echo "bench: $rel/ckpt missing; cargo build --release -p ckpt-cli" >&2
  (cd "$repo" && cargo build --release -p ckpt-cli)
fi
if [ "$custom_floor" = 0 ] && { [ ! -x "$rel/examples/stat_floor" ] || [ ! -x "$rel/examples/watch_floor" ]; }; then
  echo "bench: $rel/examples/{stat,watch}_floor missing; cargo build --release -p ckpt-lib --example stat_floor --example watch_floor" >&2
  (cd "$repo" && cargo build --release -p ckpt-lib --example stat_floor --example watch_floor)
fi
exec python3 "$here/scale.py" --command-line "bench/scale.sh $*" "$@"
