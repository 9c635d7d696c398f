#!/bin/sh
# Installs the agent CLIs Corral runs inside sessions (Codex, Claude Code,
# OpenCode) from npm at the versions pinned in internal/driver/tools/
# (package.json and its package-lock.json) into TOOLS_DIR, default
# build/tools. Sessions see that directory read-only at /opt/corral/tools.
#
# Idempotent: a stamp of the pinned files is kept in TOOLS_DIR, and when it
# matches and the CLIs are in place nothing is done (no npm, no network).
#
# Layout of TOOLS_DIR (what internal/driver expects):
#   package.json, package-lock.json   the pins, as installed
#   node_modules/                     what npm installed
#   bin/codex, bin/claude, bin/opencode
#                                     relative links to each CLI's native
#                                     binary for this machine
#   path/rg                           ripgrep, on OpenCode's PATH: its grep
#                                     and glob tools need it and would fetch
#                                     it from github.com (the one shipped
#                                     with Codex, a static build)
#   opencode/config/opencode/         an empty OpenCode config directory
#                                     (XDG_CONFIG_HOME in sessions): being
#                                     read-only there, OpenCode skips its
#                                     background npm install of plugin typings
#   .corral-stamp                     the stamp
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
pins="$root/internal/driver/tools"
dir=${TOOLS_DIR:-"$root/build/tools"}
case "$dir" in
/*) ;;
*) dir="$(pwd)/$dir" ;;
esac
case "$dir" in
/ | "") echo "install-tools: refusing TOOLS_DIR=$dir" >&2; exit 1 ;;
esac
# It is replaced whole on a reinstall: never a directory this script did
# not make.
if [ -d "$dir" ] && [ ! -f "$dir/.corral-stamp" ] && [ -n "$(ls -A "$dir")" ]; then
	echo "install-tools: $dir holds files but no .corral-stamp: not a tools directory, refusing to replace it" >&2
	exit 1
fi

# The stamp covers the pins and the layout version of this script: a
# change to either reinstalls.
layout=3
stamp=$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum | cut -d' ' -f1)
stamp="layout=$layout sha256=$stamp"

installed() {
	[ -f "$1/.corral-stamp" ] && [ "$(cat "$1/.corral-stamp")" = "$stamp" ] || return 1
	for b in bin/codex bin/claude bin/opencode path/rg; do
		[ -x "$1/$b" ] || return 1
	done
}

if installed "$dir"; then
	echo "agent CLIs up to date in $dir"
	exit 0
fi

command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 || {
	echo "install-tools: Node.js and npm are required to install the agent CLIs (https://nodejs.org or apt-get install nodejs npm)" >&2
	exit 1
}

case "$(uname -m)" in
x86_64 | amd64) codex_pkg=codex-linux-x64 codex_triple=x86_64-unknown-linux-musl ;;
aarch64 | arm64) codex_pkg=codex-linux-arm64 codex_triple=aarch64-unknown-linux-musl ;;
*) echo "install-tools: no agent CLI builds for $(uname -m)" >&2; exit 1 ;;
esac

# Install next to the target and swap at the end, so a failed install
# never leaves a half-built tools directory behind.
mkdir -p "$(dirname "$dir")"
new="$dir.new.$$"
check_home="$new.home"
trap 'chmod -R u+w "$new" 2>/dev/null; rm -rf "$new" "$check_home"' EXIT
rm -rf "$new"
mkdir -p "$new"
cp "$pins/package.json" "$pins/package-lock.json" "$new/"

pinned=$(node -p "Object.entries(require('$pins/package.json').dependencies).map(([n, v]) => n + ' ' + v).join(', ')")
echo "installing the agent CLIs into $dir: $pinned from npm"
echo "  (once: about 1.1 GB on disk; progress below every 15 s)"
# What npm has put on disk so far, every 15 s, while it works: the first
# install takes minutes and npm itself says nothing until it is done.
(
	while sleep 15; do
		[ -d "$new" ] || exit 0
		echo "  ... $(du -sm "$new" 2>/dev/null | cut -f1) MB so far"
	done
) &
ticker=$!
trap 'kill $ticker 2>/dev/null; chmod -R u+w "$new" 2>/dev/null; rm -rf "$new" "$check_home"' EXIT
# npm install, not npm ci: npm writes into the lock only the OpenCode
# platform packages it could match here, and npm ci refuses a lock that
# lacks the others. install takes what the lock has (integrity checked)
# and the rest at the exact versions opencode-ai pins.
# --ignore-scripts: of the three, only Claude Code and OpenCode have an
# install script, and each only places the native binary of this platform
# over a stub; they are run below, by name, and nothing else is.
(cd "$new" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error)
(cd "$new/node_modules/@anthropic-ai/claude-code" && node install.cjs)
(cd "$new/node_modules/opencode-ai" && node postinstall.mjs)
kill $ticker 2>/dev/null || true
echo "  fetched: $(du -sm "$new" | cut -f1) MB"

mkdir -p "$new/bin"
ln -s "../node_modules/@openai/$codex_pkg/vendor/$codex_triple/bin/codex" "$new/bin/codex"
ln -s ../node_modules/@anthropic-ai/claude-code/bin/claude.exe "$new/bin/claude"
ln -s ../node_modules/opencode-ai/bin/opencode.exe "$new/bin/opencode"
mkdir -p "$new/path"
ln -s "../node_modules/@openai/$codex_pkg/vendor/$codex_triple/codex-path/rg" "$new/path/rg"
"$new/path/rg" --version >/dev/null || { echo "install-tools: the ripgrep shipped with Codex does not run" >&2; exit 1; }

mkdir -p "$new/opencode/config/opencode"
# OpenCode writes this file into its config directory when it is missing,
# and a read-only directory makes that write fatal: it is put here first.
printf 'node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore' >"$new/opencode/config/opencode/.gitignore"

# Each CLI must start and say its pinned version (with a throwaway HOME:
# they write their state there).
mkdir -p "$check_home"
check() {
	want=$(cd "$new" && node -p "require('./node_modules/$2/package.json').version")
	got=$(cd "$check_home" && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$check_home" \
		"$new/bin/$1" --version 2>&1 </dev/null) || {
		echo "install-tools: $1 --version failed: $got" >&2
		exit 1
	}
	case "$got" in
	*"$want"*) echo "  $1 $want" ;;
	*) echo "install-tools: $1 --version said \"$got\", want $want" >&2; exit 1 ;;
	esac
}
check codex @openai/codex
check claude @anthropic-ai/claude-code
check opencode opencode-ai

# Sessions run as another user: everything readable, nothing writable
# but by its owner; OpenCode's config directory not even by its owner, so
# an OpenCode started by that user outside a session skips its npm
# install there too.
chmod -R a+rX,go-w "$new"
chmod a-w "$new/opencode/config/opencode"
echo "$stamp" >"$new/.corral-stamp"

if [ -e "$dir" ]; then
	chmod -R u+w "$dir"
	rm -rf "$dir"
fi
mv "$new" "$dir"
trap - EXIT
kill $ticker 2>/dev/null || true
rm -rf "$check_home"
echo "agent CLIs installed in $dir"
