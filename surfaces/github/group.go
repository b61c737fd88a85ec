package github

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// The same question answered in several runs at once (issue 28):
// "/answer QID ANSWER --all" answers the question here and in every other
// run it waits in where the person may answer on GitHub: a set this
// client shows, in a repository where they have write access (or on that
// surface's allowlist). The others are left waiting, and the reply says
// which.

// allFlag ends an "/answer" line that answers the group.
const allFlag = "--all"

// cutAllFlag returns rest without a final "--all" word, and whether it
// had one.
func cutAllFlag(rest string) (string, bool) {
	f := strings.Fields(rest)
	if len(f) == 0 || f[len(f)-1] != allFlag {
		return rest, false
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), allFlag)), true
}

// wantsAll reports whether body has an "/answer … --all" line.
func wantsAll(body string) bool {
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(t, "/answer"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			if _, all := cutAllFlag(rest); all {
				return true
			}
		}
	}
	return false
}

// waiterFor finds the waiter of a set this client shows (asks or
// watches), in any repository, and its poller.
func (c *Client) waiterFor(setID string) (*poller, *waiter) {
	c.mu.Lock()
	ps := make([]*poller, 0, len(c.pollers))
	for _, p := range c.pollers {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	for _, p := range ps {
		p.mu.Lock()
		for w := range p.waiters {
			if w.set.ID == setID && !w.finished() {
				p.mu.Unlock()
				return p, w
			}
		}
		// A watched set is known here as soon as it is posted, before its
		// waiter takes answers.
		for _, w := range p.watched {
			if w.set.ID == setID && !w.finished() {
				p.mu.Unlock()
				return p, w
			}
		}
		p.mu.Unlock()
	}
	return nil, nil
}

// offerAll offers resp, comment c's answer to w's set, to that set and to
// the same question in the other runs where c's author may answer, in one
// decision of the store, and tells them what became of the others. It
// returns the decision about w's set.
func (p *poller) offerAll(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, w *waiter, ga surfaces.GroupAnswers, resp questions.Response) (questions.Decision, error) {
	login := c.GetUser().GetLogin()
	group, err := ga.Group(ctx, w.set.ID, 0)
	if err != nil {
		return questions.Decision{}, err
	}
	var others []string
	var left []string
	where := map[string]*waiter{}
	for _, g := range group {
		gp, gw := p.c.waiterFor(g.SetID)
		if gw == nil && p.c.waitPosted(ctx, g.SetID) {
			gp, gw = p.c.waiterFor(g.SetID)
		}
		if gw == nil {
			left = append(left, fmt.Sprintf("%s (not asked on GitHub here)", g.Name()))
			continue
		}
		ok, err := gp.mayAnswer(ctx, gw.s, login)
		if err != nil {
			return questions.Decision{}, err
		}
		if !ok {
			left = append(left, fmt.Sprintf("%s (no write access to %s/%s)", g.Name(), gp.owner, gp.name))
			continue
		}
		others = append(others, g.SetID)
		where[g.SetID] = gw
	}
	res, err := ga.OfferGroup(ctx, resp, others)
	if err != nil {
		return questions.Decision{}, err
	}
	if len(res.Sets) == 0 {
		return questions.Decision{}, fmt.Errorf("the group answer to %s decided nothing", w.set.ID)
	}
	var answered, late []string
	for _, o := range res.Sets[1:] {
		switch d := o.Decision; {
		case d.Taken:
			answered = append(answered, o.Name())
			if gw := where[o.SetID]; gw != nil && d.Final != nil {
				// The runner shows the answer on every surface but the
				// one that took it: this one shows it here itself.
				if err := gw.s.Resolve(context.WithoutCancel(ctx), gw.set, *d.Final); err != nil {
					p.c.log.Warn("github: show a shared answer", "set", o.SetID, "err", err)
				}
			}
		case d.Final != nil:
			late = append(late, fmt.Sprintf("%s (answered before by %s)", o.Name(), d.Final.By))
		default:
			late = append(late, fmt.Sprintf("%s (closed)", o.Name()))
		}
	}
	if first := res.Sets[0].Decision; first.Taken && len(group) > 0 {
		p.reply(ctx, issue, st, fmt.Sprintf("all/%d", c.GetID()), groupReply(login, res.ID, answered, left, late))
	}
	return res.Sets[0].Decision, nil
}

// groupReply tells the person what their "--all" answer did in the other
// runs.
func groupReply(login, id string, answered, left, late []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "@%s your answer was taken here", login)
	if len(answered) > 0 {
		runs := "runs"
		if len(answered) == 1 {
			runs = "run"
		}
		fmt.Fprintf(&b, " and in %d other %s (shared decision `%s`): %s", len(answered), runs, id, cleanLine(strings.Join(answered, ", ")))
	}
	b.WriteString(".")
	if len(left) > 0 {
		fmt.Fprintf(&b, " Not answered, still waiting for someone who may answer there: %s.", cleanLine(strings.Join(left, ", ")))
	}
	if len(late) > 0 {
		fmt.Fprintf(&b, " Skipped: %s.", cleanLine(strings.Join(late, ", ")))
	}
	return b.String()
}

// groupNote is what a question comment says of the other runs its
// question waits in (set.Group), and how to answer them all; "" when none.
func groupNote(set questions.Set) string {
	note := questions.GroupNote(set)
	if note == "" {
		return ""
	}
	key := set.ID
	if len(set.Questions) == 1 {
		key = set.Questions[0].ID
	}
	return fmt.Sprintf("\n🔗 %s To answer them all at once, reply `/answer %s ANSWER --all`: each run where you may answer takes it.\n",
		noMention(cleanLine(note)), strings.ReplaceAll(cleanLine(key), "`", "'"))
}

// noMention keeps a spec's or title's @ from notifying anyone.
func noMention(s string) string { return strings.ReplaceAll(s, "@", "@\u200b") }

// withGroup is set with the other runs its question waits in, for its
// comment to say so; set as it is when the store cannot tell.
func (s *Surface) withGroup(ctx context.Context, set questions.Set, answers surfaces.Answers) questions.Set {
	g, err := surfaces.WithGroup(ctx, set, answers)
	if err != nil {
		s.c.log.Warn("github: find the runs the same question waits in", "set", set.ID, "err", err)
	}
	return g
}

// startPosting marks set setID's post in flight until the returned
// function is called (any number of times): a group answer meanwhile waits
// for it (waitPosted) rather than take the set as not asked here.
func (c *Client) startPosting(setID string) (done func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	c.posting[setID] = ch
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.posting[setID] == ch {
				delete(c.posting, setID)
			}
			c.mu.Unlock()
			close(ch)
		})
	}
}

// postingWait bounds how long a group answer waits for a post in flight.
const postingWait = 30 * time.Second

// waitPosted waits for the post of set setID in flight here, if any, to
// be made (a watched set's waiter is then known) or to fail, for at most
// postingWait; it reports whether there was one.
func (c *Client) waitPosted(ctx context.Context, setID string) bool {
	c.mu.Lock()
	ch := c.posting[setID]
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	t := time.NewTimer(postingWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
	return true
}
