package discord

import (
	"errors"
	"fmt"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Discord closes the gateway with a final code when connecting again cannot
// help: the bot's token or intents, or the connection's shard or API
// version, must change first. discordgo (patched: internal/third_party/
// discordgo) then stops reconnecting and calls Session.OnFatalClose; the
// surface becomes unavailable with the reason until the process restarts:
// Health reports it, and every Ask fails with it at once.

// fatalFix says, for each final close code, what a person must change.
var fatalFix = map[int]string{
	4004: "authentication failed: the bot token is wrong or was reset; put the bot's current token in the Discord surface's token",
	4010: "invalid shard: the connection's shard is not valid for this bot",
	4011: "sharding required: the bot is in too many servers for one gateway connection",
	4012: "invalid API version: this orchestrator speaks a gateway version Discord no longer accepts; upgrade it",
	4013: "invalid intents: the intents asked for are not a valid bit mask",
	4014: "disallowed intents: enable the Message Content intent in the Discord developer portal (Bot, Privileged Gateway Intents) or turn the surface's accept_replies off",
}

// fatalError is the surface's error after a final close code.
func fatalError(code int, text string) error {
	fix := fatalFix[code]
	if fix == "" {
		fix = "Discord says connecting again cannot help"
	}
	reason := ""
	if text != "" {
		reason = fmt.Sprintf(" (%q)", text)
	}
	return fmt.Errorf("discord: the gateway closed the connection with code %d%s: %s; the surface stays unavailable until that is fixed and the orchestrator restarted: %w",
		code, reason, fix, surfaces.ErrUnavailable)
}

// fatalCode returns the final close code err carries, if any.
func fatalCode(err error) (int, string, bool) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) && discordgo.FatalCloseCode(ce.Code) {
		return ce.Code, ce.Text, true
	}
	return 0, "", false
}

// onFatalClose makes the surface unavailable for good after a final close
// code (discordgo's Session.OnFatalClose).
func (s *Surface) onFatalClose(code int, text string) {
	s.setFatal(fatalError(code, text))
}

// setFatal makes the surface unavailable for good with err (the first one
// counts): one error logged, Health and every Ask say why.
func (s *Surface) setFatal(err error) {
	err = s.redact(err)
	s.connMu.Lock()
	if s.fatal != nil {
		s.connMu.Unlock()
		return
	}
	s.fatal = err
	s.opened = false
	s.connMu.Unlock()
	s.log.Error("Discord refuses the bot; not connecting again", "err", err)
	close(s.fatalCh) // once: only the first caller gets here
}

// refusedToken returns the surface's error when err is Discord's 401 to
// the gateway lookup: the token is not a valid bot token.
func refusedToken(err error) (error, bool) {
	var re *discordgo.RESTError
	if !errors.As(err, &re) || re.Response == nil || re.Response.StatusCode != 401 {
		return nil, false
	}
	return fmt.Errorf("discord: Discord answered 401 Unauthorized to the gateway lookup: the bot token is wrong or was reset; put the bot's current token in the Discord surface's token; the surface stays unavailable until that is fixed and the orchestrator restarted: %w",
		surfaces.ErrUnavailable), true
}

// fatalErr returns the reason the surface is unavailable for good, or nil.
func (s *Surface) fatalErr() error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return s.fatal
}
