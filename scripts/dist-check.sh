#!/usr/bin/env bash
# dist-check.sh checks the release setup (make dist-check,
# part of make test):
#   1. goreleaser check accepts .goreleaser.yaml;
#   2. a goreleaser snapshot of this machine's platform, built with
#      GOFLAGS=-buildvcs=false, prints this commit and its date in
#      `version --json`, and so does `make build`.
# goreleaser is the Go tool pinned in internal/tools/go.mod
# (scripts/goreleaser.sh): the first run fetches it through the Go module
# proxy (GOPROXY) and builds it, which takes minutes. $GO is go's command.
# dist/ (make dist) is left alone: the snapshot goes to a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
goreleaser() { GO=$go bash scripts/goreleaser.sh "$@"; }
fail() { echo "dist-check: $*" >&2; exit 1; }

command -v git >/dev/null || fail "git is needed: the version is stamped from the commit"
rev=$(git rev-parse --verify -q HEAD) || fail "not a git checkout with a commit: run it in a clone of the repository"
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD)
modified=false
if [ -n "$(git status --porcelain)" ]; then modified=true; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "dist-check: goreleaser check"
# The tool is built (or taken from the build cache) first, so that a failed
# download or build says so, not "the config is invalid".
goreleaser --version >"$tmp/goreleaser-version" 2>&1 ||
	fail "could not build or run goreleaser (scripts/goreleaser.sh); it is fetched from the Go module proxy (or GOPROXY) on first use:
$(cat "$tmp/goreleaser-version")"
goreleaser check || fail ".goreleaser.yaml has errors or deprecated settings (above)"

# checkVersion NAME BINARY: the binary's version --json names this commit,
# its date and whether the checkout had local changes.
checkVersion() {
	local name=$1 bin=$2 out line
	out=$("$bin" version --json) || fail "$name: $bin version --json failed"
	out=$(tr -d ' \n' <<<"$out")
	line=$("$bin" version)
	echo "dist-check: $name: $line"
	for want in "\"commit\":\"${rev:0:12}\"" "\"date\":\"$date\"" $checkModified; do
		[[ $out == *"$want"* ]] || fail "$name: version --json = $out; want $want (built with GOFLAGS=-buildvcs=false)"
	done
	[[ $out =~ \"version\":\"v[0-9] ]] || fail "$name: version --json = $out; want a version v…"
}

echo "dist-check: goreleaser snapshot of $("$go" env GOOS)/$("$go" env GOARCH) with GOFLAGS=-buildvcs=false"
grep -q '^dist:' .goreleaser.yaml && fail ".goreleaser.yaml sets dist:, which this check overrides: drop it (dist/ is the default)"
# The same configuration with a temporary dist folder, so that make dist's
# output stays.
{ cat .goreleaser.yaml; printf '\ndist: %s\n' "$tmp/dist"; } >"$tmp/goreleaser.yaml"
GOFLAGS=-buildvcs=false goreleaser build --snapshot --clean --single-target -f "$tmp/goreleaser.yaml" ||
	fail "goreleaser build --snapshot --single-target failed (above)"
bin=$(find "$tmp/dist" -type f \( -name orchestrator -o -name orchestrator.exe \) | head -n 1)
[ -n "$bin" ] || fail "goreleaser built no orchestrator binary under $tmp/dist"
# goreleaser's snapshot of a commit without a tag does not see local
# changes (IsGitDirty is false), so "modified" is checked on make build's only.
checkModified= checkVersion "goreleaser snapshot" "$bin"

echo "dist-check: make build with GOFLAGS=-buildvcs=false"
GOFLAGS=-buildvcs=false make --no-print-directory build BIN="$tmp/make-build/orchestrator" GO="$go" >/dev/null
checkModified="\"modified\":$modified" checkVersion "make build" "$tmp/make-build/orchestrator"
echo "dist-check: ok"
