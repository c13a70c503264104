#!/usr/bin/env bash
# ckpt benchmark harness: ckpt vs git vs rsync vs cp on the reference workspace.
#
# Usage: bench/run.sh [--runs N] [--corpus DIR] [--ckpt PATH] [--only TOOL,..] [--ops OP,..]
#                     [--scratch DIR] [--no-verify] [--verify-all] [--keep] [--keep-going]
# Defaults: 5 runs, corpus /work/corpus (built with bench/make-corpus.sh if absent),
# ckpt binary target/<host>/release/ckpt (built with `cargo build --release -p ckpt-cli` if absent;
# .cargo/config.toml builds for the host triple explicitly, see README "Two commands"),
# scratch $BENCH_SCRATCH or /work/bench-scratch. Results: stdout (markdown) and
# bench/results/latest.json. See bench/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
corpus=${BENCH_CORPUS:-/work/corpus}
command -v python3 >/dev/null || { echo "bench: python3 (>= 3.11) is required" >&2; exit 1; }
default_ckpt=$(python3 "$here/run.py" --print-default-ckpt)
ckpt=$default_ckpt
only="ckpt,git,rsync,cp"
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) corpus=$2; shift ;;
    --corpus=*) corpus=${1#*=} ;;
    --ckpt) ckpt=$2; shift ;;
    --ckpt=*) ckpt=${1#*=} ;;
    --only) only=$2; shift ;;
    --only=*) only=${1#*=} ;;
    -h|--help) exec python3 "$here/run.py" --help ;;
  esac
  shift
done
for t in git rsync cp diff; do
  command -v "$t" >/dev/null || { echo "bench: $t is required (apt-get install -y rsync git diffutils)" >&2; exit 1; }
done
if [ ! -d "$corpus" ]; then
  echo "bench: corpus $corpus missing; building it with bench/make-corpus.sh" >&2
  bash "$here/make-corpus.sh" "$corpus"
fi
if [[ ",$only," == *",ckpt,"* ]] && [ ! -x "$ckpt" ]; then
  if [ "$ckpt" = "$default_ckpt" ]; then
    echo "bench: $ckpt missing; cargo build --release -p ckpt-cli" >&2
    (cd "$repo" && cargo build --release -p ckpt-cli)
  else
    echo "bench: ckpt binary $ckpt not found" >&2; exit 1
  fi
fi
exec python3 "$here/run.py" --corpus "$corpus" --ckpt "$ckpt" \
  --command-line "bench/run.sh ${args[*]}" "${args[@]}"
