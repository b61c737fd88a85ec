package github

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Refs keeps small values for the surface durably (the store's
// surface_refs, seen by the github surface: store.Store.RefsFor). With it,
// asking again after a restart costs no listing of the question's issue:
//
//   - set/REPO/SET: where a set was asked (its issue and question comment
//     IDs) and whether its comment shows an answer (setRecord);
//   - issue/REPO/N: the sets still waiting on an issue, so that a reply is
//     decided against all of them whichever are watched yet (issueEntry);
//   - cursor/REPO: the repository's poll cursor, the since up to which
//     every comment was read, where the first poll after a restart starts;
//   - notice/REPO/N/KEY: a notice posted on an issue (each is posted once).
type Refs interface {
	Ref(ctx context.Context, key string) (string, bool, error)
	SetRef(ctx context.Context, key, value string) error
}

// setRecord is what Refs keep of a set asked.
type setRecord struct {
	Issue int     `json:"issue"`
	Parts []int64 `json:"parts"`
	URL   string  `json:"url,omitempty"`
	// At is when it was asked (the server's time, Unix seconds): no reply
	// to it is older.
	At int64 `json:"at"`
	// Answer is the comment taken as its answer; Done: its comment shows
	// its answer, or that it is closed.
	Answer int64 `json:"answer,omitempty"`
	Done   bool  `json:"done,omitempty"`
}

// issueEntry is a set waiting on an issue, as Refs keep it.
type issueEntry struct {
	ID    string   `json:"id"`
	QIDs  []string `json:"qids"`
	After int64    `json:"after"` // its last question comment
}

func setRefKey(repo, setID string) string { return "set/" + strings.ToLower(repo) + "/" + setID }
func cursorRefKey(repo string) string     { return "cursor/" + strings.ToLower(repo) }
func issueRefKey(repo string, n int) string {
	return "issue/" + strings.ToLower(repo) + "/" + strconv.Itoa(n)
}
func noticeRefKey(repo string, n int, key string) string {
	return "notice/" + strings.ToLower(repo) + "/" + strconv.Itoa(n) + "/" + key
}

// recorded returns what Refs say of where set was asked, nil if they say
// nothing (or there are no Refs), and the time it was asked. Its bodies are
// set's rendering: nil when that no longer has as many parts as were
// posted (the comments must then be read).
func (s *Surface) recorded(ctx context.Context, set questions.Set) (*asked, time.Time, error) {
	if s.c.refs == nil {
		return nil, time.Time{}, nil
	}
	v, ok, err := s.c.refs.Ref(ctx, setRefKey(s.repo(), set.ID))
	if err != nil || !ok {
		return nil, time.Time{}, err
	}
	var r setRecord
	if err := json.Unmarshal([]byte(v), &r); err != nil || r.Issue <= 0 || len(r.Parts) == 0 || slices.Contains(r.Parts, 0) {
		return nil, time.Time{}, fmt.Errorf("github: the record of set %s in %s is not one: %q", set.ID, s.repo(), v)
	}
	a := &asked{issue: r.Issue, partIDs: r.Parts, htmlURL: r.URL, answerID: r.Answer, answered: r.Done}
	if bodies := renderParts(set); len(bodies) == len(r.Parts) {
		a.bodies = bodies
	}
	return a, time.Unix(r.At, 0), nil
}

// record keeps a in Refs (nothing without Refs). at is when set was asked.
func (s *Surface) record(ctx context.Context, setID string, a *asked, at time.Time) error {
	if s.c.refs == nil {
		return nil
	}
	s.c.mu.Lock()
	r := setRecord{Issue: a.issue, Parts: slices.Clone(a.partIDs), URL: a.htmlURL, At: at.Unix(), Answer: a.answerID, Done: a.answered}
	s.c.mu.Unlock()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.c.refs.SetRef(ctx, setRefKey(s.repo(), setID), string(b)); err != nil {
		return fmt.Errorf("github: record where set %s was asked in %s: %w", setID, s.repo(), err)
	}
	return nil
}

// recordDone records that set's comment shows its answer or that it is
// closed: it leaves the issue's waiting sets. A failure is logged (the
// comment says so; a record left behind costs a wrong guess, never an
// answer).
func (s *Surface) recordDone(ctx context.Context, set questions.Set, a *asked) {
	if s.c.refs == nil {
		return
	}
	s.c.mu.Lock()
	at := time.Unix(a.at, 0)
	s.c.mu.Unlock()
	if err := s.record(ctx, set.ID, a, at); err != nil {
		s.c.log.Warn("github: record a set done", "set", set.ID, "err", err)
	}
	if err := s.c.updateWaiting(ctx, s.repo(), a.issue, func(es []issueEntry) []issueEntry {
		return slices.DeleteFunc(es, func(e issueEntry) bool { return e.ID == set.ID })
	}); err != nil {
		s.c.log.Warn("github: record a set done", "set", set.ID, "err", err)
	}
}

// waitingOn returns the sets Refs say wait on the issue.
func (c *Client) waitingOn(ctx context.Context, repo string, issue int) ([]issueEntry, error) {
	v, ok, err := c.refs.Ref(ctx, issueRefKey(repo, issue))
	if err != nil || !ok {
		return nil, err
	}
	var es []issueEntry
	if err := json.Unmarshal([]byte(v), &es); err != nil {
		return nil, fmt.Errorf("github: the sets recorded waiting on %s#%d are not a list: %w", repo, issue, err)
	}
	return es, nil
}

// updateWaiting changes the sets recorded waiting on the issue.
func (c *Client) updateWaiting(ctx context.Context, repo string, issue int, change func([]issueEntry) []issueEntry) error {
	key := issueRefKey(repo, issue)
	defer c.lock("refs\x00" + key)()
	es, err := c.waitingOn(ctx, repo, issue)
	if err != nil {
		return err
	}
	b, err := json.Marshal(change(es))
	if err != nil {
		return err
	}
	return c.refs.SetRef(ctx, key, string(b))
}

// addWaiting records that set waits on the issue, after its last question
// comment.
func (s *Surface) addWaiting(ctx context.Context, set questions.Set, a *asked) error {
	if s.c.refs == nil {
		return nil
	}
	after := a.partIDs[len(a.partIDs)-1]
	err := s.c.updateWaiting(ctx, s.repo(), a.issue, func(es []issueEntry) []issueEntry {
		es = slices.DeleteFunc(es, func(e issueEntry) bool { return e.ID == set.ID })
		return append(es, issueEntry{ID: set.ID, QIDs: questionIDs(set), After: after})
	})
	if err != nil {
		return fmt.Errorf("github: record set %s waiting on %s#%d: %w", set.ID, s.repo(), a.issue, err)
	}
	return nil
}
