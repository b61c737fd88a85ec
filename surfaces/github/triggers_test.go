package github

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

func TestParseMention(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		body, spec, text string
		ok               bool
	}{
		{"@orchestrator run login", "login", "", true},
		{"  @Orchestrator RUN login please hurry\nmore", "login", "please hurry\nmore", true},
		{"@orchestrator fix the flaky test", "", "fix the flaky test", true},
		{"@orchestrator, fix it", "", "fix it", true},
		{"@orchestrator", "", "", true},
		{"@orchestrator run", "", "run", true},
		{"@orchestrator running tests fails", "", "running tests fails", true},
		// Ignored: not at the start, or another name.
		{"please @orchestrator run login", "", "", false},
		{"@orchestrator-bot run login", "", "", false},
		{"@orchestrators", "", "", false},
		{"", "", "", false},
		{"> @orchestrator run login", "", "", false},
	} {
		spec, text, ok := ParseMention(tt.body, "@orchestrator")
		if spec != tt.spec || text != tt.text || ok != tt.ok {
			t.Errorf("ParseMention(%q) = %q, %q, %v; want %q, %q, %v", tt.body, spec, text, ok, tt.spec, tt.text, tt.ok)
		}
	}
}

// memTriggers is a TriggerHandler that keeps its records in memory, as
// the store does durably: one run per key.
type memTriggers struct {
	mu      sync.Mutex
	keys    map[string]string // key → run ID, or "refused"
	started []IssueTrigger
	limit   int // runs started before Start refuses (0: none)
}

func newMemTriggers() *memTriggers { return &memTriggers{keys: map[string]string{}} }

func (m *memTriggers) Start(_ context.Context, t IssueTrigger) (TriggerStart, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[t.Key]; ok {
		return TriggerStart{}, nil
	}
	if m.limit > 0 && len(m.started) >= m.limit {
		m.keys[t.Key] = "limited"
		return TriggerStart{Reply: "Too many runs this hour."}, nil
	}
	id := "r" + string(rune('a'+len(m.started)))
	m.keys[t.Key] = id
	m.started = append(m.started, t)
	return TriggerStart{RunID: id}, nil
}

func (m *memTriggers) Refuse(_ context.Context, t IssueTrigger) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[t.Key]; ok {
		return false, nil
	}
	m.keys[t.Key] = "refused"
	return true, nil
}

func (m *memTriggers) runs() []IssueTrigger {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]IssueTrigger(nil), m.started...)
}

// triggerClient is a client of f's fake taking the triggers of testRepo.
func triggerClient(t *testing.T, f *fixture, h TriggerHandler, secret string, poll bool) *Client {
	t.Helper()
	cfg := f.config(1).ClientConfig
	cfg.WebhookSecret = secret
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.StartTriggers(context.Background(), TriggerConfig{Repos: []string{testRepo}, Mention: "@orchestrator",
		Labels: []string{"orchestrator"}, Handler: h, Poll: poll}); err != nil {
		t.Fatal(err)
	}
	return c
}

func deliver(t *testing.T, c *Client, secret, event, delivery string, payload []byte) int {
	t.Helper()
	h, err := c.WebhookHandler()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/webhook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", githubtest.Signature(secret, payload))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// repliesOn returns the orchestrator's replies to events on issue.
func repliesOn(f *fixture, issue int) []githubtest.Comment {
	var out []githubtest.Comment
	for _, c := range f.srv.Comments(testRepo, issue) {
		if strings.Contains(c.Body, "<!-- orchestrator:trigger ") {
			out = append(out, c)
		}
	}
	return out
}

// TestTriggersByWebhook: a maintainer's mention starts one run, whatever
// the deliveries (twice, or under another delivery ID), with 👀 on the
// comment; a stranger's gets one reply however often it is delivered; a
// bot's, an edited comment, a mention later in a comment and the
// orchestrator's own comment start nothing; a label starts one run named
// by its timeline event.
func TestTriggersByWebhook(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	h := newMemTriggers()
	c := triggerClient(t, f, h, secret, false)
	issue := f.srv.OpenIssue(testRepo, "bob", "Login is broken", "Steps: …")

	cm := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator run login")
	payload := f.srv.IssueCommentEvent(testRepo, cm, "created")
	for i, d := range []string{"d1", "d1", "d2"} {
		if code := deliver(t, c, secret, "issue_comment", d, payload); code != http.StatusAccepted && code != http.StatusOK {
			t.Fatalf("delivery %d: status %d", i, code)
		}
	}
	c.wg.Wait() // the deliveries' work (no poller runs)
	runs := h.runs()
	if len(runs) != 1 {
		t.Fatalf("runs %d, want 1: %+v", len(runs), runs)
	}
	if r := runs[0]; r.Spec != "login" || r.Issue != issue || r.Title != "Login is broken" || r.Author != "alice" || r.Key != "github:acme/app:comment:"+itoa64(cm) {
		t.Errorf("trigger %+v", r)
	}
	if got := f.srv.Reactions(testRepo, cm); len(got) != 1 || got[0] != "eyes" {
		t.Errorf("reactions %v, want eyes", got)
	}

	// A new client (a restart) with the same handler (the store).
	c = triggerClient(t, f, h, secret, false)
	if deliver(t, c, secret, "issue_comment", "d3", payload) != http.StatusAccepted {
		t.Fatal("redelivery after a restart refused")
	}
	stranger := f.srv.AddComment(testRepo, issue, "mallory", "@orchestrator run login")
	sp := f.srv.IssueCommentEvent(testRepo, stranger, "created")
	deliver(t, c, secret, "issue_comment", "d4", sp)
	deliver(t, c, secret, "issue_comment", "d5", sp)
	bot := f.srv.AddComment(testRepo, issue, "dependabot[bot]", "@orchestrator run login")
	deliver(t, c, secret, "issue_comment", "d6", f.srv.IssueCommentEvent(testRepo, bot, "created"))
	later := f.srv.AddComment(testRepo, issue, "alice", "thanks @orchestrator run login")
	deliver(t, c, secret, "issue_comment", "d7", f.srv.IssueCommentEvent(testRepo, later, "created"))
	edited := f.srv.AddComment(testRepo, issue, "alice", "typo")
	f.srv.EditComment(testRepo, edited, "@orchestrator run login")
	deliver(t, c, secret, "issue_comment", "d8", f.srv.IssueCommentEvent(testRepo, edited, "edited"))
	own := f.srv.AddComment(testRepo, issue, "orchestrator-bot", "@orchestrator run login")
	deliver(t, c, secret, "issue_comment", "d9", f.srv.IssueCommentEvent(testRepo, own, "created"))

	ev := f.srv.AddLabel(testRepo, issue, "alice", "orchestrator")
	lp := f.srv.IssuesEvent(testRepo, issue, "labeled", "orchestrator", "alice")
	deliver(t, c, secret, "issues", "d10", lp)
	deliver(t, c, secret, "issues", "d11", lp)
	f.srv.AddLabel(testRepo, issue, "alice", "bug")
	deliver(t, c, secret, "issues", "d12", f.srv.IssuesEvent(testRepo, issue, "labeled", "bug", "alice"))
	c.wg.Wait()

	runs = h.runs()
	if len(runs) != 2 {
		t.Fatalf("runs %d, want 2 (the comment, the label): %+v", len(runs), runs)
	}
	if r := runs[1]; r.Kind != TriggerLabel || r.Label != "orchestrator" || r.LabelEvent != ev || r.Author != "alice" ||
		r.Key != "github:acme/app:label:"+itoa(issue)+":orchestrator:"+itoa64(ev) {
		t.Errorf("label trigger %+v (event %d)", r, ev)
	}
	replies := repliesOn(f, issue)
	var refusals, labelNotes int
	for _, r := range replies {
		switch {
		case strings.Contains(r.Body, "@mallory") && strings.Contains(r.Body, "write access"):
			refusals++
		case strings.Contains(r.Body, "Run `rb` started"):
			labelNotes++
		default:
			t.Errorf("unexpected reply %q", r.Body)
		}
	}
	if refusals != 1 || labelNotes != 1 {
		t.Errorf("refusals %d, label notes %d; want 1 and 1", refusals, labelNotes)
	}
}

// TestTriggersByPolling: without a webhook the repository is polled: a
// mention and a label each start one run, an edited comment and a
// stranger's start none (the stranger gets one reply), and a restart reads
// from the cursor: nothing starts twice. Comments before the first poll
// start nothing.
func TestTriggersByPolling(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Before the first poll (an hour ago on GitHub's clock).
	f.srv.SetNow(func() time.Time { return time.Now().Add(-time.Hour) })
	issue := f.srv.OpenIssue(testRepo, "bob", "Old", "old")
	f.srv.AddComment(testRepo, issue, "alice", "@orchestrator run old")
	f.srv.AddLabel(testRepo, issue, "alice", "orchestrator")
	f.srv.SetNow(time.Now)
	h := newMemTriggers()
	c := triggerClient(t, f, h, "", true)

	cm := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator fix the login")
	f.srv.AddComment(testRepo, issue, "mallory", "@orchestrator run login")
	edited := f.srv.AddComment(testRepo, issue, "alice", "typo")
	f.srv.EditComment(testRepo, edited, "@orchestrator run login")
	labelled := f.srv.OpenIssue(testRepo, "bob", "Add a test", "please")
	ev := f.srv.AddLabel(testRepo, labelled, "maintainer-mo", "orchestrator")

	f.srv.WaitFor(t, waitLong, "two runs and a refusal", func() bool {
		return len(h.runs()) >= 2 && len(repliesOn(f, issue)) >= 1
	})
	c.Close()
	c = triggerClient(t, f, h, "", true) // a restart: from the cursor
	more := f.srv.AddComment(testRepo, labelled, "alice", "@orchestrator run tests")
	f.srv.WaitFor(t, waitLong, "the third run", func() bool { return len(h.runs()) >= 3 })
	// Conditional requests: an unchanged listing answers 304.
	f.srv.WaitFor(t, waitLong, "a listing answered 304", func() bool {
		for _, r := range f.srv.Requests() {
			if r.Status == http.StatusNotModified {
				return true
			}
		}
		return false
	})
	c.Close()

	runs := h.runs()
	if len(runs) != 3 {
		t.Fatalf("runs %d, want 3: %+v", len(runs), runs)
	}
	keys := map[string]bool{}
	for _, r := range runs {
		keys[r.Key] = true
	}
	for _, k := range []string{"github:acme/app:comment:" + itoa64(cm), "github:acme/app:label:" + itoa(labelled) + ":orchestrator:" + itoa64(ev), "github:acme/app:comment:" + itoa64(more)} {
		if !keys[k] {
			t.Errorf("no run of %s: %v", k, keys)
		}
	}
	if r := repliesOn(f, issue); len(r) != 1 || !strings.Contains(r[0].Body, "@mallory") {
		t.Errorf("replies %+v, want one to mallory", r)
	}
	if v, ok, _ := f.refs.Ref(context.Background(), triggerCursorKey(testRepo)); !ok || v == "" {
		t.Errorf("no cursor recorded")
	}
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// TestTriggerRefusedByTheHandlerIsToldOnce: a run the handler refuses (too
// many this hour) gets its reply once, however often the event comes.
func TestTriggerRefusedByTheHandlerIsToldOnce(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	h := newMemTriggers()
	h.limit = 1
	c := triggerClient(t, f, h, secret, false)
	issue := f.srv.OpenIssue(testRepo, "bob", "Two asks", "")
	first := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator do one thing")
	deliver(t, c, secret, "issue_comment", "d1", f.srv.IssueCommentEvent(testRepo, first, "created"))
	c.wg.Wait()
	second := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator do another")
	p := f.srv.IssueCommentEvent(testRepo, second, "created")
	deliver(t, c, secret, "issue_comment", "d2", p)
	deliver(t, c, secret, "issue_comment", "d3", p)
	c.wg.Wait()
	if n := len(h.runs()); n != 1 {
		t.Fatalf("runs %d, want 1", n)
	}
	if r := repliesOn(f, issue); len(r) != 1 || !strings.Contains(r[0].Body, "Too many runs") {
		t.Errorf("replies %+v, want one refusal", r)
	}
	if got := f.srv.Reactions(testRepo, second); len(got) != 0 {
		t.Errorf("the refused comment got %v", got)
	}
}

// TestTriggerPollRetriesAFailedEvent: when the permission lookup fails,
// the poll does not move past the comment: the next poll takes it.
func TestTriggerPollRetriesAFailedEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newMemTriggers()
	f.srv.Fail("GET", "/repos/"+testRepo+"/collaborators/alice/permission", http.StatusUnprocessableEntity, nil, `{"message":"Validation Failed"}`)
	c := triggerClient(t, f, h, "", true)
	defer c.Close()
	issue := f.srv.OpenIssue(testRepo, "bob", "Flaky", "")
	f.srv.AddComment(testRepo, issue, "alice", "@orchestrator fix it")
	f.srv.WaitFor(t, waitLong, "the run, at a later poll", func() bool { return len(h.runs()) == 1 })
	var failed bool
	for _, r := range f.srv.Requests() {
		if strings.HasSuffix(r.Path, "/permission") && r.Status == http.StatusUnprocessableEntity {
			failed = true
		}
	}
	if !failed {
		t.Error("the permission lookup never failed: the test tested nothing")
	}
}

// TestTriggerCommentOnAPullRequestIsNotTaken: an issue_comment on a pull
// request (its issue has pull_request) is the review loop's: no run.
func TestTriggerCommentOnAPullRequestIsNotTaken(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	f := newFixture(t)
	h := newMemTriggers()
	c := triggerClient(t, f, h, secret, false)
	issue := f.srv.OpenIssue(testRepo, "bob", "A pull request", "")
	cm := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator please also add a test")
	var ev map[string]any
	if err := json.Unmarshal(f.srv.IssueCommentEvent(testRepo, cm, "created"), &ev); err != nil {
		t.Fatal(err)
	}
	ev["issue"].(map[string]any)["pull_request"] = map[string]any{"url": f.srv.URL() + "/repos/" + testRepo + "/pulls/" + itoa(issue)}
	payload, _ := json.Marshal(ev)
	deliver(t, c, secret, "issue_comment", "d1", payload)
	c.wg.Wait()
	if n := len(h.runs()); n != 0 {
		t.Fatalf("a comment on a pull request started %d runs", n)
	}
	if r := f.srv.Reactions(testRepo, cm); len(r) != 0 {
		t.Errorf("reactions %v", r)
	}
}

// TestTriggerPollOnlyWhileLeading: an instance that does not lead does not
// poll; once it leads it reads from the cursor another instance left in
// Refs: what that one took is not taken again, what came after is.
func TestTriggerPollOnlyWhileLeading(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newMemTriggers() // the shared store
	var leads atomic.Bool
	start := func(h TriggerHandler, leading func() bool) *Client {
		cfg := f.config(1).ClientConfig
		c, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.StartTriggers(context.Background(), TriggerConfig{Repos: []string{testRepo}, Mention: "@orchestrator",
			Handler: h, Poll: true, Leading: leading}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	fh := &countingTriggers{TriggerHandler: h}
	follower := start(fh, leads.Load)
	leader := start(h, func() bool { return !leads.Load() })
	issue := f.srv.OpenIssue(testRepo, "bob", "Two instances", "")
	first := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator one")
	f.srv.WaitFor(t, waitLong, "the leader's run", func() bool { return len(h.runs()) == 1 })
	leader.Close()
	if n := fh.n.Load(); n != 0 {
		t.Errorf("the instance that does not lead took %d events", n)
	}
	leads.Store(true) // the follower leads now
	second := f.srv.AddComment(testRepo, issue, "alice", "@orchestrator two")
	f.srv.WaitFor(t, waitLong, "the new leader's run", func() bool { return len(h.runs()) == 2 })
	follower.Close()
	runs := h.runs()
	if runs[0].CommentID != first || runs[1].CommentID != second {
		t.Errorf("runs of comments %d, %d; want %d, %d", runs[0].CommentID, runs[1].CommentID, first, second)
	}
}

// countingTriggers counts the events handed to a TriggerHandler.
type countingTriggers struct {
	TriggerHandler
	n atomic.Int32
}

func (c *countingTriggers) Start(ctx context.Context, t IssueTrigger) (TriggerStart, error) {
	c.n.Add(1)
	return c.TriggerHandler.Start(ctx, t)
}
