# The two commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO ?= go
CLAUDE_VERSION := 2.1.330
CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/orchestrator
CLAUDE_DIR := $(CACHE_DIR)/claude-code-$(CLAUDE_VERSION)
CLAUDE := $(CLAUDE_DIR)/node_modules/.bin/claude
BIN := bin/orchestrator
FUZZTIME ?= 10s

# Tests that need the real CLI find it here; `make test` installs it first.
export ORCHESTRATOR_TEST_CLAUDE := $(CLAUDE)

# Fuzz targets run briefly on every `make test`: package:Target.
FUZZ_TARGETS := \
	./executor:FuzzParseLine \
	./executor:FuzzReader \
	./specs:FuzzParse \
	./internal/fakeapi:FuzzParseRequest \
	./internal/config:FuzzParse \
	./internal/config:FuzzExpand \
	./questions:FuzzDetect \
	./questions:FuzzParseAnswer \
	./questions:FuzzPrintable \
	./surfaces/terminal:FuzzAskOutput \
	./surfaces/github:FuzzAnswerText \
	./surfaces/github:FuzzWebhook \
	./surfaces/github:FuzzRenderedQuestion \
	./surfaces/discord:FuzzParseCustomID \
	./internal/web:FuzzMarkdownIsInert \
	./surfaces:FuzzCutRemember \
	./internal/store:FuzzParseRemember

# goreleaser (release builds, .goreleaser.yaml) is pinned as a Go tool in a
# module of its own, internal/tools/go.mod: its few hundred dependencies stay
# out of the orchestrator's go.mod and go.sum. scripts/goreleaser.sh runs it.
GORELEASER := GO="$(GO)" bash scripts/goreleaser.sh

.PHONY: all build dist dist-check test vet fuzz bench demo claude chromium postgresql systemd sqlite3 image-test clean

all: build

# build stamps the version, the commit and its date from git
# (scripts/version-ldflags.sh), so `orchestrator version` names them also
# with GOFLAGS=-buildvcs=false.
build:
	$(GO) build -ldflags "$$(bash scripts/version-ldflags.sh)" -o $(BIN) ./cmd/orchestrator

# dist builds the release archives of every platform (.goreleaser.yaml)
# into dist/: a snapshot, named after the commit, that publishes nothing.
dist:
	$(GORELEASER) release --snapshot --clean
	@ls -l dist/*.tar.gz dist/*.zip dist/checksums.txt

# dist-check checks .goreleaser.yaml (goreleaser check), builds a snapshot
# of this machine's platform with goreleaser and `make build`, both with
# GOFLAGS=-buildvcs=false, and checks that their `version --json` names this
# commit and its date (scripts/dist-check.sh).
dist-check:
	@GO="$(GO)" bash scripts/dist-check.sh

# claude installs the pinned Claude Code CLI into the cache when it is missing.
# npm installs into a temporary folder that is renamed when complete, so an
# interrupted install is never mistaken for a finished one.
claude: $(CLAUDE)
$(CLAUDE):
	@command -v npm >/dev/null || { echo "npm is needed to install the Claude Code CLI" >&2; exit 1; }
	rm -rf "$(CLAUDE_DIR).tmp" && mkdir -p "$(CLAUDE_DIR).tmp"
	npm install --prefix "$(CLAUDE_DIR).tmp" --no-audit --no-fund --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_VERSION)
	rm -rf "$(CLAUDE_DIR)" && mv "$(CLAUDE_DIR).tmp" "$(CLAUDE_DIR)"
	"$(CLAUDE)" --version

# chromium installs the headless browser the web inbox's tests drive
# (Debian's package) when it is missing; ORCHESTRATOR_TEST_CHROMIUM may name
# another binary instead. Without root, sudo is used.
chromium:
	@if [ -n "$${ORCHESTRATOR_TEST_CHROMIUM:-}" ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then exit 0; fi; \
	echo "installing chromium: the web inbox's browser tests need it"; \
	command -v apt-get >/dev/null || { echo "chromium is missing and apt-get is not here: install Chromium and set ORCHESTRATOR_TEST_CHROMIUM to its path" >&2; exit 1; }; \
	sudo=; if [ "$$(id -u)" != 0 ]; then \
		command -v sudo >/dev/null || { echo "chromium is missing; as root run: apt-get install -y chromium" >&2; exit 1; }; sudo=sudo; fi; \
	$$sudo apt-get update -q && $$sudo apt-get install -y -q chromium || { echo "could not install chromium; run: apt-get install -y chromium" >&2; exit 1; }; \
	command -v chromium >/dev/null || { echo "chromium is still missing after apt-get install" >&2; exit 1; }

# postgresql installs the PostgreSQL server the store's tests start a
# throwaway cluster of (Debian's package: initdb and pg_ctl under
# /usr/lib/postgresql/*/bin) when it is missing;
# ORCHESTRATOR_TEST_DATABASE_URL may name a database to use instead.
# Without root, sudo is used.
postgresql:
	@if [ -n "$${ORCHESTRATOR_TEST_DATABASE_URL:-}" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi; \
	echo "installing postgresql: the store's tests need it"; \
	command -v apt-get >/dev/null || { echo "PostgreSQL is missing and apt-get is not here: install PostgreSQL's server, or set ORCHESTRATOR_TEST_DATABASE_URL to a database the tests may use" >&2; exit 1; }; \
	sudo=; if [ "$$(id -u)" != 0 ]; then \
		command -v sudo >/dev/null || { echo "postgresql is missing; as root run: apt-get install -y postgresql" >&2; exit 1; }; sudo=sudo; fi; \
	$$sudo apt-get update -q && $$sudo apt-get install -y -q postgresql || { echo "could not install postgresql; run: apt-get install -y postgresql" >&2; exit 1; }; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "initdb is still missing after apt-get install" >&2; exit 1; }

# systemd installs systemd-analyze (Debian's systemd package), with which the
# tests verify deploy/systemd/orchestrator.service, when it is missing.
# Without root, sudo is used.
systemd:
	@bash scripts/need.sh systemd-analyze systemd "the service unit's test verifies deploy/systemd/orchestrator.service"

# sqlite3 is the SQLite shell docs/operations.md backs up with; its test runs
# the documented commands.
sqlite3:
	@bash scripts/need.sh sqlite3 sqlite3 "the backup test runs docs/operations.md's sqlite3 commands"

# vet is go vet, gofmt and staticcheck (pinned in go.mod as a tool: `go tool
# staticcheck`). ./... stays inside this module, so the vendored discordgo
# (internal/third_party/discordgo, a module of its own) is not checked.
vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change: $$out" >&2; exit 1; fi
	$(GO) tool staticcheck ./...

# fuzz runs each target briefly; scripts/fuzz.sh says what fails.
fuzz:
	@bash scripts/fuzz.sh "$(GO)" "$(FUZZTIME)" $(FUZZ_TARGETS)

test: $(CLAUDE) chromium postgresql systemd sqlite3 vet dist-check
	$(GO) test -race -count=1 -timeout=40m ./...
	$(MAKE) --no-print-directory fuzz

# bench runs every benchmark once. internal/scale's seed runs waiting by the
# ten thousand and watch `serve` for a minute each (ORCHESTRATOR_SCALE_WINDOW
# shortens the window, ORCHESTRATOR_SCALE_RUNS the PostgreSQL benchmark's
# 100,000 runs): the whole takes longer than the tests.
bench: $(CLAUDE)
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout=60m ./...

# demo rehearses an example spec with the real CLI and a built-in scripted
# model: no API key, no tokens. At a terminal you answer its question; with
# no terminal on stdin (CI, a pipe) the answer "2" is given for you.
DEMO_SPEC := specs/examples/add-login-page.md
demo: $(CLAUDE) build
	@export PATH="$(CLAUDE_DIR)/node_modules/.bin:$$PATH"; \
	if [ -t 0 ]; then $(BIN) rehearse $(DEMO_SPEC); \
	else echo "(stdin is not a terminal: answering 2)"; echo 2 | $(BIN) rehearse $(DEMO_SPEC); fi

# image-test builds the Dockerfile against bases made from Debian's packages
# (base images are not pulled) and runs `orchestrator version` and
# `orchestrator rehearse` inside the image; deploy/container/image-test.sh
# says how, and installs mmdebstrap, podman and buildah with apt-get when they
# are missing. The Debian root file system is cached in $(CACHE_DIR)/image.
image-test:
	@bash deploy/container/image-test.sh "$(GO)" "$(CLAUDE_VERSION)" "$(CACHE_DIR)"

clean:
	rm -rf bin dist
