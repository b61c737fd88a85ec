package slack

import (
	"context"
	"errors"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Offers to remember kept durably (Config.Offers, surfaces.RememberOffers):
// an offer is kept in the store when it is made, under its set's ID (the
// one person whose answer closed the set is offered it), and a click on its
// button is decided there, so that a click after a restart, or one that
// reaches another instance, still takes it, and at most once. Without
// Offers, or when keeping one failed, the offer is held in memory
// (remember.go).

// keepOffer keeps the offer of set setID (of run runID) to w's person in
// Config.Offers; false when there are none or keeping it failed.
func (s *Surface) keepOffer(ctx context.Context, w where, runID, setID string) bool {
	if s.cfg.Offers == nil {
		return false
	}
	o := surfaces.RememberOffer{Surface: name, Key: setID, RunID: runID, SetID: setID, User: w.user, By: w.by(),
		Remember: rememberValue, ExpiresAt: time.Now().Add(surfaces.RememberOfferLife)}
	if err := s.cfg.Offers.KeepOffer(ctx, o); err != nil {
		s.log.Warn("keep an offer to remember an answer; it is held in memory only", "set", setID, "err", err)
		return false
	}
	return true
}

// rememberInMemory holds offer o of set setID, dropping the oldest beyond
// maxRemembers.
func (s *Surface) rememberInMemory(setID string, o *rememberOffer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remembers == nil {
		s.remembers = map[string]*rememberOffer{}
	}
	if _, ok := s.remembers[setID]; !ok {
		s.rememberOrder = append(s.rememberOrder, setID)
		if len(s.rememberOrder) > maxRemembers {
			delete(s.remembers, s.rememberOrder[0])
			s.rememberOrder = s.rememberOrder[1:]
		}
	}
	s.remembers[setID] = o
}

// mayRemember checks that w's person may still answer here, as for an
// answer, and tells them when not.
func (s *Surface) mayRemember(ctx context.Context, w where) bool {
	ok, err := s.allowed(ctx, w.user)
	switch {
	case err != nil:
		s.log.Error("check who may answer", "user", w.user, "err", err)
		tctx, cancel := context.WithTimeout(s.ctx, workTimeout)
		defer cancel()
		s.tell(tctx, w, msgNotChecked)
	case !ok:
		s.log.Info("refused to remember an answer for someone not allowed", "user", w.user)
		s.tell(ctx, w, msgNotAllowed)
	}
	return err == nil && ok
}

// rememberKept takes the offer of set setID kept in Config.Offers, clicked
// by w's person: the answer is kept as a rule by the store, which takes
// the offer in the rule's transaction, and they are told the rule or why
// not.
func (s *Surface) rememberKept(ctx context.Context, w where, setID string) {
	o, err := s.cfg.Offers.LoadOffer(ctx, name, setID)
	if err == nil && o.User != w.user {
		s.tell(ctx, w, msgRememberOnly)
		return
	}
	loaded := err == nil
	var r surfaces.Remembered
	if loaded {
		r, err = s.cfg.Offers.TakeOffer(ctx, o)
	}
	switch {
	case errors.Is(err, surfaces.ErrOfferGone):
		s.tell(ctx, w, msgRememberGone)
	case errors.Is(err, surfaces.ErrOfferExpired):
		s.tell(ctx, w, msgRememberOld)
	case err != nil && (!loaded || ctx.Err() != nil):
		s.log.Error("remember an answer", "set", setID, "err", err)
		tctx, cancel := context.WithTimeout(s.ctx, workTimeout)
		defer cancel()
		s.tell(tctx, w, msgRememberRetry)
	case err != nil:
		s.log.Info("answer not remembered", "set", setID, "by", o.By, "err", err)
		s.tell(ctx, w, msgRememberNot+plain(err.Error(), 500))
	default:
		s.log.Info("remembered an answer", "set", setID, "rule", r.RuleID, "by", o.By)
		s.tell(ctx, w, escape(r.Text, 1500))
	}
}
