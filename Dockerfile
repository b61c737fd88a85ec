# The orchestrator's container image: `orchestrator serve` as a non-root
# user, the Claude Code CLI at the version the project tests with, git, and
# the state directory (the store, transcripts, worktrees and the CLI's
# sessions) a volume. How to build and run it: deploy/container/README.md.
#
#   docker build -t orchestrator \
#     --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) .
#
# BUILD_BASE and BASE pick the base images of the two stages: `make
# image-test` builds this file against a base made from Debian's own
# packages, as base images cannot be pulled everywhere. BUILD_BASE needs Go;
# BASE needs apt-get (Debian or Ubuntu).
ARG BUILD_BASE=golang:1.26-bookworm
ARG BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
WORKDIR /src
# The modules first, so a change to the code does not download them again.
# discordgo is vendored in the tree (a replace in go.mod).
COPY go.mod go.sum ./
COPY internal/third_party/discordgo ./internal/third_party/discordgo
RUN go mod download
COPY . .
# VERSION, COMMIT and DATE are stamped into the binary when the build passes
# them; `orchestrator version` prints them.
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w ${VERSION:+-X main.version=$VERSION} ${COMMIT:+-X main.commit=$COMMIT} ${DATE:+-X main.date=$DATE}" \
      -o /out/orchestrator ./cmd/orchestrator \
 && /out/orchestrator version

FROM ${BASE}
# The CLI version `make test` tests with (the Makefile's CLAUDE_VERSION).
ARG CLAUDE_VERSION=2.1.330
# git for delivery and worktrees, ca-certificates for GitHub, Discord and the
# Anthropic API, curl for the health check, tini to reap the processes the
# agent's tools leave behind, nodejs/npm to install the CLI (and for MCP
# servers started with npx).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl git nodejs npm openssh-client tini \
 && rm -rf /var/lib/apt/lists/*
RUN npm install -g --no-audit --no-fund --loglevel=error \
      "@anthropic-ai/claude-code@${CLAUDE_VERSION}" \
 && npm cache clean --force \
 && claude --version

# The state directory is the user's home: the orchestrator's state
# ($HOME/.local/state/orchestrator unless state_dir says otherwise) and the
# CLI's sessions ($HOME/.claude) survive a new container together, so a
# waiting run resumes the same session.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /var/lib/orchestrator \
      --shell /usr/sbin/nologin orchestrator \
 && mkdir -p /var/lib/orchestrator /etc/orchestrator \
 && chown orchestrator:orchestrator /var/lib/orchestrator
COPY --from=build /out/orchestrator /usr/local/bin/orchestrator
COPY specs/examples /usr/share/orchestrator/examples
COPY LICENSE /usr/share/doc/orchestrator/LICENSE

ENV HOME=/var/lib/orchestrator
USER orchestrator
# ./orchestrator.yaml is read from here: mount the configuration (and the
# specs folder, specs.dir's default "specs" next to it) at /etc/orchestrator.
WORKDIR /etc/orchestrator
VOLUME ["/var/lib/orchestrator"]
EXPOSE 8080
# serve.listen must be ":8080" (every interface, port 8080) for this probe
# and for the published port; 503 means shutting down or the store is
# unreadable (docs: /healthz).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:8080/healthz || exit 1
# SIGTERM stops serve cleanly: running turns are interrupted and stay
# resumable; serve waits up to 30 s for them. Give it time: docker stop -t 90,
# stop_grace_period: 90s in compose (the default, 10 s, kills it midway).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/orchestrator"]
CMD ["serve"]
