#!/usr/bin/env bash
# version-ldflags.sh prints the -ldflags `make build` links with: the
# version, the commit and the commit's date from git (cmd/orchestrator/main.go),
# so the binary names them also when go build records no VCS information
# (GOFLAGS=-buildvcs=false, a linked worktree). Outside a git checkout it
# prints nothing and the binary falls back to what go build recorded.
#
# The version is the tag v* at the commit, else a Go pseudo-version after
# the latest such tag (v0.0.0-20261126224044-0123456789ab with none), as go
# build would record it; "+dirty" and a "-dirty" commit when the checkout has
# local changes.
set -euo pipefail
rev=$(git rev-parse --verify -q HEAD 2>/dev/null) || exit 0
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ "$rev")
dirty=
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then dirty=1; fi
if tag=$(git describe --tags --exact-match --match 'v[0-9]*' "$rev" 2>/dev/null); then
	version=$tag
else
	stamp=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S "$rev")
	base=v0.0.0-
	if last=$(git describe --tags --abbrev=0 --match 'v[0-9]*' "$rev" 2>/dev/null) &&
		[[ $last =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]]; then
		base="v${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.$((BASH_REMATCH[3] + 1))-0."
	fi
	version=$base$stamp-${rev:0:12}
fi
commit=$rev
if [ -n "$dirty" ]; then
	version+=+dirty
	commit+=-dirty
fi
printf -- '-X main.version=%s -X main.commit=%s -X main.date=%s\n' "$version" "$commit" "$date"
