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
	./questions:FuzzStreamDetector \
	./questions:FuzzParseAnswer \
	./questions:FuzzPrintable \
	./surfaces/terminal:FuzzAskOutput \
	./surfaces/github:FuzzAnswerText \
	./surfaces/github:FuzzWebhook \
	./surfaces/github:FuzzRenderedQuestion \
	./surfaces/discord:FuzzParseCustomID

.PHONY: all build test vet fuzz bench demo claude clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/orchestrator

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

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change: $$out" >&2; exit 1; fi

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) "$$pkg"; \
	done

test: $(CLAUDE) vet
	$(GO) test -race -count=1 -timeout=20m ./...
	$(MAKE) --no-print-directory fuzz

bench: $(CLAUDE)
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout=30m ./...

# demo rehearses an example spec with the real CLI and a built-in scripted
# model: no API key, no tokens. At a terminal you answer its question; with
# no terminal on stdin (CI, a pipe) the answer "2" is given for you.
DEMO_SPEC := specs/examples/add-login-page.md
demo: $(CLAUDE) build
	@export PATH="$(CLAUDE_DIR)/node_modules/.bin:$$PATH"; \
	if [ -t 0 ]; then $(BIN) rehearse $(DEMO_SPEC); \
	else echo "(stdin is not a terminal: answering 2)"; echo 2 | $(BIN) rehearse $(DEMO_SPEC); fi

clean:
	rm -rf bin
