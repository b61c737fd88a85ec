#!/usr/bin/env bash
# goreleaser.sh ARGS… runs goreleaser, pinned as a Go tool in a module of
# its own (internal/tools/go.mod: its few hundred dependencies stay out of
# the orchestrator's go.mod), with $GO (default go). The first run builds it.
#
# goreleaser reads the commit, its date and the tags from git, but takes
# none of them when the checkout has no remote (`git ls-remote --get-url`
# fails: a copy made with git init, a bare local clone's worktree): a
# snapshot then says "commit none". Such a checkout gets the project's URL
# as origin's, for goreleaser only (GIT_CONFIG_*, nothing is written).
set -euo pipefail
go=${GO:-go}
cd "$(dirname "$0")/.."
if [ -z "$(git remote 2>/dev/null)" ] && [ -z "${GIT_CONFIG_COUNT:-}" ]; then
	export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url \
		GIT_CONFIG_VALUE_0=https://github.com/orchestrator-dev/orchestrator.git
fi
exec "$go" tool -modfile=internal/tools/go.mod goreleaser "$@"
