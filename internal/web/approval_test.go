package web

import (
	"html"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestInboxShowsWholeApproval: an approval whose dangerous first line is
// followed by 4 KiB of comments is shown whole in the inbox, first line
// and last (issue 21), and "Allow for this run" says what it allows.
func TestInboxShowsWholeApproval(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	set := surfacetest.HiddenApproval()
	f.be.ask(set, f.base.Add(4*time.Minute), "web")
	c, _ := f.signIn(aliceToken)
	page := f.do(c, "GET", "/", "", nil)
	if page.status != 200 {
		t.Fatalf("inbox: %d", page.status)
	}
	for _, want := range []string{surfacetest.HiddenFirstLine, "echo done", "this very call"} {
		if !strings.Contains(html.UnescapeString(page.body), want) {
			t.Errorf("the inbox does not show %q", want)
		}
	}
}
