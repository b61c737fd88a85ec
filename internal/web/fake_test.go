package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// fakeBackend is an in-memory Backend: answers are validated with
// surfacetest.ValidResponse and the first valid one wins, as in the store.
type fakeBackend struct {
	mu         sync.Mutex
	sets       map[string]*fakeSet
	runs       map[string]*RunDetail
	offers     int
	transcript string
}

type fakeSet struct {
	Pending
	final *questions.Response
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{sets: map[string]*fakeSet{}, runs: map[string]*RunDetail{}}
}

func (f *fakeBackend) addRun(r Run) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[r.ID] = &RunDetail{Run: r}
}

func (f *fakeBackend) ask(set questions.Set, at time.Time, surfaces ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[set.ID] = &fakeSet{Pending: Pending{Set: set, Surfaces: surfaces, AskedAt: at, RunTitle: "run " + set.RunID}}
	if r := f.runs[set.RunID]; r != nil {
		r.Status = "waiting"
		s := set
		r.Items = append(r.Items, Item{Kind: ItemQuestion, Turn: set.Turn, Set: &s})
	}
}

func (f *fakeBackend) answerElsewhere(resp questions.Response) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[resp.SetID].final = &resp
}

func (f *fakeBackend) final(setID string) *questions.Response {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sets[setID].final
}

func (f *fakeBackend) Pending(ctx context.Context) ([]Pending, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Pending
	for _, s := range f.sets {
		if s.final == nil {
			out = append(out, s.Pending)
		}
	}
	slices.SortFunc(out, func(a, b Pending) int { return strings.Compare(a.Set.ID, b.Set.ID) })
	return out, nil
}

func (f *fakeBackend) Runs(ctx context.Context) ([]Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Run
	for _, r := range f.runs {
		out = append(out, r.Run)
	}
	slices.SortFunc(out, func(a, b Run) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

func (f *fakeBackend) Run(ctx context.Context, id string) (RunDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return RunDetail{}, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	d := *r
	d.Items = slices.Clone(r.Items)
	return d, nil
}

func (f *fakeBackend) Offer(ctx context.Context, resp questions.Response) (Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offers++
	s, ok := f.sets[resp.SetID]
	if !ok {
		return Decision{}, fmt.Errorf("set %s: %w", resp.SetID, ErrNotFound)
	}
	if s.final != nil {
		return Decision{Closed: true, Final: s.final}, nil
	}
	ordered := resp
	ordered.Answers = nil
	for _, q := range s.Set.Questions {
		for _, a := range resp.Answers {
			if a.QuestionID == q.ID {
				ordered.Answers = append(ordered.Answers, a)
			}
		}
	}
	if err := surfacetest.ValidResponse(s.Set, ordered); err != nil {
		return Decision{Invalid: err}, nil
	}
	s.final = &ordered
	if r := f.runs[resp.SetID[:strings.IndexByte(resp.SetID, '-')]]; r != nil {
		r.Status = "running"
	}
	return Decision{Taken: true, Closed: true, Final: &ordered}, nil
}

func (f *fakeBackend) Cancel(ctx context.Context, runID, by string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[runID]
	if !ok {
		return fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	if final(r.Status) {
		return fmt.Errorf("run %s is %w", runID, ErrFinal)
	}
	r.Status, r.Error = "cancelled", "cancelled by "+by+" on the web"
	return nil
}

func (f *fakeBackend) Transcript(ctx context.Context, runID string, seq int) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.runs[runID]; !ok || seq != 1 {
		return nil, ErrNotFound
	}
	return io.NopCloser(strings.NewReader(f.transcript)), nil
}

const (
	aliceToken = "orw_alice-test-token-not-a-secret"
	bobToken   = "orw_bob-test-token-not-a-secret"
)

// fixture: run r1 waits on set r1-s9f3e2d1c0ab (one single-select question), run r2
// on set r2-s1b2c3d4e5f6 (a multi-select and a free-text question); r3 is done.
type fixture struct {
	t    *testing.T
	be   *fakeBackend
	srv  *Server
	ts   *httptest.Server
	base time.Time
}

func authQuestion() questions.Question {
	return questions.Question{ID: "qa1", Header: "Auth", Text: "Which auth method?",
		Options: []questions.Option{{Label: "OAuth2", Description: "Use OAuth2"}, {Label: "JWT", Description: "Stateless"}}}
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	be := newFakeBackend()
	base := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	be.addRun(Run{ID: "r1", Spec: "nightly", Title: "Implement spec X", Status: "running", CostUSD: 0.0012, Turns: 1, CreatedAt: base, UpdatedAt: base})
	be.addRun(Run{ID: "r2", Spec: "weekly", Title: "Pick the libraries", Status: "running", Turns: 1, CreatedAt: base.Add(time.Minute), UpdatedAt: base.Add(time.Minute)})
	be.addRun(Run{ID: "r3", Spec: "nightly", Title: "Earlier run", Status: "done", CostUSD: 0.5, Turns: 2, CreatedAt: base.Add(-time.Hour), UpdatedAt: base.Add(-50 * time.Minute)})
	be.ask(questions.Set{ID: "r1-s9f3e2d1c0ab", RunID: "r1", Turn: 1, Questions: []questions.Question{authQuestion()}}, base.Add(2*time.Minute), "terminal", "github")
	be.ask(questions.Set{ID: "r2-s1b2c3d4e5f6", RunID: "r2", Turn: 1, Title: "Libraries", Context: "Pick **both**:\n\n```diff\n- old\n+ new\n```\n",
		Questions: []questions.Question{
			{ID: "qb1", Header: "Libs", Text: "Which libraries?", MultiSelect: true,
				Options: []questions.Option{{Label: "chi"}, {Label: "sqlc"}, {Label: "zap"}}},
			{ID: "qb2", Header: "Name", Text: "What should the package be called?"},
		}}, base.Add(3*time.Minute), "discord")
	cfg := Config{Backend: be, Users: []User{{Name: "alice", TokenSHA256: HashToken(aliceToken)}, {Name: "bob", TokenSHA256: HashToken(bobToken)}},
		Logger:         slog.New(slog.NewTextHandler(t.Output(), nil)),
		AnswerMaxBytes: 100, Poll: 20 * time.Millisecond, Now: func() time.Time { return base.Add(5 * time.Minute) }}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	srv.cfg.Done = done
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { close(done); ts.Close() })
	return &fixture{t: t, be: be, srv: srv, ts: ts, base: base}
}

// client is an HTTP client that follows no redirects, with a cookie jar.
func (f *fixture) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type result struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(c *http.Client, method, path, body string, header map[string]string) result {
	f.t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = f.client()
	}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, string(b)}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// signIn signs in with the form and returns the client holding the
// session, and the page's CSRF token.
func (f *fixture) signIn(tok string) (*http.Client, string) {
	f.t.Helper()
	c := f.client()
	r := f.do(c, "POST", "/signin", url.Values{"token": {tok}, "next": {"/"}}.Encode(),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if r.status != http.StatusSeeOther {
		f.t.Fatalf("sign in: %d %s", r.status, r.body)
	}
	page := f.do(c, "GET", "/", "", nil)
	if page.status != 200 {
		f.t.Fatalf("inbox after sign in: %d", page.status)
	}
	return c, csrfOf(f.t, page.body)
}

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	const k = `name="csrf" value="`
	i := strings.Index(body, k)
	if i < 0 {
		t.Fatalf("no CSRF token in the page")
	}
	rest := body[i+len(k):]
	return rest[:strings.IndexByte(rest, '"')]
}

func form(v url.Values) (string, map[string]string) {
	return v.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
}

func mustPrefix(t *testing.T, s string) netip.Prefix {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
