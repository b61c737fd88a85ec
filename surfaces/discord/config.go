package discord

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Config is what the discord surface is built from. The YAML section
// surfaces.discord maps onto its first fields; the last ones are wiring.
// The configuration (internal/config, Discord.Check) is where its values
// are checked, each at its key with file and line; New only refuses what it
// cannot start from.
type Config struct {
	// Token is the bot token (usually ${DISCORD_BOT_TOKEN} in the config
	// file), with or without its "Bot " prefix. It never appears in logs.
	Token string
	// ChannelID is the channel questions are posted in.
	ChannelID string
	// ThreadPerRun starts a thread per run in ChannelID and asks there.
	ThreadPerRun bool
	// AllowUsers and AllowRoles are the user and role IDs allowed to
	// answer. When both are empty nobody may answer.
	AllowUsers []string
	AllowRoles []string
	// AcceptReplies takes a text reply to a question's message as an
	// answer. It needs the privileged message-content intent.
	AcceptReplies bool
	// APIURL replaces https://discord.com for REST calls (a REST proxy, a
	// local test server). Empty means Discord itself.
	APIURL string
	// GatewayURL, if set, is the gateway websocket URL to use instead of the
	// one Discord's /gateway endpoint names.
	GatewayURL string

	// Refs remembers which messages and threads were posted and which
	// answers were taken, so that a restarted process finds them. Nil keeps
	// them in memory only (see MemoryRefs).
	Refs Refs
	// Lookup, if set, finds a question set this process neither watches
	// nor asks, so that a click on its message is still decided: the set
	// of a run another instance waits on, or one not watched again yet
	// after a restart. It returns the set and where to offer its answers
	// (pending true) while the store has it pending; pending false once it
	// is settled or unknown. It is called from the gateway's handler with
	// a context of about two seconds (Discord waits three for the
	// acknowledgement). Nil answers such clicks that the question is
	// closed.
	Lookup func(ctx context.Context, setID string) (set questions.Set, answers surfaces.Answers, pending bool, err error)
	// Offers, if set, keeps the offers to remember an answer (the
	// "Remember for this spec" button) durably, so that a click after a
	// restart or on another instance still takes its offer, once
	// (remember_kept.go). Nil holds them in memory.
	Offers surfaces.RememberOffers
	// HTTPClient is used for REST calls; nil means a client with a 20s
	// timeout. It is not modified: the surface wraps its transport.
	HTTPClient *http.Client
	// Logger receives the surface's log, with the token redacted. Nil
	// discards it.
	Logger *slog.Logger
}

// Refs is a small durable key-value store, implemented by the orchestrator's
// store (surfaces.Refs).
type Refs = surfaces.Refs

// MemoryRefs is a Refs kept in memory, for tests and for running without a
// store (surfaces.MemoryRefs).
type MemoryRefs = surfaces.MemoryRefs
