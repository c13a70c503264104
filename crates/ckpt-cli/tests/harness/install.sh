#!/usr/bin/env bash
# Installs the real agent-harness CLIs pinned in package.json and
# package-lock.json (this folder: the one place their versions are written)
# into TARGETDIR (e.g. target/harness-clis), never globally. The end-to-end
# tests (crates/ckpt-cli/tests/harnesses.rs) find them in
# TARGETDIR/node_modules/.bin. Does nothing when TARGETDIR was last installed
# from exactly this lock file.
#
# `npm install` with the lock, not `npm ci`: npm ci rejects a lock that lists
# other platforms' optional packages without resolving them. Install scripts
# are off (no node-gyp builds); the two that matter run by hand: Claude Code's
# and opencode's copy their platform's native binary over a placeholder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:?usage: install.sh TARGETDIR}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
stamp="$dest/.installed-lock.json"
if cmp -s "$here/package-lock.json" "$stamp" && [ -d "$dest/node_modules/.bin" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "install.sh: npm not found (apt-get install npm)" >&2; exit 1; }
rm -f "$stamp"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"
npm install --ignore-scripts --no-audit --no-fund --loglevel=error
(cd node_modules/@anthropic-ai/claude-code && node install.cjs)
(cd node_modules/opencode-ai && node postinstall.mjs)
for b in claude codex gemini opencode copilot; do
  "node_modules/.bin/$b" --version >/dev/null
done
cp "$here/package-lock.json" "$stamp"
