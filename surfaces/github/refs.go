package github

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
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
	// Posting: its question comments were being posted on Issue (none
	// are known): the issue must be read to find those that were.
	Posting bool `json:"posting,omitempty"`
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

// recorded returns what Refs say of where set was asked: nil, nil if they
// say nothing (or there are no Refs); nil and the record while it was
// being posted. Its bodies are set's rendering: nil when that no longer
// has as many parts as were posted (the comments must then be read).
func (s *Surface) recorded(ctx context.Context, set questions.Set) (*asked, *setRecord, error) {
	if s.c.refs == nil {
		return nil, nil, nil
	}
	v, ok, err := s.c.refs.Ref(ctx, setRefKey(s.repo(), set.ID))
	if err != nil || !ok {
		return nil, nil, err
	}
	var r setRecord
	if err := json.Unmarshal([]byte(v), &r); err != nil || r.Issue <= 0 || (!r.Posting && (len(r.Parts) == 0 || slices.Contains(r.Parts, 0))) {
		return nil, nil, fmt.Errorf("github: the record of set %s in %s is not one: %q", set.ID, s.repo(), v)
	}
	if r.Posting {
		return nil, &r, nil
	}
	a := &asked{issue: r.Issue, partIDs: r.Parts, htmlURL: r.URL, answerID: r.Answer, answered: r.Done, at: r.At}
	if bodies := renderParts(set); len(bodies) == len(r.Parts) {
		a.bodies = bodies
	}
	return a, &r, nil
}

// indexed reports whether Refs know the sets asked on the issue: every
// set asked there since has a record, so a set with none was never posted
// there.
func (c *Client) indexed(ctx context.Context, repo string, issue int) (bool, error) {
	_, ok, err := c.refs.Ref(ctx, issueRefKey(repo, issue))
	return ok, err
}

// postNew posts set on issue, where Refs say it was never posted: no
// listing of the issue. A record says it is being posted first, so that a
// failure half way (or a crash) has the next Watch read the issue.
func (s *Surface) postNew(ctx context.Context, set questions.Set, issue int) (*asked, time.Time, error) {
	if err := s.recordPosting(ctx, set.RunID, set.ID, issue); err != nil {
		return nil, time.Time{}, err
	}
	bodies := renderParts(set)
	found := make([]*gh.IssueComment, len(bodies))
	for i, body := range bodies {
		c, err := s.createComment(ctx, issue, body, questionMarker(set, i+1, len(bodies)))
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("github: ask %s: post question on %s#%d: %w", set.ID, s.repo(), issue, err)
		}
		s.c.log.Info("github: question posted", "set", set.ID, "repo", s.repo(), "issue", issue, "comment", c.GetID())
		found[i] = c
	}
	date := found[0].GetCreatedAt().Time
	if date.IsZero() {
		date = s.c.now()
	}
	a := askedFrom(issue, set.ID, found)
	a.at = date.Unix()
	s.c.mu.Lock()
	s.c.rememberLocked(s.key(set.ID), a)
	s.c.mu.Unlock()
	if err := s.record(ctx, set.RunID, set.ID, a, date); err != nil {
		return nil, time.Time{}, err
	}
	if err := s.addWaiting(ctx, set, a); err != nil {
		return nil, time.Time{}, err
	}
	return a, date, nil
}

// recordPosting records that set's question comments are being posted on
// issue: until they are recorded, asking again reads the issue. runID is
// the set's run ("": not known).
func (s *Surface) recordPosting(ctx context.Context, runID, setID string, issue int) error {
	b, err := json.Marshal(setRecord{Issue: issue, Posting: true})
	if err != nil {
		return err
	}
	if err := surfaces.SetRunRef(ctx, s.c.refs, runID, setRefKey(s.repo(), setID), string(b)); err != nil {
		return fmt.Errorf("github: ask %s: record it being posted: %w", setID, err)
	}
	return nil
}

// indexIssue records every set whose question comments own (the
// orchestrator's comments on the issue, read at date) show, and those of
// them still waiting: from then on the issue is indexed.
func (s *Surface) indexIssue(ctx context.Context, issue int, own []*gh.IssueComment, date time.Time) error {
	seen := make(map[string]bool)
	var open []issueEntry
	for _, c := range own {
		qp, ok := parseQuestionMarker(c.GetBody())
		if !ok || seen[qp.setID] {
			continue
		}
		seen[qp.setID] = true
		id, err := url.PathUnescape(qp.setID)
		if err != nil {
			continue
		}
		parts := findParts(own, id, 0)
		if len(parts) == 0 || slices.Contains(parts, nil) {
			continue
		}
		a := askedFrom(issue, id, parts)
		at := parts[0].GetCreatedAt().Time
		if at.IsZero() {
			at = date
		}
		if err := s.record(ctx, "", id, a, at); err != nil {
			return err
		}
		if !a.answered {
			first, _ := parseQuestionMarker(parts[0].GetBody())
			open = append(open, issueEntry{ID: id, QIDs: first.qids, After: a.partIDs[len(a.partIDs)-1]})
		}
	}
	err := s.c.updateWaiting(ctx, s.repo(), issue, func(es []issueEntry) []issueEntry {
		for _, e := range open {
			if !slices.ContainsFunc(es, func(x issueEntry) bool { return x.ID == e.ID }) {
				es = append(es, e)
			}
		}
		if es == nil {
			es = []issueEntry{}
		}
		return es
	})
	if err != nil {
		return fmt.Errorf("github: record the sets waiting on %s#%d: %w", s.repo(), issue, err)
	}
	return nil
}

// record keeps a in Refs (nothing without Refs), as a ref of the set's run
// runID ("": not known). at is when set was asked.
func (s *Surface) record(ctx context.Context, runID, setID string, a *asked, at time.Time) error {
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
	if err := surfaces.SetRunRef(ctx, s.c.refs, runID, setRefKey(s.repo(), setID), string(b)); err != nil {
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
	if err := s.record(ctx, set.RunID, set.ID, a, at); err != nil {
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
