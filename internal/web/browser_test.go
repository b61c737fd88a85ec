package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/orchestrator-dev/orchestrator/internal/web/browsertest"
)

// TestBrowserInboxAnswersRunPageAndCancel drives the pages in a real
// headless Chromium: sign in with a token; an invalid answer shows the
// reason; a multi-select with free text and a single option button are
// taken as the signed-in user's; the run page follows the run live without
// reloading; cancel from the page. Screenshots of the inbox and of a run
// page are checked to be non-blank.
func TestBrowserInboxAnswersRunPageAndCancel(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	ctx := browsertest.New(t, 2*time.Minute)

	err := chromedp.Do(ctx,
		chromedp.Navigate(f.ts.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), aliceToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("ask-r1-qa1")),
	)
	if err != nil {
		t.Fatal(err)
	}
	body := text(t, ctx, chromedp.CSS("body"))
	for _, want := range []string{"Signed in as alice", "Which auth method?", "Which libraries?", "What should the package be called?", "terminal, github"} {
		if !strings.Contains(body, want) {
			t.Errorf("inbox lacks %q:\n%s", want, body)
		}
	}
	if i, j := strings.Index(body, "Which libraries?"), strings.Index(body, "Which auth method?"); i > j {
		t.Error("the inbox is not newest first")
	}
	browsertest.Screenshot(t, ctx, "inbox")

	// Invalid: nothing chosen for the multi-select question.
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("t-r2-qb2"), "store"),
		chromedp.Click(chromedp.CSS("#ask-r2-qb1 button.send")),
		chromedp.WaitVisible(chromedp.ID("error")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if e := text(t, ctx, chromedp.ID("error")); !strings.Contains(e, "answer to question qb1 is empty") || f.be.final("r2-s1b2c3d4e5f6") != nil {
		t.Fatalf("invalid answer: error %q, recorded %+v", e, f.be.final("r2-s1b2c3d4e5f6"))
	}

	// A multi-select and a free-text answer.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#ask-r2-qb1 input[value="chi"]`)),
		chromedp.Click(chromedp.CSS(`#ask-r2-qb1 input[value="zap"]`)),
		chromedp.SendKeys(chromedp.ID("t-r2-qb2"), "store"),
		chromedp.Click(chromedp.CSS("#ask-r2-qb1 button.send")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	if err != nil {
		t.Fatal(err)
	}
	flash := text(t, ctx, chromedp.ID("flash"))
	got := f.be.final("r2-s1b2c3d4e5f6")
	if !strings.Contains(flash, "Answer recorded") || got == nil || got.By != "alice" || got.Surface != "web" ||
		strings.Join(got.Answers[0].Labels, ",") != "chi,zap" || got.Answers[1].Text != "store" {
		t.Fatalf("multi-select + free text: flash %q, recorded %+v", flash, got)
	}

	// An option button.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#ask-r1-qa1 button[value="JWT"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.empty")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.be.final("r1-s9f3e2d1c0ab"); got == nil || got.Answers[0].Labels[0] != "JWT" || got.By != "alice" {
		t.Fatalf("option button: recorded %+v", got)
	}

	// The run page updates live: the page is not reloaded (a mark set on
	// window survives) while new timeline items and the cost arrive.
	err = chromedp.Do(ctx,
		chromedp.Navigate(f.ts.URL+"/runs/r1"),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__mark = true`)); err != nil {
		t.Fatal(err)
	}
	f.be.mu.Lock()
	f.be.runs["r1"].Items = append(f.be.runs["r1"].Items, Item{Kind: ItemText, Turn: 2, Text: "Implemented with **JWT**."})
	f.be.runs["r1"].CostUSD = 0.0042
	f.be.mu.Unlock()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(`//ol[@id="timeline"]//strong[text()="JWT"]`))); err != nil {
		t.Fatal(err)
	}
	mark, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__mark === true`))
	if err != nil {
		t.Fatal(err)
	}
	if c := liveText(t, ctx, "run-cost", "$0.0042"); !mark || c != "$0.0042" {
		t.Fatalf("live update: mark %v (false: the page was reloaded), cost %q", mark, c)
	}
	browsertest.Screenshot(t, ctx, "run")

	// Cancel from the page.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("cancel")),
		chromedp.WaitVisible(chromedp.ID("confirm-cancel")),
	)
	if err != nil {
		t.Fatal(err)
	}
	f.be.mu.Lock()
	st := f.be.runs["r1"].Status
	f.be.mu.Unlock()
	if final(st) {
		t.Fatalf("the run is %s before the cancel was confirmed", st)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("confirm-cancel")),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if st := liveText(t, ctx, "run-status", "cancelled"); st != "cancelled" {
		t.Fatalf("status after cancel: %q", st)
	}
}

// liveText reads the text of the element with id on a page that redraws
// it live, until it is want or a generous while passed; it returns the
// last text read. The page's own script reads it, in one step: a node
// replaced between finding it and reading it (chromedp's "No node with
// given id found") cannot fail the read.
func liveText(t *testing.T, ctx context.Context, id, want string) string {
	t.Helper()
	var got string
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById(`+strconv.Quote(id)+`) || {}).textContent || ""`))
		if err != nil {
			t.Fatal(err)
		}
		got = strings.TrimSpace(s)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func text[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBrowserPhoneScreenKeyboardAndLabels: on a phone-sized screen no page
// scrolls sideways; every field has a label; an option is chosen with the
// keyboard alone.
func TestBrowserPhoneScreenKeyboardAndLabels(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	ctx := browsertest.New(t, 2*time.Minute)
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(f.ts.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("token"), aliceToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("ask-r1-qa1")),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/signin?next=/", "/runs", "/runs/r2", "/"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(f.ts.URL+path), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			t.Fatal(err)
		}
		fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if !fits {
			t.Errorf("%s scrolls sideways on a phone", path)
		}
		unlabelled, err := chromedp.Run(ctx, chromedp.Evaluate[int](
			`Array.from(document.querySelectorAll('input:not([type=hidden]), textarea, select')).filter(e => e.labels.length === 0).length`))
		if err != nil {
			t.Fatal(err)
		}
		if unlabelled != 0 {
			t.Errorf("%s: %d fields without a label", path, unlabelled)
		}
	}
	browsertest.Screenshot(t, ctx, "inbox-phone")
	err = chromedp.Do(ctx,
		chromedp.Navigate(f.ts.URL+"/"),
		chromedp.Focus(chromedp.CSS(`#ask-r1-qa1 button[value="OAuth2"]`)),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.be.final("r1-s9f3e2d1c0ab"); got == nil || got.Answers[0].Labels[0] != "OAuth2" {
		t.Fatalf("keyboard answer: recorded %+v", got)
	}
}

// TestBrowserSignInNeverLeavesTheSite: a real browser drops a tab from a
// URL, so "/\t/host/path" is "//host/path" to it. Neither the sign-in form
// nor a signed-in visit of /signin?next=… takes it to another site (here
// another local server, which counts the visits it gets).
func TestBrowserSignInNeverLeavesTheSite(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	var visits atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		visits.Add(1)
		fmt.Fprint(w, "<main>phished</main>")
	}))
	defer evil.Close()
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	ctx := browsertest.New(t, 2*time.Minute)
	nexts := []string{"/%09/" + evilHost + "/phish", "//" + evilHost + "/phish", "/%5C" + evilHost + "/phish", "/%0A/" + evilHost + "/phish"}
	where := func() string {
		loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	// Not signed in: the form carries next; signing in must stay here.
	err := chromedp.Do(ctx,
		chromedp.Navigate(f.ts.URL+"/signin?next="+nexts[0]),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), aliceToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("ask-r1-qa1")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if loc := where(); !strings.HasPrefix(loc, f.ts.URL+"/") {
		t.Errorf("signed in with next=%s: at %s, want this site", nexts[0], loc)
	}
	// Signed in: /signin?next=… redirects at once.
	for _, next := range nexts {
		if err := chromedp.Do(ctx, chromedp.Navigate(f.ts.URL+"/signin?next="+next), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			t.Fatal(err)
		}
		if loc := where(); !strings.HasPrefix(loc, f.ts.URL+"/") {
			t.Errorf("signed in, /signin?next=%s: at %s, want this site", next, loc)
		}
	}
	if n := visits.Load(); n != 0 {
		t.Errorf("the other site was visited %d times", n)
	}
}
