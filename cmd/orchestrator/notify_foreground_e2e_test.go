package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/notify"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestForegroundRunNotifies: with the real CLI, `orchestrator run` and
// `resume` emit serve's events, routed by the run's spec (its file outside
// specs.dir) or the configuration, through the same outbox and deliver
// them before they exit: a done run's signed event is at the webhook when the
// command returns; a spend cap reached sends cap_reached, and the run
// stopped at its question (answer Stop, resume) sends stopped; a failed
// run whose webhook answers 500 exits at once, saying in one line that the
// event is queued for serve, and the next serve sends it with the same
// delivery ID, and sends none of the others again.
func TestForegroundRunNotifies(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeapi.Rule{When: "Implement spec broken", Reply: fakeapi.Reply{Status: 400, Text: "the request is not valid for this model"}},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "Nightly work done."}})
	hook := newHookReceiver(t)
	work := filepath.Join(e.dir, "work")
	// The configuration's route takes no done event: the spec's own
	// notify: section (its file outside specs.dir) does.
	e.writeConfig(fmt.Sprintf("serve:\n  listen: 127.0.0.1:0\nnotify:\n  secret: %s\n  webhooks:\n    - url: %s\n      events: [failed, stopped, cap_reached]\n",
		notifySecret, hook.url))
	spec := filepath.Join(work, "nightly.md")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf("---\nname: nightly\nsurfaces: [terminal]\nmax_cost_usd_per_day: 0.0008\n"+ // one call of the fake costs $0.0008: one run fits the day
		"notify:\n  webhooks:\n    - url: %s\n      events: [done, stopped, cap_reached]\n---\nDo the nightly work\n", hook.url)), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(work, "broken.md")
	if err := os.WriteFile(broken, []byte("---\nname: broken\nsurfaces: [terminal]\n---\nImplement spec broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := e.store()

	// Done: delivered before run exits.
	if code, _, stderr := e.run("", "run", spec); code != exitOK || strings.Contains(stderr, "not delivered") {
		t.Fatalf("run exit %d, want done, every notification delivered:\n%s", code, stderr)
	}
	done := hook.of(notify.Done)
	if len(done) != 1 || done[0].Spec != "nightly" || done[0].CostUSD <= 0 || done[0].Status != "done" || done[0].ID != done[0].RunID+"/done" {
		t.Fatalf("done events when run returned = %+v", done)
	}

	// The day's cap reached: the next run asks, its terminal has no input
	// (exit 3, waiting); cap_reached is delivered before it exits.
	code, _, stderr := e.run("", "run", spec)
	if code != exitWaiting {
		t.Fatalf("second run exit %d, want %d (waiting on the cap question)", code, exitWaiting)
	}
	capped := hook.of(notify.CapReached)
	if len(capped) != 1 || capped[0].Spec != "nightly" || !strings.Contains(capped[0].Text, "max_cost_usd_per_day of spec nightly is reached") {
		t.Fatalf("cap_reached events when run returned = %+v\n%s", capped, stderr)
	}
	rec := pendingCapSet(t, st, capped[0].RunID)
	if code, _, _ := e.run("", "answer", rec.Set.Questions[0].ID, "Stop"); code != exitOK {
		t.Fatalf("answer exit %d", code)
	}
	if code, _, _ := e.run("", "resume", capped[0].RunID); code != exitStopped {
		t.Fatalf("resume exit %d, want %d (stopped)", code, exitStopped)
	}
	if stopped := hook.of(notify.Stopped); len(stopped) != 1 || stopped[0].RunID != capped[0].RunID || stopped[0].Status != "stopped" {
		t.Fatalf("stopped events when resume returned = %+v", stopped)
	}

	// Failed, the webhook down (500): run exits, the event stays queued.
	hook.mu.Lock()
	hook.fail = 1
	hook.mu.Unlock()
	code, _, stderr = e.run("", "run", broken)
	if code != exitFailed {
		t.Fatalf("broken run exit %d, want %d (failed)", code, exitFailed)
	}
	if !strings.Contains(stderr, "1 webhook notification was not delivered (") || !strings.Contains(stderr, "500") ||
		!strings.Contains(stderr, "queued for the next `orchestrator serve`") {
		t.Fatalf("run did not say the failed event is left to serve:\n%s", stderr)
	}
	hook.mu.Lock()
	failedIDs := append([]string(nil), hook.failedIDs...)
	hook.mu.Unlock()
	if len(failedIDs) != 1 || len(hook.of(notify.Failed)) != 0 {
		t.Fatalf("refused deliveries %v, failed events taken %d; want one refused, none taken", failedIDs, len(hook.of(notify.Failed)))
	}

	// The next serve sends it, with its delivery ID, and nothing twice.
	startNotifyServe(t, e.config, work)
	waitFor(t, "serve to send the failed event", func() bool { return len(hook.of(notify.Failed)) == 1 })
	failed := hook.of(notify.Failed)[0]
	hook.mu.Lock()
	took := hook.ids[failed.ID]
	hook.mu.Unlock()
	if took != failedIDs[0] || failed.Spec != "broken" || failed.Error == "" || failed.Show != "orchestrator show "+failed.RunID {
		t.Fatalf("failed event %+v delivered as %s; want delivery %s", failed, took, failedIDs[0])
	}
	if bad := hook.problems(); len(bad) > 0 {
		t.Fatalf("bad deliveries: %v", bad)
	}
	waitFor(t, "serve's outbox to be empty", func() bool {
		due, err := st.DueNotifications(ctx, time.Now().Add(time.Hour), 10)
		return err == nil && len(due) == 0
	})
	for _, kind := range []string{notify.Done, notify.CapReached, notify.Stopped, notify.Failed} {
		if n := len(hook.of(kind)); n != 1 {
			t.Errorf("%d %s events delivered, want 1", n, kind)
		}
	}
	if runs, err := st.ListRuns(ctx, store.RunFilter{}); err != nil || len(runs) != 3 {
		t.Fatalf("runs = %d, %v; want 3", len(runs), err)
	}
}

// TestForegroundWaitingEventOncePerQuestion: a foreground command's run
// waiting longer than notify.waiting_after makes one waiting event (the
// same key serve gives it), sent at once; a delivery the webhook refused
// is counted in the command's last line, and left to serve.
func TestForegroundWaitingEventOncePerQuestion(t *testing.T) {
	t.Parallel()
	hook := newHookReceiver(t)
	dir := t.TempDir()
	cfg := config.DefaultEnv(func(string) (string, bool) { return "", false })
	cfg.StateDir = dir
	cfg.Specs.Dir = filepath.Join(dir, "specs")
	cfg.Notify.Secret = notifySecret
	cfg.Notify.WaitingAfter = config.Duration(time.Nanosecond)
	cfg.Notify.Webhooks = []config.NotifyWebhook{{URL: hook.url, Events: []string{notify.Waiting}}}
	var stderr strings.Builder
	m := &Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Stderr: &stderr}
	ctx := context.Background()
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"rw1", "rw2", "rr3"} {
		if _, err := st.CreateRun(ctx, store.Run{ID: id, Spec: "nightly", Prompt: "p", Surfaces: []string{"terminal"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"rw1", "rw2"} {
		if err := st.UpdateRun(ctx, id, store.RunUpdate{Status: store.RunWaiting}); err != nil {
			t.Fatal(err)
		}
	}
	fn := &foregroundNotify{sn: m.newServeNotify(st, m.newSurfaceSet(st))}
	fn.sn.base, fn.cancel = context.WithCancel(ctx)
	for range 3 {
		fn.checkWaiting(ctx, "rw1", time.Now())
		fn.checkWaiting(ctx, "rr3", time.Now()) // not waiting
	}
	got := hook.of(notify.Waiting)
	if len(got) != 1 || got[0].RunID != "rw1" || !strings.Contains(got[0].Text, "orchestrator status --waiting") {
		t.Fatalf("waiting events = %+v (problems %v)", got, hook.problems())
	}
	run, _ := st.Run(ctx, "rw1")
	if want := fmt.Sprintf("rw1/waiting/%d", run.UpdatedAt.UnixNano()); got[0].ID != want {
		t.Fatalf("event id %s, want serve's %s", got[0].ID, want)
	}
	hook.mu.Lock()
	hook.fail = 1
	hook.mu.Unlock()
	fn.checkWaiting(ctx, "rw2", time.Now())
	fn.flush(ctx, m)
	if !strings.Contains(stderr.String(), "1 webhook notification was not delivered (") {
		t.Fatalf("the last line does not count the refused waiting event: %q", stderr.String())
	}
	if due, err := st.DueNotifications(ctx, time.Now().Add(time.Hour), 10); err != nil || len(due) != 1 {
		t.Fatalf("due = %+v, %v; want rw2's waiting event left for serve", due, err)
	}
}
