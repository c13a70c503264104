#!/usr/bin/env bash
# Builds the reference workspace used by every benchmark: a Next.js-style app with its
# node_modules (about 36,000 files, 550+ MB), an app/ source tree and a git history.
#
# Usage: bench/make-corpus.sh DEST   (DEST must not exist; needs node/npm and the npm registry)
#
# The dependency set is pinned by bench/corpus/package-lock.json (the project's copy of
# ../shared/bench/corpus/, byte-identical). We try `npm ci` first (installs exactly what the
# lock file lists). With npm 11 the lock file is rejected by `npm ci` as "not in sync"
# because it lacks entries for the non-Linux optional bindings of @unrs/resolver-binding-*;
# we then fall back to `npm install`, which still resolves every package to the version the
# lock file pins (this is what the reference recipe used). The lock file in DEST may be
# rewritten by npm; the one in bench/corpus/ is never touched.
set -euo pipefail
dest=${1:?usage: make-corpus.sh DEST}
case "$dest" in /*) ;; *) dest="$PWD/$dest" ;; esac
here=$(cd "$(dirname "$0")" && pwd)
[ -e "$dest" ] && { echo "make-corpus: $dest already exists" >&2; exit 1; }
command -v npm >/dev/null || { echo "make-corpus: npm not found (install node/npm)" >&2; exit 1; }
command -v git >/dev/null || { echo "make-corpus: git not found" >&2; exit 1; }
tmp="$dest.partial.$$"
trap 'rm -rf "$tmp" "$tmp.npm-ci.log"' EXIT
mkdir -p "$tmp"
cp "$here/corpus/package.json" "$here/corpus/package-lock.json" "$tmp/"
cd "$tmp"
if ! npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>"$tmp.npm-ci.log"; then
  echo "make-corpus: npm ci refused the lock file ($(grep -m1 -o 'can only install.*in sync' "$tmp.npm-ci.log" || echo 'see log')); falling back to npm install (lock-pinned versions)" >&2
  rm -rf node_modules
  npm install --no-audit --no-fund --loglevel=error >/dev/null
fi
rm -f "$tmp.npm-ci.log"
mkdir -p app/src app/components app/styles
for i in $(seq 1 200); do
  printf 'export function f%d(x: number): number {\n  return x * %d;\n}\n' "$i" "$i" > "app/src/mod$i.ts"
done
for i in $(seq 1 60); do
  printf 'export default function C%d() {\n  return <div className="c%d">component %d</div>;\n}\n' "$i" "$i" "$i" > "app/components/C$i.tsx"
done
printf 'body { margin: 0; }\n' > app/styles/globals.css
git init -q
git add app package.json package-lock.json
git -c user.email=bench@example.invalid -c user.name=bench commit -qm "initial"
cd /
mv "$tmp" "$dest"
trap - EXIT
echo "corpus ready: $(find "$dest" -type f | wc -l) files, $(du -sm "$dest" | cut -f1) MB in $dest"
