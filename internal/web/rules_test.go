package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBook is a RuleBook in memory.
type fakeBook struct {
	mu    sync.Mutex
	rules []RuleView
	asked []string // "set by remember" of each Remember
}

func (b *fakeBook) Rules(context.Context) ([]RuleView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]RuleView(nil), b.rules...), nil
}

func (b *fakeBook) Revoke(_ context.Context, id, by string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.rules {
		if b.rules[i].ID == id {
			b.rules[i].State = "revoked"
			return nil
		}
	}
	return ErrNotFound
}

func (b *fakeBook) Remember(_ context.Context, setID, by, remember string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, setID+" "+by+" "+remember)
	b.rules = append(b.rules, RuleView{ID: "r1a2b3c4", Scope: "spec nightly", Decides: "Which auth method? → JWT", MadeBy: by, Surface: SurfaceName,
		FromRun: "r1", State: "active", Created: time.Now(), Expires: time.Now().Add(7 * 24 * time.Hour)})
	return "Kept as rule r1a2b3c4 for spec nightly until 2026-11-30", nil
}

// TestRememberOnTheWeb: the answer form offers to remember the answer; the
// choice keeps it as a rule once the answer is taken; /rules lists the
// rule and revokes it.
func TestRememberOnTheWeb(t *testing.T) {
	t.Parallel()
	book := &fakeBook{}
	f := newFixture(t, func(c *Config) { c.Rules = book })
	c, csrf := f.signIn(aliceToken)
	inbox := f.do(c, "GET", "/", "", nil)
	if !strings.Contains(inbox.body, `name="remember"`) || !strings.Contains(inbox.body, `value="spec:7d"`) || !strings.Contains(inbox.body, `href="/rules"`) {
		t.Fatalf("the inbox offers no remember choice:\n%s", inbox.body)
	}
	body, h := form(url.Values{"csrf": {csrf}, "run": {"r1"}, "question": {"qa1"}, "a:qa1": {"JWT"}, "remember": {"spec:7d"}})
	r := f.do(c, "POST", "/answer", body, h)
	if r.status != http.StatusOK || !strings.Contains(r.body, "Kept as rule r1a2b3c4") {
		t.Fatalf("answer: %d\n%s", r.status, r.body)
	}
	if len(book.asked) != 1 || !strings.HasSuffix(book.asked[0], " alice spec:7d") || !strings.HasPrefix(book.asked[0], "r1-") {
		t.Fatalf("remember asked %q", book.asked)
	}
	page := f.do(c, "GET", "/rules", "", nil)
	if page.status != http.StatusOK || !strings.Contains(page.body, "r1a2b3c4") || !strings.Contains(page.body, "Which auth method? → JWT") {
		t.Fatalf("rules page: %d\n%s", page.status, page.body)
	}
	body, h = form(url.Values{"csrf": {csrf}})
	if r := f.do(c, "POST", "/rules/r1a2b3c4/revoke", body, h); r.status != http.StatusOK || !strings.Contains(r.body, "revoked") {
		t.Fatalf("revoke: %d\n%s", r.status, r.body)
	}
	if r := f.do(c, "POST", "/rules/nope/revoke", body, h); r.status != http.StatusNotFound {
		t.Errorf("revoke an unknown rule: %d", r.status)
	}
	// Without a rule book there is no choice and no page.
	g := newFixture(t, nil)
	c2, _ := g.signIn(aliceToken)
	if in := g.do(c2, "GET", "/", "", nil); strings.Contains(in.body, `name="remember"`) {
		t.Error("the inbox offers to remember without a rule book")
	}
	if r := g.do(c2, "GET", "/rules", "", nil); r.status != http.StatusNotFound {
		t.Errorf("/rules without a rule book: %d", r.status)
	}
}
