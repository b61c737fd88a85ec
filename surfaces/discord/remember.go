package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Remembering an answer (docs/rules.md, surfaces.Rememberer): once a
// person's click answered a whole set, they alone are offered, in an
// ephemeral follow-up message, a "Remember for this spec (7 days)" button.
// Their click keeps the set's answer as a spec rule and tells them the rule
// (or why it was not made), ephemerally too. The question's message is not
// touched: answered messages keep every button disabled.

const (
	rememberValue  = "spec:7d"
	rememberLabel  = "Remember for this spec (7 days)"
	msgRememberAsk = "Your answer was taken. Remember it for this spec for 7 days? " +
		"The spec's later runs that ask the same will be answered by it, not asked."
	msgRememberGone  = "This offer to remember the answer is no longer open (it was taken already). Use `orchestrator answer --remember` or the web inbox."
	msgRememberOld   = "This offer to remember the answer has expired (offers stay open for 24 hours). Use `orchestrator answer --remember` or the web inbox."
	msgRememberOnly  = "Only the person who answered may remember this answer."
	msgRememberNot   = "Your answer was not remembered: "
	msgRememberRetry = "Your answer could not be remembered just now; please try again."
)

// maxRemembers bounds the offers kept: the oldest is dropped first (its
// button then says the offer is gone).
const maxRemembers = 256

// rememberOffer is an open offer to keep the answer to a set as a rule.
type rememberOffer struct {
	setID  string
	userID string // who answered: the only one who may take the offer
	by     string // as the answer's Response.By
	rm     surfaces.Rememberer
}

// rememberKey is the offer's key, the ref of its button's custom ID: a
// hash, which parseCustomID reads as a ref without a question.
func rememberKey(setID, userID string) string {
	sum := sha256.Sum256([]byte("remember\x00" + setID + "\x00" + userID))
	return "#" + hex.EncodeToString(sum[:12])
}

// offerRemember offers c, whose answer to qs was taken (d), to remember
// it: when the set is closed with c's answer to all of its questions and
// its Answers can remember. The offer is a follow-up to interaction in,
// which was acknowledged.
func (s *Surface) offerRemember(ctx context.Context, in *discordgo.Interaction, c clicker, qs *qState, d surfaces.Decision) {
	s.mu.Lock()
	answers, set := qs.st.answers, qs.st.set
	s.mu.Unlock()
	rm, ok := answers.(surfaces.Rememberer)
	if !ok || !d.Closed || d.Final == nil || d.Final.By != c.by() {
		return
	}
	key := rememberKey(set.ID, c.id)
	if !s.keepOffer(ctx, set, key, c) {
		s.rememberInMemory(key, &rememberOffer{setID: set.ID, userID: c.id, by: c.by(), rm: rm})
	}
	data := &discordgo.InteractionResponseData{
		Content:         msgRememberAsk,
		Flags:           discordgo.MessageFlagsEphemeral,
		AllowedMentions: noMentions(),
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: rememberLabel, Style: discordgo.SecondaryButton, CustomID: customID(key, actRemb)},
		}}},
	}
	if err := s.followup(ctx, in, data); err != nil {
		s.log.Warn("offer to remember an answer", "set", set.ID, "err", s.redact(err))
	}
}

// rememberClicked takes the offer key, clicked by c: the answer is kept as
// a spec rule, and c is told the rule or why not.
func (s *Surface) rememberClicked(in *discordgo.Interaction, c clicker, key string) {
	s.mu.Lock()
	o := s.remembers[key]
	if o != nil && o.userID == c.id {
		delete(s.remembers, key) // taken once; put back if the store failed
	}
	s.mu.Unlock()
	switch {
	case o == nil && s.cfg.Offers != nil:
		s.rememberKept(in, c, key) // remember_kept.go
		return
	case o == nil:
		s.respond(in, ephemeral(msgRememberGone))
		return
	case o.userID != c.id:
		s.respond(in, ephemeral(msgRememberOnly))
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, offerTimeout)
	defer cancel()
	r, err := o.rm.Remember(ctx, surfaces.RememberRequest{SetID: o.setID, By: o.by, Surface: name, Remember: rememberValue})
	switch {
	case err != nil && ctx.Err() != nil:
		s.mu.Lock()
		s.remembers[key] = o
		s.mu.Unlock()
		s.log.Error("remember an answer", "set", o.setID, "err", err)
		s.respond(in, ephemeral(msgRememberRetry))
	case err != nil:
		s.log.Info("answer not remembered", "set", o.setID, "by", o.by, "err", err)
		s.respond(in, ephemeral(msgRememberNot+clip(sanitize(err.Error(), true), 1800)))
	default:
		s.log.Info("remembered an answer", "set", o.setID, "rule", r.RuleID, "by", o.by)
		s.respond(in, ephemeral(clip(sanitize(r.Text, true), 1900)))
	}
}

// followup sends a follow-up message to interaction in, which was
// acknowledged. Like respond it goes straight to the HTTP client.
func (s *Surface) followup(ctx context.Context, in *discordgo.Interaction, data *discordgo.InteractionResponseData) error {
	return s.postJSON(ctx, discordgo.EndpointFollowupMessage(in.AppID, in.Token), "follow-up message", data) // interact.go
}
