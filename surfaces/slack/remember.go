package slack

import (
	"context"
	"strings"

	"github.com/slack-go/slack"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// Remembering an answer (docs/rules.md, surfaces.Rememberer): once a
// person's answer closed a whole set, they alone are offered, in an
// ephemeral message, a "Remember for this spec (7 days)" button. Their
// click keeps the set's answer as a spec rule and tells them the rule (or
// why it was not made), ephemerally too.

const (
	rememberPrefix = "orm|" // the offer's block ID: "orm|SET"
	actRemember    = "remember"
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

// maxRemembers bounds the offers kept: the oldest is dropped first.
const maxRemembers = 256

// rememberOffer is an open offer to keep the answer to a set as a rule.
type rememberOffer struct {
	user string // who answered: the only one who may take the offer
	by   string // as the answer's Response.By
	rm   surfaces.Rememberer
}

// offerRemember offers w's person, whose answer to set setID (of run
// runID) closed it
// with their answers only (final), to remember it, when answers can.
func (s *Surface) offerRemember(ctx context.Context, w where, runID, setID string, answers surfaces.Answers, d surfaces.Decision) {
	rm, ok := answers.(surfaces.Rememberer)
	if !ok || !d.Taken || !d.Closed || d.Final == nil || d.Final.By != w.by() {
		return
	}
	if !s.keepOffer(ctx, w, runID, setID) {
		s.rememberInMemory(setID, &rememberOffer{user: w.user, by: w.by(), rm: rm})
	}
	blocks := []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, msgRememberAsk, false, false), nil, nil),
		slack.NewActionBlock(rememberPrefix+setID, slack.NewButtonBlockElement(actRemember, "spec", slack.NewTextBlockObject(slack.PlainTextType, rememberLabel, false, false))),
	}
	opts := []slack.MsgOption{slack.MsgOptionText(msgRememberAsk, false), slack.MsgOptionBlocks(blocks...)}
	if w.thread != "" {
		opts = append(opts, slack.MsgOptionTS(w.thread))
	}
	err := s.call(ctx, "offer to remember an answer", func(ctx context.Context) error {
		_, err := s.api.PostEphemeralContext(ctx, w.channel, w.user, opts...)
		return err
	})
	if err != nil {
		s.log.Warn("offer to remember an answer", "set", setID, "err", err)
	}
}

// onRemember takes the offer of set setID, clicked by w's person: the
// answer is kept as a spec rule, and they are told the rule or why not.
func (s *Surface) onRemember(ctx context.Context, w where, setID string) {
	if !s.mayRemember(ctx, w) {
		return
	}
	s.mu.Lock()
	o := s.remembers[setID]
	if o != nil && o.user == w.user {
		delete(s.remembers, setID) // taken once; put back if the store failed
	}
	s.mu.Unlock()
	switch {
	case o == nil && s.cfg.Offers != nil:
		s.rememberKept(ctx, w, setID) // remember_kept.go
		return
	case o == nil:
		s.tell(ctx, w, msgRememberGone)
		return
	case o.user != w.user:
		s.tell(ctx, w, msgRememberOnly)
		return
	}
	r, err := o.rm.Remember(ctx, surfaces.RememberRequest{SetID: setID, By: o.by, Surface: name, Remember: rememberValue})
	switch {
	case err != nil && ctx.Err() != nil:
		s.mu.Lock()
		s.remembers[setID] = o
		s.mu.Unlock()
		s.log.Error("remember an answer", "set", setID, "err", err)
		tctx, cancel := context.WithTimeout(s.ctx, workTimeout)
		defer cancel()
		s.tell(tctx, w, msgRememberRetry)
	case err != nil:
		s.log.Info("answer not remembered", "set", setID, "by", o.by, "err", err)
		s.tell(ctx, w, msgRememberNot+plain(err.Error(), 500))
	default:
		s.log.Info("remembered an answer", "set", setID, "rule", r.RuleID, "by", o.by)
		s.tell(ctx, w, escape(r.Text, 1500))
	}
}

// parseRememberBlock reads the set of an offer's block ID.
func parseRememberBlock(blockID string) (setID string, ok bool) {
	setID, ok = strings.CutPrefix(blockID, rememberPrefix)
	return setID, ok && setID != ""
}
