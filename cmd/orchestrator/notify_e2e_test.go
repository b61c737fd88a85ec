package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/notify"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

const notifySecret = "e2e-notify-secret"

// hookReceiver is a webhook endpoint on 127.0.0.1 that verifies every
// delivery's signature and keeps the events by kind.
type hookReceiver struct {
	url string
	mu  sync.Mutex
	// fail answers the first this many requests 500.
	fail      int
	failures  int
	failedIDs []string // the delivery IDs answered 500
	got       []notify.Payload
	ids       map[string]string // event ID → delivery ID
	bad       []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{ids: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fail > 0 {
			h.fail--
			h.failures++
			h.failedIDs = append(h.failedIDs, r.Header.Get(notify.HeaderDelivery))
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if err := notify.Verify([]byte(notifySecret), r.Header.Get(notify.HeaderSignature), r.Header.Get(notify.HeaderTimestamp), b, time.Now(), 5*time.Minute); err != nil {
			h.bad = append(h.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var p notify.Payload
		if err := json.Unmarshal(b, &p); err != nil {
			h.bad = append(h.bad, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		d := r.Header.Get(notify.HeaderDelivery)
		if prev, ok := h.ids[p.ID]; ok && prev != d {
			h.bad = append(h.bad, fmt.Sprintf("event %s delivered as %s and %s", p.ID, prev, d))
		}
		h.ids[p.ID] = d
		h.got = append(h.got, p)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook"
	return h
}

func (h *hookReceiver) of(kind string) []notify.Payload {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []notify.Payload
	for _, p := range h.got {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

func (h *hookReceiver) problems() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bad...)
}

// startServe runs serve in-process until the test ends.
func startNotifyServe(t *testing.T, config, dir string) *lockedBuffer {
	t.Helper()
	stdin, stdinW := io.Pipe()
	t.Cleanup(func() { stdinW.Close() })
	out := &lockedBuffer{}
	ready := make(chan string, 1)
	m := &Main{Stdin: stdin, Stdout: out, Stderr: out, Dir: dir,
		LookupEnv: func(string) (string, bool) { return "", false }, serveReady: func(a string) { ready <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- m.Exec(ctx, []string{"--config", config, "serve"}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != exitOK {
				t.Errorf("serve exited %d", c)
			}
		case <-time.After(2 * time.Minute):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("serve output:\n%s", out.String())
		}
	})
	select {
	case <-ready:
	case c := <-code:
		t.Fatalf("serve exited %d:\n%s", c, out.String())
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	return out
}

// TestFailingScheduleIsPausedAndNotified: with the real CLI and a model
// that errors, a scheduled spec's three failed runs pause its schedule:
// a signed failed event per run and one paused event reach the webhook,
// the notice with the errors and how to resume is on its surface (serve's
// terminal: the log), status --json lists it paused; schedule resume makes
// it tick again.
func TestFailingScheduleIsPausedAndNotified(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeapi.Rule{When: "Implement spec broken", Reply: fakeapi.Reply{Status: 400, Text: "the request is not valid for this model"}})
	hook := newHookReceiver(t)
	specDir := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := "---\nname: nightly\nschedule: \"@every 1s\"\nsurfaces: [terminal]\n---\nImplement spec broken\n"
	if err := os.WriteFile(filepath.Join(specDir, "nightly.md"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n"+
		"notify:\n  secret: %s\n  surfaces: [failed]\n  webhooks:\n    - url: %s\n      events: [failed, paused]\n", specDir, notifySecret, hook.url))
	out := startNotifyServe(t, e.config, filepath.Join(e.dir, "work"))

	ctx := context.Background()
	waitFor(t, "the schedule to pause", func() bool {
		p, err := e.store().ScheduleIsPaused(ctx, "nightly")
		return err == nil && p
	})
	waitFor(t, "the paused event and three failed events", func() bool {
		return len(hook.of(notify.Paused)) == 1 && len(hook.of(notify.Failed)) >= 3
	})
	if bad := hook.problems(); len(bad) > 0 {
		t.Fatalf("bad deliveries: %v", bad)
	}
	failed := hook.of(notify.Failed)[0]
	if failed.RunID == "" || failed.Show != "orchestrator show "+failed.RunID || failed.Spec != "nightly" || failed.Error == "" || failed.Version != notify.Version {
		t.Errorf("failed event = %+v", failed)
	}
	paused := hook.of(notify.Paused)[0]
	if !strings.Contains(paused.Text, "orchestrator schedule resume nightly") || !strings.Contains(paused.Text, "its last 3 runs failed") {
		t.Errorf("paused event = %+v", paused)
	}
	waitFor(t, "the notice in serve's log (its terminal surface)", func() bool {
		return strings.Contains(out.String(), "orchestrator schedule resume nightly")
	})
	runs, err := e.store().ListRuns(ctx, store.RunFilter{Spec: "nightly"})
	if err != nil || len(runs) != 3 {
		t.Fatalf("%d runs (want 3, none once paused), %v", len(runs), err)
	}
	for _, r := range runs {
		if r.Status != store.RunFailed {
			t.Fatalf("run %s is %s", r.ID, r.Status)
		}
	}

	code, js, stderr := e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Schedule []struct {
			Spec   string `json:"spec"`
			Next   *time.Time
			Paused *struct {
				Reason string `json:"reason"`
				Detail string `json:"detail"`
			} `json:"paused"`
		} `json:"schedule"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Schedule) != 1 || rep.Schedule[0].Paused == nil || rep.Schedule[0].Paused.Reason != store.PauseFailures ||
		rep.Schedule[0].Next != nil || !strings.Contains(rep.Schedule[0].Paused.Detail, "failed") {
		t.Fatalf("status --json schedule = %s", js)
	}
	if code, text, _ := e.run("", "status"); code != 0 || !strings.Contains(text, "paused (failures)") {
		t.Errorf("status: exit %d:\n%s", code, text)
	}

	if code, text, stderr := e.run("", "schedule", "resume", "nightly"); code != 0 || !strings.Contains(text, "resumed") {
		t.Fatalf("schedule resume: exit %d: %s %s", code, text, stderr)
	}
	waitFor(t, "a run after the resume", func() bool {
		runs, err := e.store().ListRuns(ctx, store.RunFilter{Spec: "nightly"})
		return err == nil && len(runs) > 3
	})
}

// TestDoneRunNotifiesWithThePullRequest: a scheduled run that ends done,
// its work delivered as a pull request on (fake) GitHub, sends one signed
// done event with the pull request's link and the cost; the receiver's
// first two answers are 500s, and the same delivery comes again until it
// answers 200.
func TestDoneRunNotifiesWithThePullRequest(t *testing.T) {
	t.Parallel()
	g := newGitE2E(t)
	hook := newHookReceiver(t)
	hook.fail = 2
	specDir := filepath.Join(g.dir, "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("---\nname: deps\nschedule: \"@every 1s\"\nworkdir: %q\nallowed_tools: [Bash]\nsurfaces: [terminal]\nanswers:\n  Auth: JWT\n"+
		"git:\n  pull_request:\n    labels: [orchestrator]\n---\nImplement spec X\n", g.checkout)
	if err := os.WriteFile(filepath.Join(specDir, "deps.md"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	g.writeConfig(fmt.Sprintf("  github:\n    enabled: false\n    base_url: %q\n    token: test-token\n    repo: %s\n"+
		"specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n"+
		"notify:\n  secret: %s\n  webhooks:\n    - url: %s\n      events: [done]\n", g.gh.URL()+"/", deliveryRepo, specDir, notifySecret, hook.url))
	startNotifyServe(t, g.config, filepath.Join(g.dir, "work"))

	waitFor(t, "a done event", func() bool { return len(hook.of(notify.Done)) >= 1 })
	if bad := hook.problems(); len(bad) > 0 {
		t.Fatalf("bad deliveries: %v", bad)
	}
	// The schedule may make a second run whose event is taken before the
	// first one's retry (backoff): wait for the retry, however late.
	retried := func() bool {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		for _, id := range hook.failedIDs {
			for _, took := range hook.ids {
				if id != "" && id == took {
					return true
				}
			}
		}
		return false
	}
	waitFor(t, "a delivery answered 500 to come again and be taken", retried)
	hook.mu.Lock()
	if hook.failures != 2 {
		t.Errorf("%d deliveries answered 500, want 2", hook.failures)
	}
	hook.mu.Unlock()
	done := hook.of(notify.Done)[0]
	run, err := g.store().Run(context.Background(), done.RunID)
	if err != nil {
		t.Fatal(err)
	}
	dl, ok, err := g.store().Delivery(context.Background(), run.ID)
	if err != nil || !ok || dl.PRURL == "" {
		t.Fatalf("delivery = %+v, %v, %v", dl, ok, err)
	}
	if done.PRURL != dl.PRURL || !strings.Contains(done.PRURL, "/pull/") || done.CostUSD != run.CostUSD || done.CostUSD <= 0 ||
		done.Status != "done" || done.Spec != "deps" || done.ID != run.ID+"/done" {
		t.Fatalf("done event = %+v; run cost %v, PR %s", done, run.CostUSD, dl.PRURL)
	}
}

// TestWaitingEventOncePerQuestion: a run waiting longer than
// notify.waiting_after makes one waiting event, however often serve looks.
func TestWaitingEventOncePerQuestion(t *testing.T) {
	t.Parallel()
	hook := newHookReceiver(t)
	dir := t.TempDir()
	cfg := config.DefaultEnv(func(string) (string, bool) { return "", false })
	cfg.StateDir = dir
	cfg.Specs.Dir = filepath.Join(dir, "specs")
	cfg.Notify.Secret = notifySecret
	cfg.Notify.WaitingAfter = config.Duration(time.Nanosecond)
	cfg.Notify.Webhooks = []config.NotifyWebhook{{URL: hook.url, Events: []string{notify.Waiting}}}
	m := &Main{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateRun(ctx, store.Run{ID: "rw1", Spec: "nightly", Prompt: "p", Surfaces: []string{"terminal"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateRun(ctx, "rw1", store.RunUpdate{Status: store.RunWaiting}); err != nil {
		t.Fatal(err)
	}
	sn := m.newServeNotify(st, m.newSurfaceSet(st))
	for i := 0; i < 3; i++ {
		sn.emitWaiting(ctx)
		sn.n.DeliverDue(ctx)
	}
	got := hook.of(notify.Waiting)
	if len(got) != 1 || got[0].RunID != "rw1" || got[0].Spec != "nightly" || !strings.Contains(got[0].Text, "orchestrator status --waiting") {
		t.Fatalf("waiting events = %+v (problems %v)", got, hook.problems())
	}
}

// TestSchedulePauseAndResumeByHand: `schedule pause` pauses a scheduled
// spec of specs.dir (status says by hand and how to resume), refuses a
// name that is no scheduled spec, and `schedule resume` resumes it.
func TestSchedulePauseAndResumeByHand(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	specDir := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, sched := range map[string]string{"nightly": "schedule: \"0 3 * * *\"\n", "byhand": ""} {
		if err := os.WriteFile(filepath.Join(specDir, name+".md"), []byte("---\nname: "+name+"\n"+sched+"---\nDo it.\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\n", specDir))
	if code, out, errOut := e.run("", "schedule", "pause", "nightly"); code != exitOK || !strings.Contains(out, "is paused") {
		t.Fatalf("pause: exit %d: %s %s", code, out, errOut)
	}
	if code, out, _ := e.run("", "schedule", "pause", "nightly"); code != exitOK || !strings.Contains(out, "paused already") {
		t.Fatalf("pause again: exit %d: %s", code, out)
	}
	for _, name := range []string{"byhand", "nope"} {
		if code, _, errOut := e.run("", "schedule", "pause", name); code != exitUsage || !strings.Contains(errOut, "no scheduled spec of that name") {
			t.Errorf("pause %s: exit %d: %s", name, code, errOut)
		}
	}
	code, text, _ := e.run("", "status")
	if code != exitOK || !strings.Contains(text, "nightly") || !strings.Contains(text, "paused (by_hand)") ||
		!strings.Contains(text, "orchestrator schedule resume nightly") {
		t.Fatalf("status: exit %d:\n%s", code, text)
	}
	if code, out, _ := e.run("", "schedule", "resume", "nightly"); code != exitOK || !strings.Contains(out, "resumed") {
		t.Fatalf("resume: exit %d: %s", code, out)
	}
	if code, out, _ := e.run("", "schedule", "resume", "nightly"); code != exitOK || !strings.Contains(out, "was not paused") {
		t.Fatalf("resume again: exit %d: %s", code, out)
	}
	if code, text, _ := e.run("", "status"); code != exitOK || strings.Contains(text, "paused") {
		t.Fatalf("status after resume: exit %d:\n%s", code, text)
	}
}

// TestValidateSpecWebhooksNeedTheSecret: a spec's notify.webhooks are
// signed with the configuration's notify.secret: without it, validate
// refuses the spec at its key.
func TestValidateSpecWebhooksNeedTheSecret(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "state_dir: state\n")
	tm.write(t, "specs/hooked.md", "---\nname: hooked\nnotify:\n  webhooks:\n    - url: https://hooks.example.com/x\n---\nT\n")
	if code := tm.exec("validate"); code != exitUsage || !strings.Contains(tm.stderr.String(), "hooked.md:3: notify.webhooks: webhook deliveries are signed: set notify.secret") {
		t.Fatalf("exit %d, stderr:\n%s", code, tm.stderr.String())
	}
	tm.write(t, DefaultConfigFile, "state_dir: state\nnotify:\n  secret: a-long-enough-secret\n")
	tm.stderr.Reset()
	if code := tm.exec("validate"); code != 0 {
		t.Fatalf("with the secret: exit %d, stderr %s", code, tm.stderr.String())
	}
}
