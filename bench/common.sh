# bench/common.sh — sourced by bench/copy.sh and bench/fork.sh: the options they
# share, the ckpt binary, and timing helpers.
#
# Before sourcing, a script sets RUNS and SCRATCH (its defaults) and, for one option
# of its own, EXTRA_OPT (e.g. --only) and EXTRA_VAR (the variable it sets); then
# `. "$HERE/common.sh" "$@"` parses: --runs N --corpus DIR --scratch DIR --ckpt PATH.
CORPUS=${BENCH_CORPUS:-/work/corpus}
CKPT=${CKPT:-$(python3 "$HERE/run.py" --print-default-ckpt)}
while [ $# -gt 0 ]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --corpus) CORPUS=$2; shift 2 ;;
    --scratch) SCRATCH=$2; shift 2 ;;
    --ckpt) CKPT=$2; shift 2 ;;
    *)
      if [ -n "${EXTRA_OPT:-}" ] && [ "$1" = "$EXTRA_OPT" ]; then
        printf -v "$EXTRA_VAR" '%s' "$2"; shift 2
      else
        echo "unknown option $1" >&2; exit 2
      fi ;;
  esac
done
[ -x "$CKPT" ] || (cd "$HERE/.." && cargo build --release -p ckpt-cli)
mkdir -p "$SCRATCH"
ROOT=$( [ "$(id -u)" = 0 ] && echo yes || echo no )

now_ns() { date +%s%N; }
# median [DIGITS]: the median of the numbers on stdin.
median() { sort -n | awk -v p="${1:-0}" '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.*f", p, m}'; }
