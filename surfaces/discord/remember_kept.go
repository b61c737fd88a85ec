package discord

import (
	"context"
	"errors"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Offers to remember kept durably (Config.Offers, surfaces.RememberOffers):
// an offer is kept in the store when it is made, and a click on its button
// is decided there, so that a click after a restart, or one that reaches
// another instance, still takes it, and at most once. Without Offers, or
// when keeping one failed, the offer is held in memory (remember.go).

// keepOffer keeps the offer key to c, whose answer closed set, in
// Config.Offers; false when there are none or keeping it failed.
func (s *Surface) keepOffer(ctx context.Context, set questions.Set, key string, c clicker) bool {
	if s.cfg.Offers == nil {
		return false
	}
	o := surfaces.RememberOffer{Surface: name, Key: key, RunID: set.RunID, SetID: set.ID, User: c.id, By: c.by(),
		Remember: rememberValue, ExpiresAt: time.Now().Add(surfaces.RememberOfferLife)}
	if err := s.cfg.Offers.KeepOffer(ctx, o); err != nil {
		s.log.Warn("keep an offer to remember an answer; it is held in memory only", "set", set.ID, "err", s.redact(err))
		return false
	}
	return true
}

// rememberInMemory holds offer o under key, dropping the oldest beyond
// maxRemembers.
func (s *Surface) rememberInMemory(key string, o *rememberOffer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.remembers[key]; !ok {
		s.rememberOrder = append(s.rememberOrder, key)
		if len(s.rememberOrder) > maxRemembers {
			delete(s.remembers, s.rememberOrder[0])
			s.rememberOrder = s.rememberOrder[1:]
		}
	}
	s.remembers[key] = o
}

// rememberKept takes the offer key kept in Config.Offers, clicked by c: the
// answer is kept as a rule by the store, which takes the offer in the
// rule's transaction, and c is told the rule or why not.
func (s *Surface) rememberKept(in *discordgo.Interaction, c clicker, key string) {
	ctx, cancel := context.WithTimeout(s.ctx, offerTimeout)
	defer cancel()
	o, err := s.cfg.Offers.LoadOffer(ctx, name, key)
	if err == nil && o.User != c.id {
		s.respond(in, ephemeral(msgRememberOnly))
		return
	}
	loaded := err == nil
	var r surfaces.Remembered
	if loaded {
		r, err = s.cfg.Offers.TakeOffer(ctx, o)
	}
	switch {
	case errors.Is(err, surfaces.ErrOfferGone):
		s.respond(in, ephemeral(msgRememberGone))
	case errors.Is(err, surfaces.ErrOfferExpired):
		s.respond(in, ephemeral(msgRememberOld))
	case err != nil && (!loaded || ctx.Err() != nil):
		s.log.Error("remember an answer", "offer", key, "err", s.redact(err))
		s.respond(in, ephemeral(msgRememberRetry))
	case err != nil:
		s.log.Info("answer not remembered", "set", o.SetID, "by", o.By, "err", err)
		s.respond(in, ephemeral(msgRememberNot+clip(sanitize(err.Error(), true), 1800)))
	default:
		s.log.Info("remembered an answer", "set", o.SetID, "rule", r.RuleID, "by", o.By)
		s.respond(in, ephemeral(clip(sanitize(r.Text, true), 1900)))
	}
}
