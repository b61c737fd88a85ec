package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fakeStarter starts runs in a fakeBackend: one per person and key, as the
// store does.
type fakeStarter struct {
	be   *fakeBackend
	mu   sync.Mutex
	keys map[[2]string][2]string // by, key → body hash, run ID
	n    int
	reqs []StartRequest
}

func (s *fakeStarter) Specs(ctx context.Context) ([]string, error) {
	return []string{"nightly", "weekly"}, nil
}

func (s *fakeStarter) Start(ctx context.Context, req StartRequest) (Started, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Spec != "" && req.Spec != "nightly" && req.Spec != "weekly" {
		return Started{}, fmt.Errorf("spec %s: %w", req.Spec, ErrUnknownSpec)
	}
	k := [2]string{req.By, req.Key}
	if req.Key != "" {
		if got, ok := s.keys[k]; ok {
			if got[0] != req.BodySHA256 {
				return Started{}, ErrKeyReused
			}
			return Started{RunID: got[1], Replayed: true}, nil
		}
	}
	s.n++
	id := fmt.Sprintf("started-%d", s.n)
	s.be.addRun(Run{ID: id, Spec: req.Spec, Title: req.Spec + req.Prompt, Status: "queued"})
	if req.Key != "" {
		s.keys[k] = [2]string{req.BodySHA256, id}
	}
	s.reqs = append(s.reqs, req)
	return Started{RunID: id}, nil
}

func (s *fakeStarter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

const (
	carolToken = "orw_carol-test-token-not-a-secret"
	daveToken  = "orw_dave-test-token-not-a-secret"
)

// newStartFixture: alice may start specs (run), carol prompts too
// (prompt), bob only answers (the default role).
func newStartFixture(t *testing.T) (*fixture, *fakeStarter) {
	t.Helper()
	var st *fakeStarter
	f := newFixture(t, func(c *Config) {
		st = &fakeStarter{be: c.Backend.(*fakeBackend), keys: map[[2]string][2]string{}}
		c.Start = st
		c.Users = []User{
			{Name: "alice", TokenSHA256: HashToken(aliceToken), Role: RoleRun},
			{Name: "bob", TokenSHA256: HashToken(bobToken)},
			{Name: "carol", TokenSHA256: HashToken(carolToken), Role: RolePrompt},
		}
	})
	return f, st
}

type startReply struct {
	V     int    `json:"v"`
	Error string `json:"error"`
	Run   struct {
		ID     string `json:"id"`
		Spec   string `json:"spec"`
		Status string `json:"status"`
	} `json:"run"`
}

func (f *fixture) startAPI(token, key, body string) (result, startReply) {
	f.t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	r := f.do(nil, "POST", "/api/runs", body, h)
	var rep startReply
	if err := json.Unmarshal([]byte(r.body), &rep); err != nil {
		f.t.Fatalf("POST /api/runs: %d, not JSON: %v\n%s", r.status, err, r.body)
	}
	return r, rep
}

// POST /api/runs twice with one Idempotency-Key gives one run; the same
// key with another body is refused (422), as Stripe does; another key, or
// none, is another run.
func TestAPIStartRunIdempotencyKey(t *testing.T) {
	f, st := newStartFixture(t)
	r1, a := f.startAPI(aliceToken, "retry-me-1", `{"spec":"nightly"}`)
	if r1.status != http.StatusCreated || a.Run.ID == "" || a.Run.Status != "queued" || a.Run.Spec != "nightly" || r1.header.Get("Location") != "/api/runs/"+a.Run.ID {
		t.Fatalf("first POST: %d %s (Location %q)", r1.status, r1.body, r1.header.Get("Location"))
	}
	r2, b := f.startAPI(aliceToken, "retry-me-1", `{ "spec": "nightly" }`)
	if r2.status != http.StatusOK || b.Run.ID != a.Run.ID || r2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s, want 200 with run %s replayed", r2.status, r2.body, a.Run.ID)
	}
	if n := st.count(); n != 1 {
		t.Fatalf("%d runs started for one key, want 1", n)
	}
	if r, rep := f.startAPI(aliceToken, "retry-me-1", `{"spec":"weekly"}`); r.status != http.StatusUnprocessableEntity || !strings.Contains(rep.Error, "Idempotency-Key was used for another request") {
		t.Errorf("same key, another body: %d %s, want 422", r.status, r.body)
	}
	if r, rep := f.startAPI(aliceToken, "retry-me-2", `{"spec":"nightly"}`); r.status != http.StatusCreated || rep.Run.ID == a.Run.ID {
		t.Errorf("another key: %d %s, want a new run", r.status, r.body)
	}
	if r, _ := f.startAPI(aliceToken, "", `{"spec":"nightly"}`); r.status != http.StatusCreated {
		t.Errorf("no key: %d %s, want a new run", r.status, r.body)
	}
	if n := st.count(); n != 3 {
		t.Errorf("%d runs started, want 3", n)
	}
	for _, req := range st.reqs {
		if req.By != "alice" {
			t.Errorf("run started by %q, want alice", req.By)
		}
	}
}

// Without a web user's token: 401; a role that does not allow it: 403;
// bad requests: 400 and 422, saying what is wrong.
func TestAPIStartRunRefusals(t *testing.T) {
	f, st := newStartFixture(t)
	for name, tc := range map[string]struct {
		token, key, body string
		status           int
		msg              string
	}{
		"no token":         {"", "k", `{"spec":"nightly"}`, 401, "sign in first"},
		"unknown token":    {daveToken, "k", `{"spec":"nightly"}`, 401, "unknown token"},
		"answer role":      {bobToken, "k", `{"spec":"nightly"}`, 403, `bob may not start a run of a spec: their role is "answer" and this needs "run"`},
		"prompt, run role": {aliceToken, "k", `{"prompt":"fix the build"}`, 403, `alice may not start a run of a prompt of their own: their role is "run" and this needs "prompt"`},
		"both":             {carolToken, "k", `{"spec":"nightly","prompt":"x"}`, 400, "not both"},
		"neither":          {carolToken, "k", `{}`, 400, "give a spec"},
		"unknown field":    {carolToken, "k", `{"specs":"nightly"}`, 400, "unknown field"},
		"unknown spec":     {aliceToken, "k", `{"spec":"../../etc/passwd"}`, 422, "no such spec in specs.dir"},
		"key too long":     {aliceToken, strings.Repeat("k", 256), `{"spec":"nightly"}`, 400, "Idempotency-Key: want at most 255"},
		"key not ASCII":    {aliceToken, "clé", `{"spec":"nightly"}`, 400, "Idempotency-Key"},
	} {
		r, rep := f.startAPI(tc.token, tc.key, tc.body)
		if r.status != tc.status || !strings.Contains(rep.Error, tc.msg) {
			t.Errorf("%s: %d %s, want %d with %q", name, r.status, r.body, tc.status, tc.msg)
		}
	}
	if n := st.count(); n != 0 {
		t.Fatalf("%d runs started by refused requests", n)
	}
	// carol may start a prompt.
	if r, rep := f.startAPI(carolToken, "k", `{"prompt":"fix the build"}`); r.status != 201 || rep.Run.ID == "" {
		t.Fatalf("carol's prompt: %d %s", r.status, r.body)
	}
	// Without a Starter there is no such endpoint.
	plain := newFixture(t, nil)
	if r := plain.do(nil, "POST", "/api/runs", `{"spec":"nightly"}`, bearer(aliceToken)); r.status != http.StatusMethodNotAllowed && r.status != http.StatusNotFound {
		t.Errorf("without a Starter: %d, want no endpoint", r.status)
	}
}

// The inbox shows "Start a run" to whom may: the specs, and a prompt for
// the prompt role; the form (CSRF-protected) starts one run, sent twice
// still one, and leads to its page.
func TestInboxStartRunForm(t *testing.T) {
	f, st := newStartFixture(t)
	bob, _ := f.signIn(bobToken)
	if page := f.do(bob, "GET", "/", "", nil); strings.Contains(page.body, "Start a run") {
		t.Errorf("bob (answer role) sees the start form")
	}
	alice, _ := f.signIn(aliceToken)
	page := f.do(alice, "GET", "/", "", nil)
	if !strings.Contains(page.body, `<option value="nightly">`) || strings.Contains(page.body, `id="start-prompt"`) {
		t.Errorf("alice's start form: want the specs and no prompt:\n%s", page.body)
	}
	carol, csrf := f.signIn(carolToken)
	page = f.do(carol, "GET", "/", "", nil)
	if !strings.Contains(page.body, `id="start-prompt"`) || !strings.Contains(page.body, `<option value="weekly">`) {
		t.Fatalf("carol's start form: want the specs and a prompt:\n%s", page.body)
	}
	key := keyOf(t, page.body)
	post := func(v url.Values) result {
		body, h := form(v)
		h["Sec-Fetch-Site"] = "same-origin"
		return f.do(carol, "POST", "/runs", body, h)
	}
	if r := post(url.Values{"key": {key}, "spec": {"weekly"}}); r.status != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d, want 403", r.status)
	}
	r1 := post(url.Values{"csrf": {csrf}, "key": {key}, "spec": {"weekly"}})
	r2 := post(url.Values{"csrf": {csrf}, "key": {key}, "spec": {"weekly"}})
	loc := r1.header.Get("Location")
	if r1.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/runs/started-") || r2.header.Get("Location") != loc {
		t.Fatalf("start twice: %d %q, %d %q; want one run's page", r1.status, loc, r2.status, r2.header.Get("Location"))
	}
	if n := st.count(); n != 1 {
		t.Fatalf("%d runs started by the form sent twice, want 1", n)
	}
	if r := f.do(carol, "GET", loc, "", nil); r.status != 200 || !strings.Contains(r.body, "queued") {
		t.Errorf("the run's page: %d\n%s", r.status, r.body)
	}
	if r := post(url.Values{"csrf": {csrf}, "key": {"another"}, "spec": {"nope"}}); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "no such spec") {
		t.Errorf("unknown spec from the form: %d\n%s", r.status, r.body)
	}
}

// keyOf is the start form's Idempotency-Key in a page.
func keyOf(t *testing.T, s string) string {
	t.Helper()
	i := strings.Index(s, `name="key" value="`)
	if i < 0 {
		t.Fatal("no start form's key in the page")
	}
	rest := s[i+len(`name="key" value="`):]
	return rest[:strings.IndexByte(rest, '"')]
}
