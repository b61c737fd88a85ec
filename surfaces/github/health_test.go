package github

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// logCount counts log records by level and message.
type logCount struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }

func (l *logCount) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}

// A GitHub that holds a request unanswered fails it within the request
// timeout, and the surface reports itself unhealthy; once GitHub answers
// again, the question is asked (posted once) and its answer taken.
func TestHungGitHubMakesTheSurfaceUnhealthy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(1)
	cfg.RequestTimeout = 300 * time.Millisecond
	s := f.surface(t, cfg)
	if err := s.Health(); err != nil {
		t.Fatalf("Health before any request = %v, want nil", err)
	}

	// Posting the question hangs (as if for ten minutes).
	post := "/repos/" + testRepo + "/issues/1/comments"
	release := f.srv.Hang(http.MethodPost, post)
	defer release()
	set := surfacetest.SingleChoice("hung-post")
	ctx := ctxTimeout(t)
	err := s.Ask(ctx, set, pending(set))
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Ask while GitHub holds the post = %v (ctx %v), want an error of its own", err, ctx.Err())
	}
	herr := s.Health()
	if herr == nil || !strings.Contains(herr.Error(), "did not answer") {
		t.Fatalf("Health while GitHub holds the post = %v, want that GitHub did not answer", herr)
	}
	if n := len(f.questionComments(set)); n != 0 {
		t.Fatalf("%d question comments while the post was held", n)
	}

	// GitHub answers again: asked again (as the runner does after a
	// failed Ask), the question is posted once and the answer taken.
	release()
	ch := startAsk(ctx, s, set)
	c := f.waitAsked(t, set)
	eventually(t, "healthy once GitHub answers the post", func() bool { return s.Health() == nil })

	// A poll held: unhealthy again, then the answer is read once it is
	// released.
	list := "/repos/" + testRepo + "/issues/comments"
	release = f.srv.Hang(http.MethodGet, list)
	eventually(t, "the surface reports the held poll", func() bool { return s.Health() != nil })
	f.srv.AddComment(testRepo, c.Issue, "alice", "2")
	release()
	r := waitResult(t, ch)
	if r.err != nil || len(r.resp.Answers) != 1 {
		t.Fatalf("Ask = %+v, %v; want the answer", r.resp, r.err)
	}
	eventually(t, "healthy once the poll is answered", func() bool { return s.Health() == nil })
	if n := len(f.questionComments(set)); n != 1 {
		t.Errorf("the question was posted %d times, want once", n)
	}
}

// A poll GitHub keeps refusing (403, 410) makes the surface unhealthy with
// one error logged, not a warning at every interval; the Ask goes on
// waiting, and takes its answer once the polls are served again.
func TestLastingPollRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status  int
		message string
	}{
		{http.StatusForbidden, "Resource not accessible by integration"},
		{http.StatusGone, "Issues are disabled for this repo"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			logs := &logCount{}
			cfg := f.config(1)
			cfg.Logger = slog.New(logs)
			s := f.surface(t, cfg)
			set := surfacetest.SingleChoice("refused")
			ch := startAsk(ctxTimeout(t), s, set)
			c := f.waitAsked(t, set)
			f.waitPolls(t, 2)
			stop := f.srv.Refuse(http.MethodGet, "/repos/"+testRepo+"/issues/comments", tc.status, tc.message)
			f.waitPolls(t, 10)
			err := s.Health()
			if err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("Health while polls are refused = %v, want the refusal", err)
			}
			if err := s.c.Health(); err == nil {
				t.Errorf("the client's Health while polls are refused = nil")
			}
			if n := logs.count(slog.LevelError, "refuses"); n != 1 {
				t.Errorf("%d errors logged for 10 refused polls, want 1", n)
			}
			if n := logs.count(slog.LevelWarn, "poll failed"); n != 0 {
				t.Errorf("%d warnings logged for refused polls, want none", n)
			}
			select {
			case r := <-ch:
				t.Fatalf("Ask returned %+v, %v while polls were refused; want it waiting", r.resp, r.err)
			default:
			}
			stop()
			f.srv.AddComment(testRepo, c.Issue, "alice", "3")
			r := waitResult(t, ch)
			if r.err != nil {
				t.Fatalf("Ask = %v, want the answer", r.err)
			}
			eventually(t, "healthy once polls are served", func() bool { return s.Health() == nil })
			if n := logs.count(slog.LevelInfo, "polling works again"); n != 1 {
				t.Errorf("%d notes that polling works again, want 1", n)
			}
		})
	}
}
