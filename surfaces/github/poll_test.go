package github

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// listings counts the polls of the repository's comments (their first
// pages) among the fake's requests.
func (f *fixture) listings() int {
	n := 0
	for _, r := range f.srv.Requests() {
		if r.Method == "GET" && r.Path == "/repos/"+testRepo+"/issues/comments" && !strings.Contains(r.RawQuery, "&page=") {
			n++
		}
	}
	return n
}

// With more than a page of comments since the cursor (150 questions waiting
// on one repository), the first page of the listing, the oldest, stays the
// same (304): the poller reads the pages after it too, and an answer to the
// newest question is taken by the first poll that starts after it was
// given, or the one after it.
func TestPollReadsEveryPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(0))
	const n = 150
	answers := surfacetest.NewAnswers()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	sets := make([]questions.Set, n)
	var wg sync.WaitGroup
	for i := range sets {
		sets[i] = surfacetest.SingleChoice(fmt.Sprintf("busy-%03d", i))
		answers.Add(sets[i])
		wg.Go(func() { _ = s.Ask(ctx, sets[i], answers) })
	}
	defer wg.Wait()
	defer cancel()
	f.srv.WaitFor(t, waitLong, fmt.Sprintf("%d questions posted", n), func() bool { return len(f.srv.Questions(testRepo)) >= n })
	// The newest question, and polls that list the full first page.
	qs := f.srv.Questions(testRepo)
	newest := qs[len(qs)-1]
	var set questions.Set
	for _, st := range sets {
		if strings.Contains(newest.Body, markerValue(st.ID)) {
			set = st
		}
	}
	if set.ID == "" {
		t.Fatalf("the newest question comment is of no set: %s", newest.Body)
	}
	f.waitPolls(t, 4)

	var mu sync.Mutex
	takenAt := -1
	answers.OnFinal(set.ID, func() {
		mu.Lock()
		takenAt = f.listings()
		mu.Unlock()
	})
	before := f.listings()
	f.srv.AddComment(testRepo, newest.Issue, "alice", "2")
	if _, err := answers.WaitFinal(ctx, set.ID); err != nil {
		t.Fatalf("the answer to the newest question was not taken: %v", err)
	}
	mu.Lock()
	polls := takenAt - before
	mu.Unlock()
	if polls > 2 {
		t.Errorf("the answer was taken after %d polls began, want at most 2", polls)
	}
	f.srv.WaitFor(t, waitLong, "the question shows who answered", func() bool {
		c, _ := f.srv.Comment(testRepo, newest.ID)
		return strings.Contains(c.Body, "alice")
	})

	// The first page answered 304 while later pages were read: the
	// listing is paged, and conditional page by page.
	var first304, later int
	for _, r := range f.srv.Requests() {
		if r.Path != "/repos/"+testRepo+"/issues/comments" {
			continue
		}
		if strings.Contains(r.RawQuery, "&page=") {
			later++
		} else if r.Status == 304 {
			first304++
		}
	}
	if first304 == 0 || later == 0 {

		t.Errorf("%d first pages answered 304, %d later pages read; want both", first304, later)
	}
}

// Exactly a full page of comments since the cursor: the page after it is
// empty, and is where the next comment shows. The poller reads past a full
// page even when the full page answers 304.
func TestPollPastAFullLastPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	f.srv.SetNow(func() time.Time { return now }) // the cursor stays: every comment of the same second
	other := f.srv.CreateIssue(testRepo, "discussion")
	for i := 0; i < perPage-1; i++ {
		f.srv.AddComment(testRepo, other, "bob", fmt.Sprintf("comment %d", i))
	}
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("full-page")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set) // the hundredth comment
	f.waitPolls(t, 3)
	// The full first page is answered 304 by now.
	full304 := false
	for _, r := range f.srv.Requests() {
		if r.Path == "/repos/"+testRepo+"/issues/comments" && !strings.Contains(r.RawQuery, "&page=") && r.Status == 304 {
			full304 = true
		}
	}
	if !full304 {
		t.Fatalf("the full first page was never answered 304")
	}
	f.srv.AddComment(testRepo, 1, "alice", "2")
	if r := waitResult(t, ch); r.err != nil || len(r.resp.Answers) != 1 {
		t.Fatalf("Ask = %+v, %v; want the answer on the page after the full one", r.resp, r.err)
	}
}
