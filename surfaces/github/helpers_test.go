package github

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

const (
	testRepo  = "acme/app"
	testToken = "ghp_testtoken"
	waitLong  = time.Minute
)

// fixture is a fake GitHub with the people tests act as: alice may answer
// (write), mallory may not (read), and the Refs its surfaces share, as
// serve's share the store's.
type fixture struct {
	t    *testing.T
	srv  *githubtest.Server
	refs *memRefs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := githubtest.NewServer(t)
	srv.RequireToken(testToken)
	srv.SetPermission("alice", "write")
	srv.SetPermission("maintainer-mo", "maintain")
	srv.SetPermission("mallory", "read")
	srv.CreateIssue(testRepo, "Questions") // issue 1
	return &fixture{t: t, srv: srv, refs: newMemRefs()}
}

// config is a surface configuration for the fake, polling fast.
func (f *fixture) config(issue int) Config {
	return Config{
		ClientConfig: ClientConfig{
			BaseURL:       f.srv.URL(),
			Token:         testToken,
			PollInterval:  20 * time.Millisecond,
			WriteInterval: -1,
			backoff:       10 * time.Millisecond,
			Refs:          f.refs,
		},
		SurfaceConfig: SurfaceConfig{Repo: testRepo, Issue: issue},
	}
}

// surface returns a new surface (a new process, as far as state goes).
func (f *fixture) surface(t *testing.T, cfg Config) *Surface {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// questionComments returns the question comments of set, wherever posted.
func (f *fixture) questionComments(set questions.Set) []githubtest.Comment {
	marker := questionMarker(set, 1, 1)
	var out []githubtest.Comment
	for _, is := range f.srv.Issues(testRepo) {
		for _, c := range f.srv.Comments(testRepo, is.Number) {
			if strings.Contains(c.Body, marker) {
				out = append(out, c)
			}
		}
	}
	return out
}

// shown is what the issue of set shows about it: its question comment(s)
// as they now are, and the replies naming its questions.
func (f *fixture) shown(set questions.Set) string {
	var b strings.Builder
	for _, q := range f.questionComments(set) {
		for _, c := range f.srv.Comments(testRepo, q.Issue) {
			about := c.ID == q.ID
			for _, qq := range set.Questions {
				about = about || strings.Contains(c.Body, "`"+qq.ID+"`")
			}
			if about {
				b.WriteString(c.Body)
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// waitAsked waits until set is posted and returns its question comment.
func (f *fixture) waitAsked(t testing.TB, set questions.Set) githubtest.Comment {
	t.Helper()
	var c githubtest.Comment
	f.srv.WaitFor(t, waitLong, "question "+set.ID+" posted", func() bool {
		cs := f.questionComments(set)
		if len(cs) > 0 {
			c = cs[0]
		}
		return len(cs) > 0
	})
	return c
}

// answerBody writes answers the way a person would: "/answer QID answer",
// one line per question, or bare lines when bare is set (a quote reply of
// the question for words given to a question with options: a bare comment
// in words answers only a question that asks for words only).
func answerBody(set questions.Set, answers []questions.Answer, bare bool) string {
	var lines []string
	for i, a := range answers {
		v := a.Text
		if len(a.Labels) > 0 {
			v = strings.Join(a.Labels, ", ")
		}
		switch {
		case bare && len(a.Labels) == 0 && len(set.Questions[i].Options) > 0:
			lines = append([]string{"> " + strings.TrimSpace(strings.SplitN(set.Questions[i].Text, "\n", 2)[0]), ""}, lines...)
			lines = append(lines, v)
		case bare:
			lines = append(lines, v)
		default:
			lines = append(lines, fmt.Sprintf("/answer %s %s", set.Questions[i].ID, v))
		}
	}
	return strings.Join(lines, "\n")
}

// askResult is what became of an Ask: the set's answer once the store
// (surfacetest.Answers) has it, or the error Ask returned.
type askResult struct {
	resp questions.Response
	err  error
}

// pending returns Answers where set waits for an answer.
func pending(set questions.Set) *surfacetest.Answers {
	a := surfacetest.NewAnswers()
	a.Add(set)
	return a
}

// startAsk runs Ask in a goroutine, offering to Answers of its own.
func startAsk(ctx context.Context, s *Surface, set questions.Set) <-chan askResult {
	return startAskWith(ctx, s, set, pending(set))
}

// startAskWith runs Ask in a goroutine, offering to answers; the channel
// delivers what Ask returned and, once it returned nil (the set is closed,
// and shown so), the set's answer.
func startAskWith(ctx context.Context, s *Surface, set questions.Set, answers *surfacetest.Answers) <-chan askResult {
	ch := make(chan askResult, 1)
	go func() {
		err := s.Ask(ctx, set, answers)
		if r, ok := answers.Final(set.ID); ok && err == nil {
			ch <- askResult{resp: r}
			return
		}
		ch <- askResult{err: err}
	}()
	return ch
}

func waitResult(t *testing.T, ch <-chan askResult) askResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitLong):
		t.Fatal("Ask did not return")
		return askResult{}
	}
}

// notReturned checks that Ask is still waiting after the surface had time
// to poll a few times.
func notReturned(t *testing.T, ch <-chan askResult, f *fixture) {
	t.Helper()
	f.waitPolls(t, 3)
	select {
	case r := <-ch:
		t.Fatalf("Ask returned %+v, %v; want it still waiting", r.resp, r.err)
	default:
	}
}

// waitPolls waits for n more repository-wide comment listings.
func (f *fixture) waitPolls(t testing.TB, n int) {
	t.Helper()
	start := f.polls()
	f.srv.WaitFor(t, waitLong, fmt.Sprintf("%d polls", n), func() bool { return f.polls() >= start+n })
}

func (f *fixture) polls() int {
	n := 0
	for _, r := range f.srv.Requests() {
		if r.Method == "GET" && r.Path == "/repos/"+testRepo+"/issues/comments" {
			n++
		}
	}
	return n
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// eventually waits for cond on state outside the fake server.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", waitLong, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitWaiting waits until s's Ask on issue 1 of testRepo has registered
// its waiter (it does after listing and posting) and its poller has
// learnt the repository's ID (its one request at start): from then on
// only a delivery or a poll brings the answer.
func waitWaiting(t *testing.T, s *Surface) {
	t.Helper()
	eventually(t, "the Ask's waiter and the repository's ID", func() bool {
		p := s.c.lookupPoller(testRepo)
		if p == nil || len(p.waitersFor(1)) != 1 {
			return false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.id != 0
	})
}
