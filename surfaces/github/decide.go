package github

import (
	"cmp"
	"context"
	"slices"
	"strings"

	gh "github.com/google/go-github/v60/github"
)

// edited reports whether a comment was edited after it was posted.
func edited(c *gh.IssueComment) bool {
	return c.GetUpdatedAt().Time.After(c.GetCreatedAt().Time)
}

// target is a set a comment answers, and the text that answers it.
type target struct {
	t    *threadSet
	w    *waiter // nil when no Ask of this process takes its answers
	text string
}

// decide decides what comment c is. It returns false if c must be read
// again later (a lookup or the store failed).
func (p *poller) decide(ctx context.Context, issue int, st *issueState, me identity, c *gh.IssueComment) bool {
	body := c.GetBody()
	if me.owns(c) || isBot(c.GetUser()) { // the orchestrator's own (by its author); bots
		return true
	}
	mine := make(map[string]*waiter)
	for _, w := range p.waitersFor(issue) {
		mine[w.set.ID] = w
	}
	waiting, ok := p.waitingAt(ctx, st, mine, c)
	if !ok {
		return false
	}
	if !slices.ContainsFunc(waiting, func(t *threadSet) bool { return mine[t.id] != nil }) {
		// No set of this process waits: not for it to decide, unless it
		// is a reply to a question this process closed.
		return p.decideClosed(ctx, issue, st, c)
	}
	slices.SortFunc(waiting, func(a, b *threadSet) int { return cmp.Compare(a.afterID, b.afterID) })
	key := commentKey(p.owner+"/"+p.name, c.GetID())
	if d, err := p.c.ledger.CommentDecision(ctx, key); err != nil {
		p.c.log.Warn("github: look up a comment's decision", "comment", c.GetID(), "err", err)
		return false
	} else if d != "" {
		return true // decided already, here or before a restart
	}
	if taken, ok := p.takenBefore(ctx, st, c); !ok {
		return false
	} else if taken {
		// Taken before a restart that came before its decision was
		// recorded: it gets no notice, and is decided now.
		return p.record(ctx, key, decTaken)
	}
	if p.repliesToGhost(ctx, issue, st, c) {
		return p.record(ctx, key, decClosed)
	}
	// Only a comment that looks like an answer is one; other discussion
	// gets no reply, and is recorded so that a restart does not decide it
	// again.
	if !attempt(waiting, mine, c) {
		if slices.ContainsFunc(waiting, func(t *threadSet) bool { return mine[t.id] == nil }) {
			return true // it may answer a set only its own Ask knows the options of
		}
		return p.record(ctx, key, decDiscussion)
	}

	// Who may answer: told once per set if nobody of this process lets them.
	allowed, denied, ok := p.whoMayAnswer(ctx, waiting, mine, c.GetUser().GetLogin())
	if !ok {
		return false
	}
	if len(allowed) == 0 {
		for _, w := range denied {
			p.notifyDenied(ctx, issue, st, c, w.set)
		}
		if len(denied) < len(waiting) {
			return true // another process's set may let them answer
		}
		return p.record(ctx, key, decRefused)
	}
	if edited(c) {
		p.notifyEdited(ctx, issue, st, c)
		return p.record(ctx, key, decEdited)
	}

	text := answerText(body)
	var targets []target
	if len(waiting) == 1 {
		targets = []target{{waiting[0], mine[waiting[0].id], text}}
	} else {
		// Several sets wait on this issue: the answer must name them.
		var unknown bool
		targets, unknown = namedTargets(waiting, mine, text)
		if len(targets) == 0 {
			if unknown {
				return true // it may name a set only its own Ask knows the questions of
			}
			p.notifyWhich(ctx, issue, st, c, waiting, mine)
			return p.record(ctx, key, decAmbiguous)
		}
	}
	return p.offerTargets(ctx, issue, st, c, key, targets)
}

// waitingAt returns the sets that were waiting on the issue when c was
// posted: those of this process's Asks (mine), and those of other
// processes whose set the store still has open. It returns false if the
// store could not be asked.
func (p *poller) waitingAt(ctx context.Context, st *issueState, mine map[string]*waiter, c *gh.IssueComment) ([]*threadSet, bool) {
	var waiting []*threadSet
	for _, t := range st.sets {
		if !t.openAt(c.GetID()) {
			continue
		}
		if mine[t.id] == nil {
			open, err := st.setOpen(ctx, p.c.ledger, t.id)
			if err != nil {
				p.c.log.Warn("github: look up a question set", "set", t.id, "err", err)
				return nil, false
			}
			if !open {
				continue
			}
		}
		waiting = append(waiting, t)
	}
	return waiting, true
}

// repliesToGhost reports whether c names, quotes or links a question
// closed without an answer (a ghost of the issue). Such a reply is told so
// (once per set), not offered to another set.
func (p *poller) repliesToGhost(ctx context.Context, issue int, st *issueState, c *gh.IssueComment) bool {
	body := c.GetBody()
	for _, g := range p.ghostsFor(issue) {
		t := st.sets[markerValue(g.set.ID)]
		if t == nil || c.GetID() <= g.afterID {
			continue
		}
		if namesQuestion(body, questionIDs(g.set)) || quotes(body, t.body) {
			if !g.told {
				p.notifyClosed(ctx, issue, st, c, g.set)
				g.told = true
			}
			return true
		}
	}
	return false
}

// whoMayAnswer splits the waiters of this process among the waiting sets
// into those that let login answer and those that do not. It returns false
// if a permission lookup failed.
func (p *poller) whoMayAnswer(ctx context.Context, waiting []*threadSet, mine map[string]*waiter, login string) (allowed, denied []*waiter, ok bool) {
	for _, t := range waiting {
		w := mine[t.id]
		if w == nil {
			continue
		}
		ok, err := p.mayAnswer(ctx, w.s, login)
		if err != nil {
			p.c.log.Warn("github: permission lookup failed", "repo", p.owner+"/"+p.name, "login", login, "err", err)
			return nil, nil, false
		}
		if ok {
			allowed = append(allowed, w)
		} else {
			denied = append(denied, w)
		}
	}
	return allowed, denied, true
}

// namedTargets returns, when several sets wait on the issue, the sets that
// text names by question ID and the lines that answer each. unknown is
// true if a waiting set's question IDs are not known here (only its own
// Ask knows them).
func namedTargets(waiting []*threadSet, mine map[string]*waiter, text string) (targets []target, unknown bool) {
	for _, t := range waiting {
		ids := t.qids
		if w := mine[t.id]; w != nil {
			ids = questionIDs(w.set)
		}
		if ids == nil {
			unknown = true
			continue
		}
		if lines := keyedLinesIDs(ids, text); len(lines) > 0 {
			targets = append(targets, target{t, mine[t.id], strings.Join(lines, "\n")})
		}
	}
	return targets, unknown
}

// offerTargets offers c's answer to each set it targets and records the
// comment's decision under key: taken if any set took it. With several
// targets each set's decision is recorded too, so a restart offers only
// the rest. A target of another process's Ask leaves the comment
// undecided here (its own Ask decides it). It returns false if c must be
// read again later.
func (p *poller) offerTargets(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, key string, targets []target) bool {
	complete := true
	var got []string
	for _, tg := range targets {
		if tg.w == nil {
			complete = false // its own Ask decides it
			continue
		}
		skey := key + "/" + markerValue(tg.t.id)
		if len(targets) > 1 {
			d, err := p.c.ledger.CommentDecision(ctx, skey)
			if err != nil {
				return false
			}
			if d != "" {
				got = append(got, d)
				continue
			}
		}
		d, ok := p.offer(ctx, issue, st, c, tg)
		if !ok {
			return false
		}
		if len(targets) > 1 && !p.record(ctx, skey, d) {
			return false
		}
		got = append(got, d)
	}
	if !complete {
		return true
	}
	d := got[0]
	if slices.Contains(got, decTaken) {
		d = decTaken
	}
	return p.record(ctx, key, d)
}
