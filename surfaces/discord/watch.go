package discord

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.Watcher = (*Surface)(nil)

// watchToken marks one Watch of a set: Unwatch, and a Watch that failed to
// show the set, let go of the Watch they find there only.
type watchToken struct{}

// Watch implements surfaces.Watcher: it posts the set's messages (or finds
// those posted before), reads the replies given meanwhile when
// AcceptReplies is set, and returns. From then on the gateway's handlers
// route the clicks, forms and replies on the set's messages to it by custom
// ID (or replied-to message ID), offer them to answers and acknowledge them
// as during an Ask, until Unwatch or Close: no goroutine waits for the set.
// Watching a set watched already makes no request; it only takes answers as
// where answers go from then on.
func (s *Surface) Watch(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSet(set); err != nil {
		return err
	}
	s.mu.Lock()
	if st := s.sets[set.ID]; st != nil && st.watch != nil {
		st.answers = answers
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	set = s.withGroup(ctx, set, answers) // group.go
	if err := s.Open(ctx); err != nil {
		return err
	}
	tok := &watchToken{}
	st, watched := s.joinWatch(set, answers, tok)
	if watched {
		return nil
	}
	if err := s.ensurePosted(ctx, st); err != nil {
		s.unwatchToken(st, tok)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redact(err)
	}
	if s.cfg.AcceptReplies {
		s.catchUp(ctx, st)
	}
	return nil
}

// joinWatch registers a Watch of set under tok, unless a Watch holds it
// already (watched is then true, and nothing is registered).
func (s *Surface) joinWatch(set questions.Set, answers surfaces.Answers, tok *watchToken) (st *setState, watched bool) {
	s.mu.Lock()
	if st := s.sets[set.ID]; st != nil && st.watch != nil {
		st.answers = answers
		s.mu.Unlock()
		return st, true
	}
	s.mu.Unlock()
	// join and marking the watch are two steps: a concurrent Watch of the
	// same set may mark it first, and this one then leaves again.
	st = s.join(set, answers)
	s.mu.Lock()
	if st.watch != nil {
		s.mu.Unlock()
		s.leave(st)
		return st, true
	}
	st.watch = tok
	s.mu.Unlock()
	return st, false
}

// Unwatch implements surfaces.Watcher: the set's state is let go once no
// Ask waits for it either (who answered its questions is remembered among
// the last maxFinished, for a late click). A click on its messages from
// then on is answered as for any set not watched here (onUnwatched).
func (s *Surface) Unwatch(setID string) {
	s.mu.Lock()
	st := s.sets[setID]
	var tok *watchToken
	if st != nil {
		tok = st.watch
	}
	s.mu.Unlock()
	if tok != nil {
		s.unwatchToken(st, tok)
	}
}

// unwatchToken ends the Watch tok of st, if it is still the one there.
func (s *Surface) unwatchToken(st *setState, tok *watchToken) {
	s.mu.Lock()
	mine := st.watch == tok
	if mine {
		st.watch = nil
	}
	s.mu.Unlock()
	if mine {
		s.leave(st)
	}
}

// watching reports whether set is watched here (for tests).
func (s *Surface) watching(setID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sets[setID]
	return st != nil && st.watch != nil
}

// notOpenWait is how long a click on a set nobody here can tell about
// waits before it is answered closed: another process may answer it first,
// and Discord waits three seconds for an answer.
const notOpenWait = 1500 * time.Millisecond

// notOpenHere waits notOpenWait (or until the surface closes), then looks
// for ref again among the sets watched or asked here.
func (s *Surface) notOpenHere(r string) (qs *qState, doneBy string, wasDone bool) {
	t := time.NewTimer(notOpenWait)
	select {
	case <-t.C:
	case <-s.ctx.Done():
		t.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	doneBy, wasDone = s.finished[r]
	return s.byRef[r], doneBy, wasDone
}

// sameAnswer reports whether final holds a's answer, by the same person.
func sameAnswer(final questions.Response, a *answered) bool {
	if final.Surface != name || final.By != a.By {
		return false
	}
	for _, x := range final.Answers {
		if x.QuestionID == a.Answer.QuestionID {
			return slices.Equal(x.Labels, a.Answer.Labels) && x.Text == a.Answer.Text
		}
	}
	return false
}

// lookupSet finds, through Config.Lookup, the set of a question this
// process neither watches nor asks, and registers it for the handling of
// one interaction: release lets go of it. qs is nil when there is no such
// question pending: settled is true when the store said so, false when
// nobody could tell (no Lookup, a ref that does not name its set); err is
// a failure to tell. A settled set is returned too (qs with settled true)
// when the store gave it, for tookThisClick.
func (s *Surface) lookupSet(ctx context.Context, r string) (qs *qState, release func(), settled bool, err error) {
	if s.cfg.Lookup == nil || strings.HasPrefix(r, "#") {
		// A hashed ref does not name its set: it cannot be looked up.
		return nil, nil, false, nil
	}
	setID, qID, ok := strings.Cut(r, "|")
	if !ok {
		return nil, nil, false, nil
	}
	set, answers, pending, err := s.cfg.Lookup(ctx, setID)
	if err != nil {
		return nil, nil, false, err
	}
	if !pending && (checkSet(set) != nil || set.ID != setID || answers == nil) {
		return nil, nil, true, nil
	}
	if checkSet(set) != nil || set.ID != setID || answers == nil {
		s.log.Warn("lookup returned a set Discord cannot show", "set", setID)
		return nil, nil, false, nil
	}
	st := s.join(set, answers)
	for _, q := range st.qs {
		if q.q.ID == qID {
			return q, func() { s.leave(st) }, !pending, nil
		}
	}
	s.leave(st)
	return nil, nil, true, nil
}

// tookThisClick reports whether the settled set of qs (found by
// lookupSet) was answered by this very click: every process connected to
// the bot gets the click, and the one that watches the set may have taken
// it before this one looked it up. The store tells, by its decision on
// the same answer (the final answer, nothing recorded).
func (s *Surface) tookThisClick(ctx context.Context, in *discordgo.Interaction, qs *qState, p parsedID, c clicker) bool {
	ans, ok, err := interactionAnswer(in, qs, p)
	if !ok || err != nil {
		return false
	}
	a := &answered{Answer: ans, By: c.by(), Name: c.name}
	d, err := s.offer(ctx, qs, a)
	return err == nil && !d.Taken && d.Final != nil && sameAnswer(*d.Final, a)
}
