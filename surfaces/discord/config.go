package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Config is what the discord surface is built from. The YAML section
// surfaces.discord maps onto its first fields; the last ones are wiring.
type Config struct {
	// Token is the bot token (usually ${DISCORD_BOT_TOKEN} in the config
	// file), with or without its "Bot " prefix. It never appears in logs.
	Token string
	// ChannelID is the channel questions are posted in.
	ChannelID string
	// ThreadPerRun starts a thread per run in ChannelID and asks there.
	ThreadPerRun bool
	// AllowUsers and AllowRoles are the user and role IDs allowed to
	// answer. When both are empty nobody may answer (see Warnings).
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
	// HTTPClient is used for REST calls; nil means a client with a 20s
	// timeout. It is not modified: the surface wraps its transport.
	HTTPClient *http.Client
	// Logger receives the surface's log, with the token redacted. Nil
	// discards it.
	Logger *slog.Logger
}

// Refs is a small durable key-value store, implemented by the orchestrator's
// store. Keys and values are short strings.
type Refs interface {
	// Ref returns the value stored under key, and whether there is one.
	Ref(ctx context.Context, key string) (value string, ok bool, err error)
	// SetRef stores value under key, replacing any previous value.
	SetRef(ctx context.Context, key, value string) error
}

// MemoryRefs is a Refs kept in memory, for tests and for running without a
// store. The zero value is ready to use; it is safe for concurrent use.
type MemoryRefs struct {
	mu sync.Mutex
	m  map[string]string
}

// Ref implements Refs.
func (r *MemoryRefs) Ref(_ context.Context, key string) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[key]
	return v, ok, nil
}

// SetRef implements Refs.
func (r *MemoryRefs) SetRef(_ context.Context, key, value string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]string{}
	}
	r.m[key] = value
	return nil
}

// Validate reports what makes c unusable, naming the surfaces.discord key.
// An empty allow list is not an error (see Warnings).
func (c Config) Validate() error {
	var errs []error
	tok := strings.TrimPrefix(strings.TrimSpace(c.Token), "Bot ")
	switch {
	case tok == "":
		errs = append(errs, errors.New("surfaces.discord.token is empty (set it to ${DISCORD_BOT_TOKEN} and export that variable)"))
	case strings.ContainsAny(tok, " \t\r\n"):
		errs = append(errs, errors.New("surfaces.discord.token contains white space"))
	}
	if c.ChannelID == "" {
		errs = append(errs, errors.New("surfaces.discord.channel_id is empty"))
	} else if !isSnowflake(c.ChannelID) {
		errs = append(errs, fmt.Errorf("surfaces.discord.channel_id %q is not a Discord ID (a number)", c.ChannelID))
	}
	for i, id := range c.AllowUsers {
		if !isSnowflake(id) {
			errs = append(errs, fmt.Errorf("surfaces.discord.allow_users[%d] %q is not a Discord user ID (a number)", i, id))
		}
	}
	for i, id := range c.AllowRoles {
		if !isSnowflake(id) {
			errs = append(errs, fmt.Errorf("surfaces.discord.allow_roles[%d] %q is not a Discord role ID (a number)", i, id))
		}
	}
	if c.APIURL != "" {
		if err := checkURL(c.APIURL, "http", "https"); err != nil {
			errs = append(errs, fmt.Errorf("surfaces.discord.api_url: %w", err))
		}
	}
	if c.GatewayURL != "" {
		if err := checkURL(c.GatewayURL, "ws", "wss"); err != nil {
			errs = append(errs, fmt.Errorf("surfaces.discord.gateway_url: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Warnings reports what is legal but probably not meant: with no allowed
// user or role, nobody can answer on Discord.
func (c Config) Warnings() []string {
	var w []string
	if len(c.AllowUsers) == 0 && len(c.AllowRoles) == 0 {
		w = append(w, "surfaces.discord: allow_users and allow_roles are both empty, so nobody may answer questions on Discord until someone is allowed")
	}
	return w
}

func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	ok := false
	for _, s := range schemes {
		ok = ok || u.Scheme == s
	}
	if !ok {
		return fmt.Errorf("%q: scheme must be %s", raw, strings.Join(schemes, " or "))
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	return nil
}
