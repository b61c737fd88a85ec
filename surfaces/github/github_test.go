package github

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	good := Config{ClientConfig: ClientConfig{Token: "x"}, SurfaceConfig: SurfaceConfig{Repo: "a/b"}}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no auth", func(c *Config) { c.Token = "" }, "neither token nor app"},
		{"both auths", func(c *Config) { c.App = &AppAuth{ID: 1, InstallationID: 2, PrivateKey: []byte("k")} }, "both token and app"},
		{"bad repo", func(c *Config) { c.Repo = "nope" }, `repo "nope"`},
		{"repo with three parts", func(c *Config) { c.Repo = "a/b/c" }, `repo "a/b/c"`},
		{"bad base url", func(c *Config) { c.BaseURL = "ftp://x" }, "base_url"},
		{"negative issue", func(c *Config) { c.Issue = -1 }, "issue -1"},
		{"allow_only without allow", func(c *Config) { c.AllowOnly = true }, "allow_only"},
		{"app without key", func(c *Config) { c.Token = ""; c.App = &AppAuth{ID: 1, InstallationID: 2} }, "private_key_file"},
		{"app with missing key file", func(c *Config) {
			c.Token = ""
			c.App = &AppAuth{ID: 1, InstallationID: 2, PrivateKeyFile: filepath.Join(t.TempDir(), "missing.pem")}
		}, "read private key"},
		{"app with a bad key", func(c *Config) {
			c.Token = ""
			c.App = &AppAuth{ID: 1, InstallationID: 2, PrivateKey: []byte("not a key")}
		}, "private key"},
		{"negative poll interval", func(c *Config) { c.PollInterval = -time.Second }, "poll_interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.edit(&cfg)
			s, err := New(cfg)
			if err == nil {
				s.Close()
				t.Fatalf("New succeeded, want an error mentioning %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %q, want it to mention %q", err, tt.want)
			}
		})
	}
	s, err := New(good)
	if err != nil {
		t.Fatalf("New(good) = %v", err)
	}
	s.Close()
}

func TestStrangerIgnoredAndToldOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("stranger")
	ch := startAsk(ctxTimeout(t), s, set)
	q := f.waitAsked(t, set)

	f.srv.AddComment(testRepo, 1, "mallory", "1")
	f.srv.AddComment(testRepo, 1, "mallory", "2")
	notReturned(t, ch, f)

	notices := 0
	for _, c := range f.srv.Comments(testRepo, 1) {
		if strings.Contains(c.Body, "only people with write access") {
			notices++
			if !strings.Contains(c.Body, "@mallory") {
				t.Errorf("notice does not address the stranger: %q", c.Body)
			}
		}
	}
	if notices != 1 {
		t.Errorf("%d notices to the stranger, want exactly one", notices)
	}
	for _, c := range f.srv.Comments(testRepo, 1) {
		if len(f.srv.Reactions(testRepo, c.ID)) > 0 {
			t.Errorf("comment %d by %s got reactions %v; a stranger's answer changes nothing", c.ID, c.Login, f.srv.Reactions(testRepo, c.ID))
		}
	}
	if got, _ := f.srv.Comment(testRepo, q.ID); got.Edited() {
		t.Errorf("question comment edited after a stranger's reply: %q", got.Body)
	}

	// The maintain role may answer.
	f.srv.AddComment(testRepo, 1, "maintainer-mo", "SQLite")
	r := waitResult(t, ch)
	if r.err != nil || r.resp.By != "@maintainer-mo" {
		t.Fatalf("Ask = %+v, %v; want the maintainer's answer", r.resp, r.err)
	}
}

func TestAllowlist(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		allow     []string
		allowOnly bool
		answerer  string // the first to answer who is taken
		ignored   []string
	}{
		{"allowlist adds a reader", []string{"@Mallory"}, false, "mallory", nil},
		{"allow_only excludes writers", []string{"bob"}, true, "bob", []string{"alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cfg := f.config(1)
			cfg.Allow, cfg.AllowOnly = tt.allow, tt.allowOnly
			s := f.surface(t, cfg)
			set := surfacetest.SingleChoice("allow")
			ch := startAsk(ctxTimeout(t), s, set)
			f.waitAsked(t, set)
			for _, login := range tt.ignored {
				f.srv.AddComment(testRepo, 1, login, "1")
			}
			if len(tt.ignored) > 0 {
				notReturned(t, ch, f)
			}
			f.srv.AddComment(testRepo, 1, tt.answerer, "MySQL")
			r := waitResult(t, ch)
			if r.err != nil || r.resp.By != "@"+tt.answerer {
				t.Fatalf("Ask = %+v, %v; want %s's answer", r.resp, r.err, tt.answerer)
			}
		})
	}
}

func TestBotsIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.SetPermission("dependabot[bot]", "write")
	f.srv.SetPermission("ci-robot", "admin")
	f.srv.SetBot("ci-robot")
	s := f.surface(t, f.config(1))
	set := surfacetest.FreeText("bots")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	f.srv.AddComment(testRepo, 1, "dependabot[bot]", "bump everything")
	f.srv.AddComment(testRepo, 1, "ci-robot", "build passed")
	notReturned(t, ch, f)
	if n := len(f.srv.Comments(testRepo, 1)); n != 3 {
		t.Errorf("%d comments on the issue, want 3 (the question and the bots': no reply to bots)", n)
	}
	f.srv.AddComment(testRepo, 1, "alice", "orchestrate")
	if r := waitResult(t, ch); r.err != nil || r.resp.Answers[0].Text != "orchestrate" {
		t.Fatalf("Ask = %+v, %v; want alice's answer", r.resp, r.err)
	}
}

// Under a personal access token the orchestrator posts as the human whose
// token it is: its own comments must be recognised by their marker.
func TestOwnCommentsIgnoredUnderSharedLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.SetBotLogin("alice") // alice has write permission
	s := f.surface(t, f.config(1))
	set := surfacetest.FreeText("own")
	ch := startAsk(ctxTimeout(t), s, set)
	q := f.waitAsked(t, set)
	if q.Login != "alice" {
		t.Fatalf("question posted as %q, want alice (the token's owner)", q.Login)
	}
	// A stranger makes the orchestrator post a notice, as alice too.
	f.srv.AddComment(testRepo, 1, "mallory", "anything")
	f.srv.WaitFor(t, waitLong, "notice", func() bool { return len(f.srv.Comments(testRepo, 1)) == 3 })
	// A reminder, as alice.
	if err := s.Remind(ctxTimeout(t), set); err != nil {
		t.Fatalf("Remind: %v", err)
	}
	notReturned(t, ch, f)

	f.srv.AddComment(testRepo, 1, "alice", "the real answer")
	r := waitResult(t, ch)
	if r.err != nil || r.resp.Answers[0].Text != "the real answer" {
		t.Fatalf("Ask = %+v, %v; want alice's real reply", r.resp, r.err)
	}
}

func TestEditedCommentDoesNotCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("edit")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)

	bad := f.srv.AddComment(testRepo, 1, "alice", "9") // an attempt (an option number), not one of the options
	f.srv.WaitFor(t, waitLong, "invalid-answer reply", func() bool {
		for _, c := range f.srv.Comments(testRepo, 1) {
			if strings.Contains(c.Body, "could not be read") {
				for _, v := range []string{"`1`", "`Postgres`", "`SQLite`"} {
					if !strings.Contains(c.Body, v) {
						t.Errorf("invalid-answer reply does not list %s: %q", v, c.Body)
					}
				}
				return true
			}
		}
		return false
	})
	f.srv.EditComment(testRepo, bad, "1")
	notReturned(t, ch, f)

	good := f.srv.AddComment(testRepo, 1, "alice", "2")
	r := waitResult(t, ch)
	if r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{"SQLite"}) {
		t.Fatalf("Ask = %+v, %v; want SQLite from the new comment", r.resp, r.err)
	}
	if got := f.srv.Reactions(testRepo, good); !slices.Equal(got, []string{"eyes"}) {
		t.Errorf("reactions on the answer = %v, want [eyes]", got)
	}
	if got := f.srv.Reactions(testRepo, bad); len(got) != 0 {
		t.Errorf("reactions on the edited comment = %v, want none", got)
	}
}

func TestConditionalPolling(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("etag")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	f.waitPolls(t, 3)
	f.srv.AddComment(testRepo, 1, "alice", "1")
	waitResult(t, ch)

	var polls []githubtest.Request
	for _, r := range f.srv.Requests() {
		if r.Path == "/repos/"+testRepo+"/issues/comments" {
			polls = append(polls, r)
		}
	}
	if len(polls) < 3 {
		t.Fatalf("%d polls, want at least 3", len(polls))
	}
	if polls[0].IfNoneMatch != "" || polls[0].Status != http.StatusOK {
		t.Errorf("first poll: If-None-Match %q, status %d; want none and 200", polls[0].IfNoneMatch, polls[0].Status)
	}
	if polls[1].IfNoneMatch == "" || polls[1].Status != http.StatusNotModified {
		t.Errorf("second poll: If-None-Match %q, status %d; want an ETag and 304", polls[1].IfNoneMatch, polls[1].Status)
	}
	if !strings.Contains(polls[1].RawQuery, "since=") {
		t.Errorf("poll query %q has no since", polls[1].RawQuery)
	}
}

// One request per repository per interval, whatever the number of sets
// waiting, and whatever the number of surfaces on the client.
func TestOnePollerPerRepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.CreateIssue(testRepo, "two")
	cfg := f.config(0)
	c, err := NewClient(cfg.ClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := ctxTimeout(t)
	var chs []<-chan askResult
	for i, issue := range []int{1, 1, 2, 2} {
		s, err := c.Surface(SurfaceConfig{Repo: testRepo, Issue: issue})
		if err != nil {
			t.Fatal(err)
		}
		set := surfacetest.SingleChoice("many-" + string(rune('a'+i)))
		chs = append(chs, startAsk(ctx, s, set))
		f.waitAsked(t, set)
	}
	f.waitPolls(t, 2)
	c.mu.Lock()
	n := len(c.pollers)
	c.mu.Unlock()
	if n != 1 {
		t.Errorf("%d pollers, want 1 for one repository", n)
	}
	// Nobody answered: every Ask still waits.
	for i, ch := range chs {
		select {
		case r := <-ch:
			t.Errorf("Ask %d returned before an answer: %+v", i, r)
		default:
		}
	}
	// Polls are one per interval, not one per waiting set.
	polls := f.srv.Requests()
	var times []time.Time
	for _, r := range polls {
		if r.Path == "/repos/"+testRepo+"/issues/comments" {
			times = append(times, r.At)
		}
	}
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < 15*time.Millisecond {
			t.Errorf("polls %d and %d are %v apart, want one per interval (20ms)", i-1, i, d)
		}
	}
}

// sleepRecorder is a sleep that records the durations it is asked for and
// does not wait (beyond a short pause, so polling does not spin).
type sleepRecorder struct {
	mu    sync.Mutex
	sleep []time.Duration
}

func (r *sleepRecorder) Sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.sleep = append(r.sleep, d)
	r.mu.Unlock()
	return retry.Sleep(ctx, min(d, 20*time.Millisecond))
}

// has reports whether a sleep of about d (within a second under it) was
// asked for.
func (r *sleepRecorder) has(d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.sleep, func(s time.Duration) bool { return s > d-time.Second && s <= d })
}

func TestSecondaryRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		wait   time.Duration
	}{
		{"403 with Retry-After", http.StatusForbidden, nil, "", 7 * time.Second},
		{"429 with Retry-After", http.StatusTooManyRequests, nil, "", 7 * time.Second},
		{"429 without headers", http.StatusTooManyRequests, http.Header{}, `{"message":"slow down"}`, time.Minute},
		{"403 secondary without headers", http.StatusForbidden, http.Header{}, `{"message":"You have exceeded a secondary rate limit."}`, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			path := "/repos/" + testRepo + "/issues/1/comments"
			if tt.header == nil {
				f.srv.SecondaryRateLimit("POST", path, tt.status, 7)
			} else {
				f.srv.Fail("POST", path, tt.status, tt.header, tt.body)
			}
			rec := &sleepRecorder{}
			cfg := f.config(1)
			cfg.sleep = rec.Sleep
			s := f.surface(t, cfg)
			set := surfacetest.SingleChoice("limited")
			ch := startAsk(ctxTimeout(t), s, set)
			f.waitAsked(t, set)
			f.srv.AddComment(testRepo, 1, "alice", "1")
			if r := waitResult(t, ch); r.err != nil {
				t.Fatalf("Ask = %v, want an answer after the rate limit", r.err)
			}
			if !rec.has(tt.wait) {
				t.Errorf("sleeps %v, want one of %v", rec.sleep, tt.wait)
			}
			if n := len(f.questionComments(set)); n != 1 {
				t.Errorf("question posted %d times, want once", n)
			}
			var statuses []int
			for _, r := range f.srv.Requests() {
				if r.Method == "POST" && r.Path == path {
					statuses = append(statuses, r.Status)
				}
			}
			if !slices.Equal(statuses[:2], []int{tt.status, http.StatusCreated}) {
				t.Errorf("POST statuses %v, want %d then 201", statuses, tt.status)
			}
		})
	}
}

func TestForbiddenIsNotARateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.Fail("POST", "/repos/"+testRepo+"/issues/1/comments", http.StatusForbidden, http.Header{},
		`{"message":"Resource not accessible by integration"}`)
	rec := &sleepRecorder{}
	cfg := f.config(1)
	cfg.sleep = rec.Sleep
	s := f.surface(t, cfg)
	set := surfacetest.SingleChoice("forbidden")
	err := s.Ask(ctxTimeout(t), set, pending(set))
	if err == nil || !strings.Contains(err.Error(), "Resource not accessible") {
		t.Fatalf("Ask = %v, want the 403 error", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPrimaryRateLimitWaitsForReset(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	rec := &sleepRecorder{}
	calls := 0
	rt := &rateLimitTransport{
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			h := http.Header{}
			if calls == 1 {
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset", "1700000100")
				return &http.Response{StatusCode: http.StatusForbidden, Header: h, Body: http.NoBody, Request: r}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}, nil
		}),
		sleep: rec.Sleep, now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler), maxWait: time.Hour, retries: 3,
	}
	req := httptest.NewRequest("POST", "http://127.0.0.1/x", strings.NewReader(`{"body":"hi"}`))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(`{"body":"hi"}`)), nil }
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("RoundTrip = %v, %v; want 200 after waiting", resp, err)
	}
	if !rec.has(101 * time.Second) {
		t.Errorf("sleeps %v, want 101s (until X-RateLimit-Reset, plus a second)", rec.sleep)
	}
}

func TestWebhook(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	cfg := f.config(1)
	cfg.PollInterval = time.Hour // only the webhook can bring the answer
	cfg.WebhookSecret = secret
	s := f.surface(t, cfg)
	h, err := s.WebhookHandler()
	if err != nil {
		t.Fatal(err)
	}
	set := surfacetest.SingleChoice("hook")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	waitWaiting(t, s)
	answer := f.srv.AddComment(testRepo, 1, "alice", "3")
	payload := f.srv.IssueCommentEvent(testRepo, answer, "created")

	deliver := func(sig, delivery string) int {
		req := httptest.NewRequest("POST", "/webhook", bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", delivery)
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	before := len(f.srv.Requests())
	for _, sig := range []string{"", "sha256=00", githubtest.Signature("wrong", payload), "sha1=" + githubtest.Signature(secret, payload)[7:]} {
		if code := deliver(sig, "d-bad"); code != http.StatusUnauthorized {
			t.Errorf("signature %q: status %d, want 401", sig, code)
		}
	}
	select {
	case r := <-ch:
		t.Fatalf("Ask returned %+v after unsigned deliveries", r)
	default:
	}
	if after := len(f.srv.Requests()); after != before {
		t.Errorf("unsigned deliveries made %d API requests, want none", after-before)
	}

	good := githubtest.Signature(secret, payload)
	if code := deliver(good, "d-1"); code != http.StatusAccepted {
		t.Fatalf("valid delivery: status %d, want 202", code)
	}
	if code := deliver(good, "d-1"); code != http.StatusOK {
		t.Errorf("redelivery: status %d, want 200", code)
	}
	r := waitResult(t, ch)
	if r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{"MySQL"}) {
		t.Fatalf("Ask = %+v, %v; want MySQL from the webhook", r.resp, r.err)
	}
	f.srv.WaitFor(t, waitLong, "👀", func() bool { return len(f.srv.Reactions(testRepo, answer)) > 0 })
	if got := f.srv.Reactions(testRepo, answer); !slices.Equal(got, []string{"eyes"}) {
		t.Errorf("reactions %v, want one eyes", got)
	}
}

// TestWebhookWhereNothingWaits: a delivery reaching a client where no Ask
// waits — another `serve` instance than the leader, which asks and polls —
// is accepted and dropped: no API request, nothing decided. The answer
// reaches the asking client by its own poll (here: the same delivery sent
// to it, as a load balancer might have).
func TestWebhookWhereNothingWaits(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	cfg := f.config(1)
	cfg.PollInterval = time.Hour // only a webhook can bring the answer
	cfg.WebhookSecret = secret
	asker := f.surface(t, cfg)
	other := f.surface(t, cfg)
	set := surfacetest.SingleChoice("elsewhere")
	ch := startAsk(ctxTimeout(t), asker, set)
	f.waitAsked(t, set)
	// The asker's poller has its waiter and has learnt the repository's
	// ID (its one request at start): what is counted below is other's.
	waitWaiting(t, asker)
	answer := f.srv.AddComment(testRepo, 1, "alice", "3")
	payload := f.srv.IssueCommentEvent(testRepo, answer, "created")
	deliver := func(s *Surface) int {
		h, err := s.WebhookHandler()
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/webhook", bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", "d-1")
		req.Header.Set("X-Hub-Signature-256", githubtest.Signature(secret, payload))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	before := len(f.srv.Requests())
	if code := deliver(other); code != http.StatusAccepted {
		t.Fatalf("delivery where nothing waits: status %d, want 202", code)
	}
	time.Sleep(100 * time.Millisecond) // what it would do, it does at once
	if n := len(f.srv.Requests()) - before; n != 0 {
		t.Errorf("a delivery where nothing waits made %d API requests, want none", n)
	}
	if p := other.c.lookupPoller(testRepo); p != nil {
		t.Errorf("a delivery where nothing waits made a poller")
	}
	select {
	case r := <-ch:
		t.Fatalf("Ask returned %+v, %v after a delivery to another client", r.resp, r.err)
	default:
	}
	if code := deliver(asker); code != http.StatusAccepted {
		t.Fatalf("delivery to the asker: status %d, want 202", code)
	}
	if r := waitResult(t, ch); r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{"MySQL"}) {
		t.Fatalf("Ask = %+v, %v; want MySQL", r.resp, r.err)
	}
}

// TestIdleDeliveryNudgesTheAsker: a delivery reaching a client where no
// Ask waits on the comment's issue calls OnIdleDelivery with the repository
// and the issue; the asking client's PollNow (what the serve daemon calls
// when the nudge arrives) reads the answer at once although its next poll
// is an hour away. PollNow for an issue where nothing waits polls nothing.
func TestIdleDeliveryNudgesTheAsker(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	cfg := f.config(1)
	cfg.PollInterval = time.Hour // only a webhook or PollNow can bring the answer
	cfg.WebhookSecret = secret
	type idle struct {
		repo  string
		issue int
	}
	askerIdle := make(chan idle, 4)
	cfg.OnIdleDelivery = func(repo string, issue int) { askerIdle <- idle{repo, issue} }
	asker := f.surface(t, cfg)
	otherIdle := make(chan idle, 4)
	cfg.OnIdleDelivery = func(repo string, issue int) { otherIdle <- idle{repo, issue} }
	other := f.surface(t, cfg)
	other.c.PollNow(testRepo, 1) // no poller: nothing happens

	set := surfacetest.SingleChoice("nudged")
	ch := startAsk(ctxTimeout(t), asker, set)
	f.waitAsked(t, set)
	eventually(t, "waiter", func() bool {
		p := asker.c.lookupPoller(testRepo)
		return p != nil && len(p.waitersFor(1)) == 1
	})
	f.srv.CreateIssue(testRepo, "Elsewhere") // issue 2: nothing waits there
	deliver := func(s *Surface, issue int, delivery string) {
		t.Helper()
		c := f.srv.AddComment(testRepo, issue, "alice", "3")
		payload := f.srv.IssueCommentEvent(testRepo, c, "created")
		h, err := s.WebhookHandler()
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("POST", "/webhook", bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", githubtest.Signature(secret, payload))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("delivery %s: status %d, want 202", delivery, rec.Code)
		}
	}
	nextIdle := func(ch <-chan idle) idle {
		t.Helper()
		select {
		case got := <-ch:
			return got
		case <-time.After(waitLong):
			t.Fatal("OnIdleDelivery not called")
			return idle{}
		}
	}

	// At the asker, a comment on an issue where nothing waits is idle too.
	deliver(asker, 2, "d-1")
	if got := nextIdle(askerIdle); got != (idle{testRepo, 2}) {
		t.Fatalf("OnIdleDelivery(%q, %d), want (%q, 2)", got.repo, got.issue, testRepo)
	}
	asker.c.PollNow(testRepo, 2)
	time.Sleep(100 * time.Millisecond)
	if n := f.polls(); n != 0 {
		t.Fatalf("PollNow for an issue where nothing waits: %d polls, want none", n)
	}

	deliver(other, 1, "d-2")
	got := nextIdle(otherIdle)
	if got != (idle{testRepo, 1}) {
		t.Fatalf("OnIdleDelivery(%q, %d), want (%q, 1)", got.repo, got.issue, testRepo)
	}
	select {
	case r := <-ch:
		t.Fatalf("Ask returned %+v, %v before PollNow", r.resp, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	asker.c.PollNow(got.repo, got.issue)
	asker.c.PollNow(got.repo, got.issue) // folded into the same poll, or one more
	if r := waitResult(t, ch); r.err != nil || !slices.Equal(r.resp.Answers[0].Labels, []string{"MySQL"}) {
		t.Fatalf("Ask = %+v, %v; want MySQL", r.resp, r.err)
	}
	if n := f.polls(); n < 1 || n > 2 {
		t.Errorf("%d polls after PollNow twice, want 1 or 2", n)
	}
	select {
	case got := <-askerIdle:
		t.Errorf("the asker called OnIdleDelivery(%q, %d) for a delivery to another client", got.repo, got.issue)
	default:
	}
}

func TestWebhookRefusesWithoutSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	if _, err := s.WebhookHandler(); err == nil || !strings.Contains(err.Error(), "webhook_secret") {
		t.Fatalf("WebhookHandler without a secret = %v, want an error", err)
	}
}

func TestWebhookIgnoresOtherEvents(t *testing.T) {
	t.Parallel()
	c, err := NewClient(ClientConfig{Token: "x", WebhookSecret: "k", BaseURL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, _ := c.WebhookHandler()
	for _, tt := range []struct {
		event, body string
		want        int
	}{
		{"ping", `{"zen":"hi"}`, http.StatusOK},
		{"push", `{}`, http.StatusNoContent},
		{"issue_comment", `{"action":"edited"}`, http.StatusNoContent},
		{"issue_comment", `{"action":"deleted"}`, http.StatusNoContent},
		{"issue_comment", `not json`, http.StatusBadRequest},
	} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		req.Header.Set("X-GitHub-Event", tt.event)
		req.Header.Set("X-Hub-Signature-256", githubtest.Signature("k", []byte(tt.body)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s %s: status %d, want %d", tt.event, tt.body, rec.Code, tt.want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", rec.Code)
	}
}

func TestAnswerWhileDownFoundOnRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	set := surfacetest.TwoQuestions("down")

	// First process: asks, then dies.
	ctx, cancel := context.WithCancel(context.Background())
	ch := startAsk(ctx, f.surface(t, f.config(0)), set)
	q := f.waitAsked(t, set)
	cancel()
	if r := waitResult(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Ask = %v", r.err)
	}
	// Meanwhile, on GitHub.
	f.srv.AddComment(testRepo, q.Issue, "alice", "MySQL\nLinux, macOS")

	// Second process.
	f.srv.ResetRequests()
	r := waitResult(t, startAsk(ctxTimeout(t), f.surface(t, f.config(0)), set))
	if r.err != nil {
		t.Fatalf("Ask after restart = %v", r.err)
	}
	want := []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL"), surfacetest.Choose(set.Questions[1], "Linux", "macOS")}
	surfacetest.CheckResponse(t, "github", set, r.resp, want, q.CreatedAt)
	if n := len(f.questionComments(set)); n != 1 {
		t.Errorf("question posted %d times, want once", n)
	}
	if n := len(f.srv.Issues(testRepo)); n != 2 {
		t.Errorf("%d issues, want the fixture's and one for the run", n-1)
	}
	for _, req := range f.srv.Requests() {
		if req.Method == "POST" && strings.HasSuffix(req.Path, "/comments") {
			t.Errorf("restart posted a comment: %+v", req)
		}
	}
}

func TestSeveralSetsOnOneIssueNeedTheQID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	ctx := ctxTimeout(t)
	a := surfacetest.SingleChoice("multi-a")
	b := surfacetest.MultiSelect("multi-b")
	cha := startAsk(ctx, s, a)
	f.waitAsked(t, a)
	chb := startAsk(ctx, s, b)
	f.waitAsked(t, b)
	eventually(t, "two waiters", func() bool {
		p := s.c.lookupPoller(testRepo)
		return p != nil && len(p.waitersFor(1)) == 2
	})

	f.srv.AddComment(testRepo, 1, "alice", "1")
	f.srv.WaitFor(t, waitLong, "which-question reply", func() bool {
		for _, c := range f.srv.Comments(testRepo, 1) {
			if strings.Contains(c.Body, "several questions are waiting") {
				return true
			}
		}
		return false
	})
	notReturned(t, cha, f)
	notReturned(t, chb, f)

	f.srv.AddComment(testRepo, 1, "alice", "/answer "+b.Questions[0].ID+" 1 3")
	rb := waitResult(t, chb)
	if rb.err != nil || !slices.Equal(rb.resp.Answers[0].Labels, []string{"Linux", "Windows"}) {
		t.Fatalf("Ask(b) = %+v, %v; want Linux, Windows", rb.resp, rb.err)
	}
	notReturned(t, cha, f)
	// Only a is left: a bare answer is enough now.
	f.srv.AddComment(testRepo, 1, "alice", "postgres")
	ra := waitResult(t, cha)
	if ra.err != nil || !slices.Equal(ra.resp.Answers[0].Labels, []string{"Postgres"}) {
		t.Fatalf("Ask(a) = %+v, %v; want Postgres", ra.resp, ra.err)
	}
}

func TestAcknowledgements(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("ack")
	ch := startAsk(ctxTimeout(t), s, set)
	q := f.waitAsked(t, set)
	ans := f.srv.AddComment(testRepo, 1, "alice", "sqlite")
	r := waitResult(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	ctx := ctxTimeout(t)
	if err := s.Resolve(ctx, set, r.resp); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if err := s.Resumed(ctx, set); err != nil {
		t.Fatalf("Resumed: %v", err)
	}
	if got := f.srv.Reactions(testRepo, ans); !slices.Equal(got, []string{"eyes", "rocket"}) {
		t.Errorf("reactions on the answer = %v, want [eyes rocket]", got)
	}
	got, _ := f.srv.Comment(testRepo, q.ID)
	if !strings.Contains(got.Body, "Answered by @\u200balice:** SQLite") {
		t.Errorf("question comment not edited to show the answer:\n%s", got.Body)
	}
	if !strings.Contains(got.Body, questionMarker(set, 1, 1)) {
		t.Errorf("edited question comment lost its marker")
	}

	// A new process (restart) still finds where to put 🚀, and does not
	// edit the comment again.
	s2 := f.surface(t, f.config(1))
	f.srv.ResetRequests()
	if err := s2.Resolve(ctx, set, r.resp); err != nil {
		t.Fatalf("Resolve after restart: %v", err)
	}
	if err := s2.Resumed(ctx, set); err != nil {
		t.Fatalf("Resumed after restart: %v", err)
	}
	for _, req := range f.srv.Requests() {
		if req.Method == "PATCH" {
			t.Errorf("Resolve after restart edited again: %+v", req)
		}
	}
	if got := f.srv.Reactions(testRepo, ans); !slices.Equal(got, []string{"eyes", "rocket"}) {
		t.Errorf("reactions after restart = %v", got)
	}
}

func TestResolveAnsweredElsewhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("elsewhere")
	ctx, cancel := context.WithCancel(context.Background())
	ch := startAsk(ctx, s, set)
	q := f.waitAsked(t, set)
	cancel()
	waitResult(t, ch)
	resp := questions.Response{SetID: set.ID, By: "bob (discord 1)", Surface: "discord",
		Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}, At: time.Now()}
	if err := s.Resolve(ctxTimeout(t), set, resp); err != nil {
		t.Fatal(err)
	}
	got, _ := f.srv.Comment(testRepo, q.ID)
	if !strings.Contains(got.Body, "Answered on discord by bob (discord 1):** MySQL") {
		t.Errorf("question comment:\n%s", got.Body)
	}
	if err := s.Resumed(ctxTimeout(t), set); err != nil {
		t.Errorf("Resumed for an answer from elsewhere = %v, want nil (nothing to react to)", err)
	}
}

func TestModelTextCannotPingOrHide(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.NewSet("hostile").
		Context("Ping @octocat and @acme/core, mail me@example.com\n<!-- orchestrator:question set=other -->").
		Question(surfacetest.HostileQuestion()).Set()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := startAsk(ctx, s, set)
	q := f.waitAsked(t, set)
	cancel()
	waitResult(t, ch)
	for _, bad := range []string{"@octocat", "@acme/core", "@everyone", "@here", "<!--QUESTION", "orchestrator:question set=other", "\x1b", "\u202e"} {
		if strings.Contains(q.Body, bad) {
			t.Errorf("question comment contains %q:\n%s", bad, q.Body)
		}
	}
	if !strings.Contains(q.Body, "me@example.com") {
		t.Errorf("an e-mail address was mangled:\n%s", q.Body)
	}
	if strings.Count(q.Body, "<!--") != 1 {
		t.Errorf("question comment has %d HTML comments, want only its marker", strings.Count(q.Body, "<!--"))
	}
}

func TestLongQuestionIsSplit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	long := strings.Repeat("The model explains at length. ", 5000) // ~150,000 characters
	set := surfacetest.NewSet("long").Context(long).Single().Set()
	ch := startAsk(ctxTimeout(t), s, set)
	f.srv.WaitFor(t, waitLong, "all parts", func() bool { return len(f.srv.Comments(testRepo, 1)) >= 3 })
	cs := f.srv.Comments(testRepo, 1)
	if len(cs) != 3 {
		t.Fatalf("%d comments, want the question in 3 parts", len(cs))
	}
	for i, c := range cs {
		if n := len([]rune(c.Body)); n > maxCommentRunes {
			t.Errorf("part %d is %d characters, over GitHub's limit", i+1, n)
		}
		if !strings.Contains(c.Body, questionMarker(set, i+1, 3)) {
			t.Errorf("part %d has no part marker", i+1)
		}
	}
	if !strings.Contains(cs[2].Body, "How to answer") {
		t.Errorf("the last part does not say how to answer")
	}
	// Asking again (a restart) posts nothing more.
	s2 := f.surface(t, f.config(1))
	ctx, cancel := context.WithCancel(context.Background())
	ch2 := startAsk(ctx, s2, set)
	f.waitPolls(t, 2)
	cancel()
	waitResult(t, ch2)
	if n := len(f.srv.Comments(testRepo, 1)); n != 3 {
		t.Errorf("%d comments after asking again, want 3", n)
	}
	f.srv.AddComment(testRepo, 1, "alice", "1")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestRunIssue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(0)
	cfg.Labels = []string{"orchestrator", "questions"}
	set1 := surfacetest.NewSet("run-1").Run("run-42").Title("Add a login @page").Single().Set()
	set2 := surfacetest.NewSet("run-2").Run("run-42").Turn(2).Single().Set()
	other := surfacetest.NewSet("run-3").Run("run-43").Single().Set()
	for _, set := range []questions.Set{set1, set2, other} {
		ctx, cancel := context.WithCancel(context.Background())
		ch := startAsk(ctx, f.surface(t, cfg), set) // a new process each time
		f.waitAsked(t, set)
		cancel()
		waitResult(t, ch)
	}
	issues := f.srv.Issues(testRepo)[1:] // after the fixture's
	if len(issues) != 2 {
		t.Fatalf("%d issues, want one per run (2)", len(issues))
	}
	if issues[0].Title != "Add a login @\u200bpage" {
		t.Errorf("issue title %q", issues[0].Title)
	}
	if !slices.Equal(issues[0].Labels, cfg.Labels) {
		t.Errorf("issue labels %v, want %v", issues[0].Labels, cfg.Labels)
	}
	for i, set := range []questions.Set{set1, set2, other} {
		want := []int{2, 2, 3}[i]
		if got := f.questionComments(set)[0].Issue; got != want {
			t.Errorf("set %s asked on issue %d, want %d", set.ID, got, want)
		}
	}
}

func TestGitHubApp(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	f.srv.AddApp(12345, 678, &key.PublicKey)
	cfg := f.config(1)
	cfg.Token = ""
	cfg.App = &AppAuth{ID: 12345, InstallationID: 678, PrivateKeyFile: keyFile}
	s := f.surface(t, cfg)
	set := surfacetest.SingleChoice("app")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	f.srv.AddComment(testRepo, 1, "alice", "2")
	if r := waitResult(t, ch); r.err != nil {
		t.Fatalf("Ask with app auth = %v", r.err)
	}
	tokens := 0
	for _, r := range f.srv.Requests() {
		if r.Path == "/app/installations/678/access_tokens" && r.Status == http.StatusCreated {
			tokens++
		}
	}
	if tokens != 1 {
		t.Errorf("%d installation tokens fetched, want 1 (cached)", tokens)
	}
	// The app's bot posts; it knows it is that bot from GET /app.
	if q := f.questionComments(set); len(q) != 1 || q[0].Login != "orchestrator[bot]" {
		t.Errorf("question comments %+v, want one by orchestrator[bot]", q)
	}
	if me, err := s.c.self(ctxTimeout(t)); err != nil || me.login != "orchestrator[bot]" || me.id == 0 {
		t.Errorf("self = %+v, %v; want the app's bot with its ID", me, err)
	}

	// The wrong app ID is refused.
	cfg.App = &AppAuth{ID: 999, InstallationID: 678, PrivateKeyFile: keyFile}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	badApp := surfacetest.SingleChoice("bad-app")
	if err := f.surface(t, cfg).Ask(ctx, badApp, pending(badApp)); err == nil || ctx.Err() != nil {
		t.Errorf("Ask with the wrong app ID = %v, want an authentication error", err)
	}
}

func TestBadCredentialsFailAsk(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(1)
	cfg.Token = "ghp_wrong"
	creds := surfacetest.SingleChoice("creds")
	err := f.surface(t, cfg).Ask(ctxTimeout(t), creds, pending(creds))
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Ask with a bad token = %v, want a 401 error", err)
	}
	if strings.Contains(err.Error(), "ghp_wrong") {
		t.Errorf("error shows the token: %v", err)
	}
}

func TestClosedClientMakesAskUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("closed")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	s.Close()
	if r := waitResult(t, ch); !errors.Is(r.err, surfaces.ErrUnavailable) {
		t.Fatalf("Ask after Close = %v, want ErrUnavailable", r.err)
	}
}

// A failed permission lookup is tried again at the next poll, even when the
// listing has not changed (304).
func TestPermissionLookupRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.srv.Fail("GET", "/repos/"+testRepo+"/collaborators/alice/permission", http.StatusBadGateway, http.Header{}, `{"message":"Server Error"}`)
	s := f.surface(t, f.config(1))
	set := surfacetest.SingleChoice("perm-retry")
	ch := startAsk(ctxTimeout(t), s, set)
	f.waitAsked(t, set)
	f.srv.AddComment(testRepo, 1, "alice", "1")
	r := waitResult(t, ch)
	if r.err != nil || r.resp.By != "@alice" {
		t.Fatalf("Ask = %+v, %v; want alice's answer once her permission could be read", r.resp, r.err)
	}
	var statuses []int
	for _, req := range f.srv.Requests() {
		if strings.HasSuffix(req.Path, "/collaborators/alice/permission") {
			statuses = append(statuses, req.Status)
		}
	}
	if !slices.Equal(statuses, []int{http.StatusBadGateway, http.StatusOK}) {
		t.Errorf("permission lookups %v, want a 502 then a 200 (then cached)", statuses)
	}
}
