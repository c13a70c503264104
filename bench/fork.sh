#!/usr/bin/env bash
# bench/fork.sh — forks of the reference workspace (issue 22), per filesystem, side by
# side in one run, medians of N runs (default 3):
#   - the parent's save after a 1-file edit (the reference for the next line)
#   - a fork's first save after a 1-file edit
#   - one fork (`ckpt fork HEAD DIR`), 8 forks (`ckpt fork HEAD --count 8 PREFIX`)
#   - on btrfs, the rows again with the parent's `ckpt watch` running (saved just before), the
#     fork's first save both right away and once the watcher has warmed the fork
#   - disk used by a fresh fork (filesystem "used" before/after, after sync)
#   - adopt (`ckpt adopt DIR` of a fork with a 1-file edit saved)
#   - as root, overlay forks: the first (which writes the shared lower), one more, and
#     a fork's first save after a 1-file edit
#   - baseline: `git worktree add` + `cp -a node_modules` (the corpus as a git repo
#     without node_modules), one and 8
# Filesystems: a loop btrfs and a loop xfs (root only; skipped otherwise) and the
# scratch directory's own filesystem.
#
# On the loop btrfs the workspace is made a subvolume first (`ckpt init --subvolume`), so
# forks use the btrfs-subvolume backend; on xfs reflink; on the scratch ext4 copy. With
# FLOOR=path/to/clone_floor (cargo build --release -p ckpt-fs --example clone_floor),
# the xfs section also reports the kernel floor (create + FICLONE of the same files)
# the floor of a fork with a store of its own (+ a hard link per store object and
# a syncfs) and the floor of an exact fork (+ every mtime set), alternated with as many
# more forks, and one fork ÷ each floor. With STAT_FLOOR=path/to/stat_floor (cargo build --release -p ckpt-lib
# --example stat_floor), the btrfs section reports the floor of a subvolume fork's scan:
# the first lstat of every entry of a fresh snapshot (2 threads; btrfs reads each inode
# then), and one fork ÷ that floor. Loop images are 4 GiB, one at a time, deleted after.
#
# Usage: bench/fork.sh [--runs N] [--corpus DIR] [--scratch DIR] [--ckpt PATH] [--fs btrfs,xfs,scratch]
set -euo pipefail

RUNS=3
SCRATCH=${BENCH_SCRATCH:-/work/bench-scratch-fork}
HERE=$(cd "$(dirname "$0")" && pwd)
FSS=btrfs,xfs,scratch
EXTRA_OPT=--fs EXTRA_VAR=FSS
. "$HERE/common.sh" "$@"
# The kernel floor of a reflink fork: create + FICLONE of every file only
# (crates/ckpt-fs/examples/clone_floor.rs), when built.
FLOOR=${FLOOR:-}
# With FLOOR_ONLY=1 the xfs section stops after the floor rows; PAUSE: seconds
# of quiet before each alternated run (default 5).
FLOOR_ONLY=${FLOOR_ONLY:-}
PAUSE=${PAUSE:-5}
STAT_FLOOR=${STAT_FLOOR:-}
# SUBVOL_FLOOR=path/to/subvol_floor (cargo build --release -p ckpt-lib --example
# subvol_floor): the btrfs section's watcher rows also report the kernel floor of
# one and of 8 subvolume forks, and each ratio.
SUBVOL_FLOOR=${SUBVOL_FLOOR:-}

# timed CMD...: prints elapsed ms (float).
timed() { local t0 t1; t0=$(now_ns); "$@" >/dev/null; t1=$(now_ns); awk -v d=$((t1 - t0)) 'BEGIN{printf "%.1f\n", d/1e6}'; }
report() { printf '%-44s %10s   (runs: %s)\n' "$1" "$(printf '%s\n' "${@:2}" | median 1)" "${*:2}"; }
used() { sync; df -B1 --output=used "$1" | tail -1; }
# settled: untimed, before each timed fork on btrfs, waits until the btrfs cleaner has
# deleted every subvolume removed so far (earlier rows' forks), so that no fork is timed
# while the cleaner works. The cleaner runs after a transaction commit, and a deletion
# alone may wait long for one (minutes, seen here), so a commit is asked for first.
settled() {
  if [ "$(stat -f -c %T "$base")" = btrfs ]; then
    btrfs filesystem sync "$base" >/dev/null
    btrfs subvolume sync "$base" >/dev/null
  fi
  sync
}

# The rows measured on each fork of bench_on, with and without a watcher
# (they read bench_on's base, ws and rel, and one_fork adds to its s and d).
one_fork() { # DIR: times `ckpt fork HEAD DIR` into s, the disk it used (KiB) into d
  # Not while the watcher walks the forks made before (it warms each after its fork).
  warmed; settled
  local u0; u0=$(used "$base")
  s+=($(cd "$ws" && timed "$CKPT" fork HEAD "$1"))
  d+=($(( ($(used "$base") - u0) / 1024 )))
}
warmed() { # waits (untimed) until the parent's watcher, if one runs, has warmed every fork (docs/FORK.md)
  local k st
  for ((k = 0; k < 1200; k++)); do
    st=$(cd "$ws" && "$CKPT" watch --status --json 2>/dev/null) || return 0
    grep -q '"warming": 0\|"running": false' <<<"$st" && return
    sleep 0.05
  done
}
first_saves() { # LABEL PREFIX: the first save of each fork $base/PREFIX$i after a 1-file edit
  local s=() i
  for ((i = 0; i < RUNS; i++)); do echo "// f$i" >> "$base/$2$i/$rel"; s+=($(cd "$base/$2$i" && timed "$CKPT" save -q)); done
  report "$1fork's first save after a 1-file edit" "${s[@]}"
}
adopts() { # LABEL PREFIX: `ckpt adopt` of each fork $base/PREFIX$i
  local s=() i
  for ((i = 0; i < RUNS; i++)); do s+=($(cd "$ws" && timed "$CKPT" adopt "$base/$2$i")); done
  report "$1adopt (a fork with a 1-file edit)" "${s[@]}"
}
remove_counts() { # PREFIX: removes the forks $base/PREFIX$i-1..8 of the --count 8 rows
  local i k
  for ((i = 0; i < RUNS; i++)); do
    for ((k = 1; k <= 8; k++)); do (cd "$ws" && "$CKPT" fork -q --remove "$base/$1$i-$k"); done
  done
}

bench_on() { # DIR LABEL
  local base=$1 label=$2 i s
  echo "## $label ($(df -T "$base" | awk 'NR==2{print $2}'))"
  export HOME=$base XDG_DATA_HOME=$base/xdg
  local ws=$base/ws
  rm -rf "$base"/* 2>/dev/null || true
  cp -a "$CORPUS" "$ws"
  "$CKPT" init --store "$base/store" "$ws" >/dev/null
  # On btrfs the workspace is made a subvolume, so forks are snapshots.
  [ "$label" = "loop btrfs" ] && "$CKPT" init --subvolume "$ws" >/dev/null
  (cd "$ws" && "$CKPT" save -q -m base >/dev/null)
  (cd "$ws" && "$CKPT" doctor | grep '^fork backend')
  local f=$ws/app/src/index.js
  [ -f "$f" ] || f=$(find "$ws/app" -type f -print -quit)
  local rel=${f#"$ws"/}

  s=(); for ((i = 0; i < RUNS; i++)); do echo "// p$i" >> "$f"; s+=($(cd "$ws" && timed "$CKPT" save -q)); done
  report "parent save after a 1-file edit" "${s[@]}"

  s=(); local d=(); for ((i = 0; i < RUNS; i++)); do one_fork "$base/f$i"; done
  report "one fork" "${s[@]}"
  report "disk used by a fresh fork (KiB)" "${d[@]}"
  if [ -n "$FLOOR" ] && [ "$label" = "loop xfs" ]; then
    # One more fork and the floor, alternated, each after a `sync` and a
    # pause; nothing is deleted until all are done (xfs inactivates deleted
    # inodes in the background, which would slow whatever runs next).
    # The second floor adds what a fork with a store of its own cannot skip:
    # a hard link per object of the store, then a syncfs (clone_floor's doc).
    # The third also sets every file's and directory's mtime, as a fork
    # must for its files to be exact (clone_floor --times).
    local fl=() fo=() fs=() ft=()
    for ((i = 0; i < RUNS; i++)); do
      sync; sleep "$PAUSE"
      fo+=($(cd "$ws" && timed "$CKPT" fork HEAD "$base/alt$i"))
      sync; sleep "$PAUSE"
      fl+=($("$FLOOR" "$ws" "$base/floor$i" | awk '{print $6}'))
      sync; sleep "$PAUSE"
      fs+=($("$FLOOR" "$ws" "$base/sfloor$i" --own-store "$base/store/objects" | awk '{print $10}'))
      sync; sleep "$PAUSE"
      ft+=($("$FLOOR" "$ws" "$base/tfloor$i" --own-store "$base/store/objects" --times | awk '{print $10}'))
    done
    ratio() { awk -v a="$(printf '%s\n' "${fo[@]}" | median 1)" -v b="$(printf '%s\n' "$@" | median 1)" \
      'BEGIN{printf "%.2f\n", a/b}'; }
    report "one fork, alternated with the floors" "${fo[@]}"
    report "kernel floor: create + FICLONE only" "${fl[@]}"
    report "floor with own store: + links, syncfs" "${fs[@]}"
    report "exact-fork floor: + mtimes" "${ft[@]}"
    printf '%-44s %10s\n' "one fork / kernel floor" "$(ratio "${fl[@]}")" \
      "one fork / floor with own store" "$(ratio "${fs[@]}")" \
      "one fork / exact-fork floor" "$(ratio "${ft[@]}")"
    for ((i = 0; i < RUNS; i++)); do
      (cd "$ws" && "$CKPT" fork -q --remove "$base/alt$i")
      rm -rf "$base/floor$i" "$base/sfloor$i" "$base/sfloor$i.objects" "$base/tfloor$i" "$base/tfloor$i.objects"
    done
    if [ -n "$FLOOR_ONLY" ]; then echo; return; fi
  fi

  if [ -n "$STAT_FLOOR" ] && [ "$label" = "loop btrfs" ]; then
    # A fork's scan is the first lstat of every inode of a fresh snapshot:
    # its floor is stat_floor's first round on one (btrfs reads each inode).
    local sf=() k
    for ((k = 0; k < RUNS; k++)); do
      btrfs subvolume snapshot "$ws" "$base/floorsnap" >/dev/null
      sf+=($("$STAT_FLOOR" "$base/floorsnap" 2 | awk '/^first round/{print $(NF-1)}'))
      btrfs subvolume delete "$base/floorsnap" >/dev/null
    done
    report "floor: first lstat of a fresh snapshot (2 thr)" "${sf[@]}"
    awk -v a="$(printf '%s\n' "${s[@]}" | median 1)" -v b="$(printf '%s\n' "${sf[@]}" | median 1)" \
      'BEGIN{printf "%-44s %10.2f\n", "one fork / that floor", a/b}'
  fi

  first_saves "" f
  adopts "" f

  s=(); for ((i = 0; i < RUNS; i++)); do settled; s+=($(cd "$ws" && timed "$CKPT" fork HEAD --count 8 "$base/g$i-")); done
  report "8 forks (--count 8)" "${s[@]}"
  remove_counts g

  if [ "$label" = "loop btrfs" ]; then
    # The same rows with the parent's watcher running (`ckpt watch --daemon`
    # returns once its initial walk is done): a subvolume fork asks it what
    # changed since the index instead of scanning the snapshot.
    (cd "$ws" && "$CKPT" watch --daemon -q)
    # The first save through a new watcher records its position with the index.
    echo "// w" >> "$f"; (cd "$ws" && "$CKPT" save -q >/dev/null)
    local ps=(); s=(); d=(); local fa=() fw=()
    for ((i = 0; i < RUNS; i++)); do
      echo "// w$i" >> "$f"; ps+=($(cd "$ws" && timed "$CKPT" save -q))
      one_fork "$base/wf$i"
      # Its first save right away, while the watcher warms it (walks it).
      echo "// f$i" >> "$base/wf$i/$rel"; fa+=($(cd "$base/wf$i" && timed "$CKPT" save -q))
    done
    report "watcher: parent save after a 1-file edit" "${ps[@]}"
    report "watcher: one fork" "${s[@]}"
    local one1; one1=$(printf '%s\n' "${s[@]}" | median 1)
    report "watcher: disk used by a fresh fork (KiB)" "${d[@]}"
    report "watcher: fork's first save right away" "${fa[@]}"
    # The same once the watcher's walk of the fork has ended (untimed wait).
    for ((i = 0; i < RUNS; i++)); do
      settled; (cd "$ws" && "$CKPT" fork -q HEAD "$base/wh$i"); warmed
      echo "// h$i" >> "$base/wh$i/$rel"; fw+=($(cd "$base/wh$i" && timed "$CKPT" save -q))
    done
    report "watcher: fork's first save once warmed" "${fw[@]}"
    adopts "watcher: " wf
    s=(); for ((i = 0; i < RUNS; i++)); do
      echo "// v$i" >> "$f"; (cd "$ws" && "$CKPT" save -q >/dev/null)
      warmed; settled
      s+=($(cd "$ws" && timed "$CKPT" fork HEAD --count 8 "$base/wg$i-"))
    done
    report "watcher: 8 forks (--count 8)" "${s[@]}"
    if [ -n "$SUBVOL_FLOOR" ]; then
      # The kernel floor of a subvolume fork: its two snapshots, the rename
      # and the fsync only (examples/subvol_floor.rs), 1 and 8 at once; with
      # --own-store each also makes its store snapshot its own (the
      # watcher's files removed, one catalog page rewritten, one fdatasync).
      floor() { "$SUBVOL_FLOOR" "$ws" "$base/store" "$base/floorfork" "$RUNS" "$@" | awk '/^median/{print $2}'; }
      # row LABEL FORK_MS FLOOR_MS: the floor, then the fork (through the watcher) ÷ it.
      row() { printf '%-44s %10s\n' "kernel floor$1" "$3"; awk -v a="$2" -v b="$3" -v l="watcher ratio$1" 'BEGIN{printf "%-44s %10.2f\n", l, a/b}'; }
      local one8; one8=$(printf '%s\n' "${s[@]}" | median 1)
      row ": one fork" "$one1" "$(floor 1)"
      row ": 8 forks at once" "$one8" "$(floor 8)"
      row " with its own store: one fork" "$one1" "$(floor 1 --own-store)"
      row " with its own store: 8 forks" "$one8" "$(floor 8 --own-store)"
    fi
    (cd "$ws" && "$CKPT" watch --stop -q)
    for ((i = 0; i < RUNS; i++)); do (cd "$ws" && "$CKPT" fork -q --remove "$base/wf$i" && "$CKPT" fork -q --remove "$base/wh$i"); done
    remove_counts wg
  fi

  if [ "$ROOT" = yes ]; then
    # Overlay forks (root): a mount over the checkpoint's lower, which the
    # first overlay fork of a checkpoint writes (reported apart).
    s=($(cd "$ws" && timed "$CKPT" fork HEAD "$base/ov-first" --backend overlay))
    report "overlay: first fork (writes the lower)" "${s[@]}"
    s=(); for ((i = 0; i < RUNS; i++)); do s+=($(cd "$ws" && timed "$CKPT" fork HEAD "$base/ov$i" --backend overlay)); done
    report "overlay: one fork (lower shared)" "${s[@]}"
    s=(); for ((i = 0; i < RUNS; i++)); do echo "// o$i" >> "$base/ov$i/$rel"; s+=($(cd "$base/ov$i" && timed "$CKPT" save -q)); done
    report "overlay: fork's first save after a 1-file edit" "${s[@]}"
    for ((i = 0; i < RUNS; i++)); do (cd "$ws" && "$CKPT" fork -q --remove "$base/ov$i"); done
    (cd "$ws" && "$CKPT" fork -q --remove "$base/ov-first")
  fi

  # Baseline: git worktree add + cp -a node_modules.
  local repo=$base/repo
  cp -a "$CORPUS" "$repo"
  (cd "$repo" && git init -q && echo node_modules > .gitignore && git add -A && git -c user.email=b@b -c user.name=b commit -qm base)
  s=(); for ((i = 0; i < RUNS; i++)); do
    s+=($(timed bash -c "cd '$repo' && git worktree add -q '$base/w$i' && cp -a node_modules '$base/w$i/'"))
    rm -rf "$base/w$i"; (cd "$repo" && git worktree prune)
  done
  report "baseline: git worktree add + cp -a node_modules" "${s[@]}"
  s=(); for ((i = 0; i < RUNS; i++)); do
    s+=($(timed bash -c "cd '$repo' && for k in 1 2 3 4 5 6 7 8; do git worktree add -q '$base/x$i-'\$k && cp -a node_modules '$base/x$i-'\$k/; done"))
    rm -rf "$base/x$i-"*; (cd "$repo" && git worktree prune)
  done
  report "baseline x8" "${s[@]}"
  echo
}

loop_fs() { # TYPE SIZE_MIB: mounts a loop image of TYPE at $SCRATCH/mnt-TYPE
  local t=$1 mnt=$SCRATCH/mnt-$1 img=$SCRATCH/$1.img
  mountpoint -q "$mnt" && umount "$mnt"
  rm -f "$img"; truncate -s "$2M" "$img"; mkdir -p "$mnt"
  if [ "$t" = xfs ]; then mkfs.xfs -q -m reflink=1 "$img"; else mkfs.btrfs -q "$img"; fi
  mount -o loop "$img" "$mnt"
}

echo "ckpt: $CKPT ($("$CKPT" --version 2>/dev/null || true)); corpus: $CORPUS ($(find "$CORPUS" -type f | wc -l) files); load: $(cut -d' ' -f1-3 /proc/loadavg)"
trap 'echo "load at the end: $(cut -d" " -f1-3 /proc/loadavg)"' EXIT
for fs in ${FSS//,/ }; do
  case $fs in
    btrfs|xfs)
      if [ $ROOT = no ]; then echo "## $fs: SKIPPED (needs root for a loop mount)"; continue; fi
      loop_fs "$fs" 4096
      bench_on "$SCRATCH/mnt-$fs" "loop $fs"
      umount "$SCRATCH/mnt-$fs"; rm -f "$SCRATCH/$fs.img" ;;
    scratch)
      mkdir -p "$SCRATCH/plain"; bench_on "$SCRATCH/plain" "scratch"; rm -rf "$SCRATCH/plain" ;;
  esac
done
