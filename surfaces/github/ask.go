package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// asked is what this process knows of a set it asked.
type asked struct {
	issue     int
	partIDs   []int64 // the question comments, in order
	bodies    []string
	htmlURL   string
	answerID  int64 // the comment taken as the answer, 0 if none yet
	answered  bool  // the question comment shows the answer
	resumedOK bool
	at        int64 // when it was asked (the server's time, Unix seconds)
}

// Ask posts set as an issue comment (unless it is there already) and, until
// ctx ends, offers the answers people reply with to answers and tells them
// what became of each. It returns nil once the set is closed. It is Watch
// and a wait: the poller hands it the answers.
func (s *Surface) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkAsk(set, answers); err != nil {
		return err
	}
	set = s.withGroup(ctx, set, answers)
	w, err := s.watch(ctx, set, answers, false)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	defer w.p.remove(w)

	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.c.ctx.Done():
		return fmt.Errorf("github: ask %s: client closed: %w", set.ID, surfaces.ErrUnavailable)
	}
}

// Watch posts set as an issue comment (unless it is there already) and
// hands it to the repository's poller, which from then on offers the
// answers people reply with to answers and tells them what became of each,
// until Unwatch or Close. It returns once the set is shown. With Refs, a
// set asked before (by this process or before a restart) is found by its
// recorded comment IDs, without a request; the poller reads the replies
// given meanwhile from its cursor.
func (s *Surface) Watch(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := checkAsk(set, answers); err != nil {
		return err
	}
	set = s.withGroup(ctx, set, answers)
	if _, err := s.watch(ctx, set, answers, true); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

// Unwatch stops taking answers for the set: its waiter goes, and with it
// what the poller keeps of the set once it is closed. It makes no request.
func (s *Surface) Unwatch(setID string) {
	key := s.key(setID)
	p := s.c.lookupPoller(s.repo())
	if p == nil {
		return
	}
	w := p.unwatch(key)
	if w == nil {
		return
	}
	p.remove(w)
	p.forget(w.issue, setID)
	if s.c.refs != nil {
		// Found again in Refs, without a request.
		s.c.mu.Lock()
		delete(s.c.asked, key)
		s.c.mu.Unlock()
	}
}

// checkAsk checks what Ask and Watch are given.
func checkAsk(set questions.Set, answers surfaces.Answers) error {
	if set.ID == "" {
		return errors.New("github: ask: set has no ID")
	}
	if len(set.Questions) == 0 {
		return fmt.Errorf("github: ask %s: set has no questions", set.ID)
	}
	if answers == nil {
		return fmt.Errorf("github: ask %s: no answers to offer to", set.ID)
	}
	return nil
}

// watch shows set and registers a waiter for it with the repository's
// poller; watched: as the set's Watch (nil, nil if it is watched already).
// The replies found on the issue when it was read are handled before it
// returns, Ask's under its ctx, Watch's whatever becomes of ctx.
func (s *Surface) watch(ctx context.Context, set questions.Set, answers surfaces.Answers, watched bool) (*waiter, error) {
	if s.c.ctx.Err() != nil {
		return nil, fmt.Errorf("github: ask %s: client closed: %w", set.ID, surfaces.ErrUnavailable)
	}
	key := s.key(set.ID)
	p := s.c.poller(s.owner, s.name)
	unlock := s.c.lock(key)
	var stale *waiter
	if watched {
		if old := p.watchedSet(key); old != nil {
			if !old.finished() || old.err == nil {
				unlock()
				return nil, nil
			}
			// Its poller gave up on it (the repository refused a poll):
			// watched anew.
			p.unwatch(key)
			stale = old
		}
	}
	// Outside the set's lock, as what takes the poller's (deciding a
	// reply takes the set's).
	drop := func() {
		if stale != nil {
			p.remove(stale)
		}
	}
	posted := s.c.startPosting(set.ID)
	defer posted()
	a, comments, since, err := s.post(ctx, p, set)
	if err != nil {
		unlock()
		drop()
		return nil, err
	}
	w := &waiter{
		s:       s,
		p:       p,
		set:     set,
		answers: answers,
		issue:   a.issue,
		afterID: a.partIDs[len(a.partIDs)-1],
		done:    make(chan struct{}),
	}
	if watched {
		p.watch(key, w)
	}
	// A group answer waiting for this post goes on now (it may hold the
	// poller's processing, which seed below takes): a watched set is known
	// (waiterFor), an asked one is not yet.
	posted()
	unlock()
	drop()
	// The issue's state learns of the set before its waiter takes
	// answers (outside the set's lock: deciding a reply takes it).
	if err := p.seed(ctx, a.issue, set, a); err != nil {
		if watched {
			p.unwatch(key)
		}
		return nil, fmt.Errorf("github: ask %s: %w", set.ID, err)
	}
	p.add(w, since)

	// What the issue holds: the questions waiting there (and whether they
	// are still open), the notices posted, and replies given before this
	// Ask (while the process was down, or before a retry).
	if comments != nil {
		hctx := ctx
		if watched {
			hctx = s.c.ctx
		}
		p.handle(hctx, a.issue, comments)
	}
	return w, nil
}

// post finds set's question comment(s) on its issue, posting what is
// missing, and returns them, the issue's comments if it was read (nil when
// Refs say where the set is), and the since the poller must read the
// replies from. The set's key lock is held.
func (s *Surface) post(ctx context.Context, p *poller, set questions.Set) (*asked, []*gh.IssueComment, time.Time, error) {
	key := s.key(set.ID)
	if s.c.refs != nil {
		a := s.c.askedInfo(key)
		var rec *setRecord
		if a == nil || a.bodies == nil || a.at == 0 {
			var err error
			if a, rec, err = s.recorded(ctx, set); err != nil {
				return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: %w", set.ID, err)
			}
		}
		if a == nil && rec == nil {
			// Never recorded: unless the issue's sets were never
			// recorded either (asked before Refs), never posted.
			issue, err := s.issueFor(ctx, set, true)
			if err != nil {
				return nil, nil, time.Time{}, err
			}
			indexed, err := s.c.indexed(ctx, s.repo(), issue)
			if err != nil {
				return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: %w", set.ID, err)
			}
			if indexed {
				a, date, err := s.postNew(ctx, set, issue)
				if err != nil {
					return nil, nil, time.Time{}, err
				}
				return a, nil, date.Add(-overlap), nil
			}
		}
		if a != nil && a.bodies != nil {
			since, err := p.sinceFor(ctx, key, time.Unix(a.at, 0))
			if err != nil {
				return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: %w", set.ID, err)
			}
			s.c.mu.Lock()
			if old := s.c.asked[key]; old != a {
				s.c.rememberLocked(key, a)
			}
			s.c.mu.Unlock()
			return a, nil, since, nil
		}
	}

	issue, err := s.issueFor(ctx, set, true)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	comments, date, err := s.listIssueComments(ctx, issue)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: list comments of %s#%d: %w", set.ID, s.repo(), issue, err)
	}
	me, err := s.c.self(ctx)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: %w", set.ID, err)
	}
	if s.c.refs != nil {
		// Read once: from now on, the sets asked on the issue are known
		// without reading it.
		if err := s.indexIssue(ctx, issue, me.ownOnly(comments), date); err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: %w", set.ID, err)
		}
	}
	bodies := renderParts(set)
	found := findParts(me.ownOnly(comments), set.ID, len(bodies))
	if s.c.refs != nil && slices.Contains(found, nil) {
		if err := s.recordPosting(ctx, set.RunID, set.ID, issue); err != nil {
			return nil, nil, time.Time{}, err
		}
	}
	for i, body := range bodies {
		if found[i] != nil {
			continue
		}
		c, err := s.createComment(ctx, issue, body, questionMarker(set, i+1, len(bodies)))
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: post question on %s#%d: %w", set.ID, s.repo(), issue, err)
		}
		s.c.log.Info("github: question posted", "set", set.ID, "repo", s.repo(), "issue", issue, "comment", c.GetID())
		found[i] = c
		comments = append(comments, c)
	}
	a := askedFrom(issue, set.ID, found)
	a.at = date.Unix()
	s.c.mu.Lock()
	if old := s.c.asked[key]; old != nil && old.answerID != 0 && a.answerID == 0 {
		a.answerID, a.answered, a.resumedOK = old.answerID, old.answered, old.resumedOK
	}
	s.c.rememberLocked(key, a)
	s.c.mu.Unlock()
	if err := s.record(ctx, set.RunID, set.ID, a, date); err != nil {
		return nil, nil, time.Time{}, err
	}
	if !a.answered {
		if err := s.addWaiting(ctx, set, a); err != nil {
			return nil, nil, time.Time{}, err
		}
	}
	return a, comments, date.Add(-overlap), nil
}

// findParts returns the question comments of set among comments (the
// orchestrator's own: identity.ownOnly), by part
// (nil where missing): the first of each part, of a rendering in parts
// parts, or of whatever number of parts was posted when parts is 0.
func findParts(comments []*gh.IssueComment, setID string, parts int) []*gh.IssueComment {
	var found []*gh.IssueComment
	for _, c := range comments {
		qp, ok := parseQuestionMarker(c.GetBody())
		if !ok || qp.setID != markerValue(setID) {
			continue
		}
		if found == nil {
			if parts == 0 {
				parts = qp.parts
			}
			found = make([]*gh.IssueComment, parts)
		}
		if qp.parts == parts && found[qp.part-1] == nil {
			found[qp.part-1] = c
		}
	}
	if found == nil && parts > 0 {
		found = make([]*gh.IssueComment, parts)
	}
	return found
}

// askedFrom is what the question comments of a set (all parts present) say.
func askedFrom(issue int, setID string, parts []*gh.IssueComment) *asked {
	a := &asked{issue: issue}
	for i, c := range parts {
		a.partIDs = append(a.partIDs, c.GetID())
		a.bodies = append(a.bodies, c.GetBody())
		if i == 0 {
			a.htmlURL = c.GetHTMLURL()
			if id, ok := parseAnsweredMarker(c.GetBody(), setID); ok {
				a.answerID, a.answered = id, true
			} else if parseClosedMarker(c.GetBody(), markerValue(setID)) {
				a.answered = true // closed without an answer: nothing more to show
			}
		}
	}
	return a
}

// find returns what is known of where set was asked, reading the issue if
// this process does not know.
func (s *Surface) find(ctx context.Context, set questions.Set) (*asked, error) {
	key := s.key(set.ID)
	if a := s.c.askedInfo(key); a != nil {
		return a, nil
	}
	if a, _, err := s.recorded(ctx, set); err != nil {
		return nil, err
	} else if a != nil && a.bodies != nil {
		s.c.mu.Lock()
		if old := s.c.asked[key]; old != nil {
			a = old
		} else {
			s.c.rememberLocked(key, a)
		}
		s.c.mu.Unlock()
		return a, nil
	}
	issue, err := s.issueFor(ctx, set, false)
	if err != nil || issue == 0 {
		return nil, err
	}
	comments, _, err := s.listIssueComments(ctx, issue)
	if err != nil {
		return nil, fmt.Errorf("github: list comments of %s#%d: %w", s.repo(), issue, err)
	}
	me, err := s.c.self(ctx)
	if err != nil {
		return nil, err
	}
	parts := findParts(me.ownOnly(comments), set.ID, 0)
	if len(parts) == 0 || slices.Contains(parts, nil) {
		return nil, nil
	}
	a := askedFrom(issue, set.ID, parts)
	s.c.mu.Lock()
	if old := s.c.asked[key]; old != nil {
		a = old
	} else {
		s.c.rememberLocked(key, a)
	}
	s.c.mu.Unlock()
	return a, nil
}

// Resolve edits the question comment to show the answer given elsewhere.
// It does nothing if the comment shows it already.
func (s *Surface) Resolve(ctx context.Context, set questions.Set, resp questions.Response) error {
	a, err := s.find(ctx, set)
	if err != nil {
		return fmt.Errorf("github: resolve %s: %w", set.ID, err)
	}
	if a == nil {
		return nil // never asked here
	}
	if err := s.markAnswered(ctx, set, a, resp, 0); err != nil {
		return err
	}
	if p := s.c.lookupPoller(s.repo()); p != nil {
		p.closed(a.issue, set.ID, 0)
	}
	return nil
}

// markAnswered edits the first question comment of set to show resp, taken
// from comment answerID (0: from elsewhere).
func (s *Surface) markAnswered(ctx context.Context, set questions.Set, a *asked, resp questions.Response, answerID int64) error {
	defer s.c.lock(s.key(set.ID))()
	s.c.mu.Lock()
	done := a.answered
	body := ""
	if len(a.bodies) > 0 {
		body = a.bodies[0]
	}
	id := a.partIDs[0]
	if answerID != 0 {
		a.answerID = answerID
	}
	answerID = a.answerID
	s.c.mu.Unlock()
	if done {
		return nil
	}
	// The marker records the answer comment (0 if answered elsewhere), for
	// Resumed after a restart, and closes the set for the comments after it.
	newBody := renderAnswered(set, resp) + body + "\n" + answeredMarker(set.ID, answerID)
	if _, _, err := s.c.api.Issues.EditComment(ctx, s.owner, s.name, id, &gh.IssueComment{Body: gh.String(newBody)}); err != nil {
		return fmt.Errorf("github: edit question comment %d of %s: %w", id, s.repo(), err)
	}
	s.c.mu.Lock()
	a.answered = true
	if len(a.bodies) > 0 {
		a.bodies[0] = newBody
	}
	s.c.mu.Unlock()
	s.recordDone(ctx, set, a)
	return nil
}

// Resumed puts 🚀 on the comment taken as the answer. It is the last thing
// done for a set: what the client remembers of it goes.
func (s *Surface) Resumed(ctx context.Context, set questions.Set) error {
	a, err := s.find(ctx, set)
	if err != nil {
		return fmt.Errorf("github: resumed %s: %w", set.ID, err)
	}
	if a == nil {
		return nil
	}
	s.c.mu.Lock()
	id, done := a.answerID, a.resumedOK
	s.c.mu.Unlock()
	if id != 0 && !done {
		if _, _, err := s.c.api.Reactions.CreateIssueCommentReaction(ctx, s.owner, s.name, id, "rocket"); err != nil {
			return fmt.Errorf("github: react to comment %d of %s: %w", id, s.repo(), err)
		}
	}
	s.c.mu.Lock()
	a.resumedOK = true
	if a.answered {
		delete(s.c.asked, s.key(set.ID))
	}
	s.c.mu.Unlock()
	return nil
}

// Remind posts a comment pointing at the question still waiting.
func (s *Surface) Remind(ctx context.Context, set questions.Set) error {
	a, err := s.find(ctx, set)
	if err != nil {
		return fmt.Errorf("github: remind %s: %w", set.ID, err)
	}
	if a == nil {
		return fmt.Errorf("github: remind %s in %s: %w", set.ID, s.repo(), surfaces.ErrNotAsked)
	}
	if s.c.refs != nil {
		// Found by its record, without reading the issue: the question
		// may have been deleted since. Then it is posted again, which
		// reminds.
		reposted, err := s.ensurePosted(ctx, set, a)
		if err != nil {
			return fmt.Errorf("github: remind %s: %w", set.ID, err)
		}
		if reposted {
			return nil
		}
	}
	link := "the question above"
	if a.htmlURL != "" {
		link = "[this question](" + a.htmlURL + ")"
	}
	var ids []string
	for _, q := range set.Questions {
		ids = append(ids, "`"+q.ID+"`")
	}
	// Each reminder has a marker of its own, so that a retry finds it.
	marker := reminderMarker(set.ID, s.c.now().UnixNano())
	body := fmt.Sprintf("⏰ Still waiting for an answer to %s (%s).\n\n%s", link, strings.Join(ids, ", "), marker)
	if _, err := s.createComment(ctx, a.issue, body, marker); err != nil {
		return fmt.Errorf("github: remind %s on %s#%d: %w", set.ID, s.repo(), a.issue, err)
	}
	return nil
}

// ensurePosted checks, in one request, that the first question comment of
// set is still there, and posts the set again if it was deleted (true).
func (s *Surface) ensurePosted(ctx context.Context, set questions.Set, a *asked) (bool, error) {
	s.c.mu.Lock()
	id := a.partIDs[0]
	s.c.mu.Unlock()
	_, _, err := s.c.api.Issues.GetComment(ctx, s.owner, s.name, id)
	if err == nil {
		return false, nil
	}
	var er *gh.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != http.StatusNotFound {
		return false, fmt.Errorf("read question comment %d of %s: %w", id, s.repo(), err)
	}
	return true, s.repost(ctx, set, a)
}

// repost posts set again on its issue, its question comment having been
// deleted: the new comments take the place of the old in the set's record,
// and the answer is looked for after the old ones still.
func (s *Surface) repost(ctx context.Context, set questions.Set, old *asked) error {
	defer s.c.lock(s.key(set.ID))()
	s.c.mu.Lock()
	issue, answered := old.issue, old.answered
	s.c.mu.Unlock()
	if answered || s.c.refs == nil {
		return nil
	}
	s.c.log.Info("github: question comment deleted; posting it again", "set", set.ID, "repo", s.repo(), "issue", issue)
	if _, _, err := s.postNew(ctx, set, issue); err != nil {
		return err
	}
	return nil
}
