package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/internal/web/browsertest"
)

// TestWebInboxAnswersARealRun: `serve` with serve.web runs a scheduled spec
// with the real CLI that asks on the terminal. In a headless Chromium,
// alice signs in with her token; the inbox lists the question; clicking an
// option resumes the run exactly once, and the terminal says it was
// answered elsewhere by alice on the web. The run page shows the answer
// turn arrive live while it streams; the next run of the spec is cancelled
// from its page. Screenshots of the inbox and the run page are non-blank.
func TestWebInboxAnswersARealRun(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(time.Second)...)
	specDir := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := "---\nname: nightly\nschedule: \"@every 1s\"\nsurfaces: [terminal]\n---\nImplement spec X\n"
	if err := os.WriteFile(filepath.Join(specDir, "nightly.md"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	token, sum := web.NewToken()
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n  web:\n    enabled: true\n"+
		"    users:\n      - {name: alice, token_sha256: %s}\n", specDir, sum))

	stdin, stdinW := io.Pipe() // the terminal: nobody types
	defer stdinW.Close()
	var out lockedBuffer
	addr := make(chan string, 1)
	m := &Main{Stdin: stdin, Stdout: &out, Stderr: &out, Dir: filepath.Join(e.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }, serveReady: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- m.Exec(ctx, []string{"--config", e.config, "serve"}) }()
	defer func() {
		if t.Failed() {
			t.Logf("serve output:\n%s", out.String())
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	st := e.store()
	pendingOf := func() []store.SetRecord {
		sets, _ := st.QuestionSets(context.Background(), store.SetFilter{State: []store.SetState{store.SetPending}})
		return sets
	}
	waitFor(t, "the question in serve's log", func() bool { return strings.Contains(out.String(), "question waiting") })
	waitFor(t, "the question in the store", func() bool { return len(pendingOf()) == 1 })
	first := pendingOf()[0]

	b := browsertest.New(t, 4*time.Minute)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(b, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// text reads an element's text; a live page may replace the element
	// while it is read ("No node with given id found"), so a failed read is
	// tried again for a few seconds.
	text := func(sel chromedp.CSS) string {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s, err := chromedp.Run(b, chromedp.Text(sel))
			if err == nil {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("text of %s: %v", sel, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ref := "#ask-" + first.Set.RunID + "-" + first.Set.Questions[0].ID
	setSel := chromedp.CSS(ref)
	do("sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(setSel),
	)
	if s := text(setSel); !strings.Contains(s, "Which auth method?") || !strings.Contains(s, "OAuth2") || !strings.Contains(s, "on terminal") {
		t.Fatalf("the inbox shows:\n%s", s)
	}
	browsertest.Screenshot(t, b, "inbox-real-run")

	do("click JWT",
		chromedp.Click(chromedp.CSS(ref+` button[value="JWT"]`)),
		chromedp.WaitVisible(chromedp.ID("flash")),
	)
	// The run page while the answer turn streams: the page is loaded
	// before the model's reply is there, and gets it without a reload.
	do("open the run page",
		chromedp.Navigate(base+"/runs/"+first.Set.RunID),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	)
	before := text(chromedp.CSS("#live"))
	if _, err := chromedp.Run(b, chromedp.Evaluate[bool](`window.__mark = true`)); err != nil {
		t.Fatal(err)
	}
	do("the reply arriving live",
		chromedp.WaitVisible(chromedp.Search(`//ol[@id="timeline"]//p[contains(., "Implemented with JWT")]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[@id="run-status"][text()="done"]`)),
	)
	mark, err := chromedp.Run(b, chromedp.Evaluate[bool](`window.__mark === true`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(before, "Implemented with JWT") || !mark {
		t.Fatalf("not live: the reply was there on load (%v) or the page reloaded (mark %v)", strings.Contains(before, "Implemented with JWT"), mark)
	}
	live := text(chromedp.CSS("#live"))
	for _, want := range []string{"Answered by alice on web: JWT", "Turn 2", "answer", "transcript"} {
		if !strings.Contains(live, want) {
			t.Errorf("the run page lacks %q:\n%s", want, live)
		}
	}
	browsertest.Screenshot(t, b, "run-real-run")

	waitFor(t, "serve's log to say who answered", func() bool {
		s := out.String()
		return strings.Contains(s, "question answered") && strings.Contains(s, "by=alice on=web")
	})
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("the answer reached the model %d times, want once", n)
	}

	// The spec's next run asks again; cancel it from its page.
	waitFor(t, "the next run's question", func() bool {
		p := pendingOf()
		return len(p) == 1 && p[0].Set.RunID != first.Set.RunID
	})
	second := pendingOf()[0].Set.RunID
	// The page shows the run cancelled (the status may be redrawn live
	// while it is read, so it is waited for).
	do("cancel the next run",
		chromedp.Navigate(base+"/runs/"+second),
		chromedp.Click(chromedp.ID("cancel")),
		chromedp.WaitVisible(chromedp.ID("confirm-cancel")),
		chromedp.Click(chromedp.ID("confirm-cancel")),
		chromedp.WaitVisible(chromedp.ID("flash")),
		chromedp.WaitVisible(chromedp.Search(`//span[@id="run-status"][text()="cancelled"]`)),
	)
	if r, err := st.Run(context.Background(), second); err != nil || r.Status != store.RunCancelled {
		t.Fatalf("run %s after cancel: %v %v", second, r.Status, err)
	}
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("the answer reached the model %d times, want once", n)
	}

	// The browser goes first: serve's shutdown would wait for the
	// connections Chromium opens ahead of need.
	browsertest.Stop(t, b)
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("serve exited %d after shutdown, want 0", c)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}
