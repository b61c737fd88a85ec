package github

import (
	"context"
	"strings"
	"testing"
)

// TestNoticeOncePerKey: a notice goes on the run's issue (opened when the
// run has none), once per key, also from a new process; on a configured
// issue it goes there.
func TestNoticeOncePerKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		s := f.surface(t, f.config(0)) // a new process each time
		if err := s.Notice(ctx, "run-7", "nightly/paused/run-7", "The schedule of spec nightly is paused."); err != nil {
			t.Fatal(err)
		}
	}
	issues := f.srv.Issues(testRepo)
	if len(issues) != 2 {
		t.Fatalf("%d issues, want the fixture's and run-7's", len(issues))
	}
	var notices int
	for _, c := range f.srv.Comments(testRepo, issues[1].Number) {
		if strings.Contains(c.Body, "The schedule of spec nightly is paused.") {
			notices++
		}
	}
	if notices != 1 {
		t.Fatalf("%d notices on the run's issue, want 1", notices)
	}
	s := f.surface(t, f.config(1))
	if err := s.Notice(ctx, "run-8", "run-8/failed", "Run run-8 failed."); err != nil {
		t.Fatal(err)
	}
	cs := f.srv.Comments(testRepo, 1)
	if len(cs) == 0 || !strings.Contains(cs[len(cs)-1].Body, "Run run-8 failed.") {
		t.Fatalf("comments on the configured issue: %+v", cs)
	}
}
