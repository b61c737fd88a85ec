package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/daemon"
	"github.com/orchestrator-dev/orchestrator/internal/notify"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// serveNotify is serve's side of notifications: the notifier (notify:
// routes, the durable webhook outbox), the runner's events it turns into
// done, failed and stopped events, the waiting questions it watches, and
// the schedule notices of the daemon.
type serveNotify struct {
	m  *Main
	st *store.Store
	ss *surfaceSet
	n  *notify.Notifier

	mu     sync.Mutex
	waited map[string]bool // waiting events emitted, by key
	wg     sync.WaitGroup  // the goroutines of start and observe
	// own are specs whose notify: sections count before those of
	// specs.dir: a foreground command's run's spec, wherever its file is.
	own []specs.Spec
	// base is what the events' emitting derives from: a foreground
	// command cuts it short when it exits (notify_foreground.go); nil:
	// context.Background().
	base context.Context
}

// emitContext is what emitting one event may take.
func (sn *serveNotify) emitContext() (context.Context, context.CancelFunc) {
	base := sn.base
	if base == nil {
		base = context.Background()
	}
	return context.WithTimeout(base, 2*time.Minute)
}

// start delivers the webhooks and watches the waiting runs until ctx ends;
// wait waits for them and the events being emitted.
func (sn *serveNotify) start(ctx context.Context) {
	sn.wg.Add(2)
	go func() { defer sn.wg.Done(); sn.n.Run(ctx) }()
	go func() { defer sn.wg.Done(); sn.watchWaiting(ctx) }()
}

func (sn *serveNotify) wait() { sn.wg.Wait() }

func (m *Main) newServeNotify(st *store.Store, ss *surfaceSet) *serveNotify {
	sn := &serveNotify{m: m, st: st, ss: ss, waited: map[string]bool{}}
	sn.n = notify.New(notify.Options{
		Outbox: st,
		Route:  func(spec string) notify.Route { return toRoute(sn.route(spec)) },
		Secret: []byte(m.Config.Notify.Secret),
		Post:   sn.post,
		Logger: m.Logger,
	})
	return sn
}

// route is the configuration's notify route with the spec's notify:
// section's lists in place of those it sets.
func (sn *serveNotify) route(spec string) config.NotifyRoute {
	r := sn.m.Config.Notify.NotifyRoute
	if spec == "" {
		return r
	}
	list := sn.own
	if !slices.ContainsFunc(list, func(sp specs.Spec) bool { return sp.Name == spec }) {
		list, _ = specs.LoadDir(sn.m.Config.Specs.Dir)
	}
	for _, sp := range list {
		if sp.Name != spec || sp.Notify == nil {
			continue
		}
		if sp.Notify.Surfaces != nil {
			r.Surfaces = sp.Notify.Surfaces
		}
		if sp.Notify.Webhooks != nil {
			r.Webhooks = sp.Notify.Webhooks
		}
		if sp.Notify.WaitingAfter > 0 {
			r.WaitingAfter = sp.Notify.WaitingAfter
		}
	}
	return r
}

func toRoute(r config.NotifyRoute) notify.Route {
	out := notify.Route{Surfaces: r.Surfaces}
	for _, w := range r.Webhooks {
		out.Webhooks = append(out.Webhooks, notify.Webhook{URL: w.URL, Events: w.Events})
	}
	return out
}

// post posts ev's text as a notice on the surfaces of its run.
func (sn *serveNotify) post(ctx context.Context, ev notify.Event) error {
	if ev.RunID == "" {
		sn.m.Logger.Warn("notice", "spec", ev.Spec, "event", ev.Kind, "text", ev.Text)
		return nil
	}
	run, err := sn.st.Run(ctx, ev.RunID)
	if err != nil {
		return err
	}
	sp, err := sn.m.specOf(run)
	if err != nil {
		return err
	}
	surfs, err := sn.ss.surfacesFor(run, sp)
	if err != nil {
		return err
	}
	var errs []error
	for _, sf := range surfs {
		if nt, ok := sf.(surfaces.Noticer); ok {
			if err := nt.Notice(ctx, run.ID, ev.Key, ev.Text); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", sf.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// observe turns a run's end into its event: done (with its pull request
// and cost), failed (with the error and the show command), stopped; and a
// spend cap's question into cap_reached, once per question.
func (sn *serveNotify) observe(ev runner.Event) {
	if sn != nil && ev.Kind == runner.EventCapReached && ev.Set != nil {
		sn.capReached(ev)
		return
	}
	if sn == nil || ev.Kind != runner.EventRunEnded || ev.Run == nil {
		return
	}
	run := *ev.Run
	var kind string
	switch run.Status {
	case store.RunDone:
		kind = notify.Done
	case store.RunFailed:
		kind = notify.Failed
	case store.RunStopped, store.RunCancelled:
		kind = notify.Stopped
	default:
		return
	}
	sn.wg.Add(1)
	go func() { // off the runner's goroutine: a surface's request may be slow
		defer sn.wg.Done()
		ctx, cancel := sn.emitContext()
		defer cancel()
		e := notify.Event{Kind: kind, Spec: run.Spec, RunID: run.ID, Status: string(run.Status), Title: run.Title,
			CostUSD: run.CostUSD, Error: run.Error}
		switch kind {
		case notify.Done:
			if d, ok, err := sn.st.Delivery(ctx, run.ID); err == nil && ok {
				e.PRURL = d.PRURL
			}
			e.Text = fmt.Sprintf("Run %s is done (cost $%.4f).", run.ID, run.CostUSD)
			if e.PRURL != "" {
				e.Text += " Pull request: " + e.PRURL
			}
		case notify.Failed:
			e.Text = fmt.Sprintf("Run %s failed: %s\nSee `orchestrator show %s`.", run.ID, firstLineOf(run.Error), run.ID)
		default:
			e.Text = fmt.Sprintf("Run %s stopped (%s).", run.ID, run.Status)
		}
		if err := sn.n.Emit(ctx, e); err != nil {
			sn.m.Logger.Warn("notify: run ended", "run", run.ID, "err", err)
		}
	}()
}

// capReached emits cap_reached for a run a spend cap stopped before a
// turn, keyed by its question set: the same cap question is told once.
func (sn *serveNotify) capReached(ev runner.Event) {
	set := *ev.Set
	sn.wg.Add(1)
	go func() {
		defer sn.wg.Done()
		ctx, cancel := sn.emitContext()
		defer cancel()
		e := notify.Event{Kind: notify.CapReached, RunID: ev.RunID, Status: "waiting", Title: set.Title, Key: set.ID + "/" + notify.CapReached}
		if run, err := sn.st.Run(ctx, ev.RunID); err == nil {
			e.Spec, e.CostUSD = run.Spec, run.CostUSD
		}
		e.Text = ev.Text
		if len(set.Questions) > 0 {
			e.Text += "\nIt asks: " + set.Questions[0].Text + " (`orchestrator answer` or any surface of the run)."
		}
		if err := sn.n.Emit(ctx, e); err != nil {
			sn.m.Logger.Warn("notify: cap reached", "run", ev.RunID, "err", err)
		}
	}()
}

// notice is the daemon's ScheduleNotice: a pause is posted on the spec's
// surfaces (on the issue of its last failed run) whatever the routes say,
// and queued as a paused event for the webhooks; skipped ticks are posted
// on the surfaces of the spec's newest run, or logged.
func (sn *serveNotify) notice(ctx context.Context, n daemon.ScheduleNotice) {
	var runID string
	if len(n.Runs) > 0 {
		runID = n.Runs[0].ID
	} else if runs, err := sn.st.ListRuns(ctx, store.RunFilter{Spec: n.Spec.Name, Limit: 1, Brief: true}); err == nil && len(runs) > 0 {
		runID = runs[0].ID
	}
	ev := notify.Event{Kind: notify.Paused, Spec: n.Spec.Name, RunID: runID, Text: n.Text, Status: "paused"}
	if len(n.Runs) > 0 {
		ev.Error = n.Runs[0].Error
	}
	switch n.Kind {
	case daemon.NoticePaused:
		ev.Key = n.Spec.Name + "/paused/" + runID
		if err := sn.n.Queue(ctx, ev); err != nil {
			sn.m.Logger.Warn("notify: schedule paused", "spec", n.Spec.Name, "err", err)
		}
	default:
		ev.Key = n.Spec.Name + "/skipped/" + time.Now().UTC().Format("2006-01-02")
	}
	sn.m.Logger.Warn("notice", "spec", n.Spec.Name, "kind", n.Kind, "text", n.Text)
	if runID != "" {
		if err := sn.post(ctx, ev); err != nil {
			sn.m.Logger.Warn("notice not posted on the spec's surfaces", "spec", n.Spec.Name, "err", err)
		}
	}
}

// watchWaiting emits a waiting event for each run whose question waits
// longer than its route's waiting_after, once per question, until ctx
// ends; it looks every minute, and only when a route takes waiting events.
func (sn *serveNotify) watchWaiting(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sn.emitWaiting(ctx)
	}
}

func (sn *serveNotify) emitWaiting(ctx context.Context) {
	if !sn.anyRouteWaits() {
		return
	}
	runs, err := sn.st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.RunWaiting}, Limit: 1000, Brief: true})
	if err != nil {
		sn.m.Logger.Warn("notify: list the waiting runs", "err", err)
		return
	}
	now := time.Now()
	for _, run := range runs {
		sn.waitingEvent(ctx, run, now)
	}
}

// waitingEvent emits the waiting event of run, waiting since its last
// update, once that is longer ago than its route's waiting_after: once
// per question in this process, and queued once per webhook whichever
// process emits it (its key is the same).
func (sn *serveNotify) waitingEvent(ctx context.Context, run store.Run, now time.Time) {
	after := sn.route(run.Spec).WaitingAfter.Std()
	if after <= 0 {
		after = config.DefaultWaitingAfter.Std()
	}
	if now.Sub(run.UpdatedAt) < after {
		return
	}
	key := fmt.Sprintf("%s/waiting/%d", run.ID, run.UpdatedAt.UnixNano())
	sn.mu.Lock()
	seen := sn.waited[key]
	sn.waited[key] = true
	sn.mu.Unlock()
	if seen {
		return
	}
	e := notify.Event{Kind: notify.Waiting, Key: key, Spec: run.Spec, RunID: run.ID, Status: string(run.Status), Title: run.Title,
		CostUSD: run.CostUSD, Text: fmt.Sprintf("Run %s waits for an answer since %s: `orchestrator status --waiting` lists its question.",
			run.ID, run.UpdatedAt.Format(time.RFC3339))}
	if err := sn.n.Emit(ctx, e); err != nil {
		sn.m.Logger.Warn("notify: waiting", "run", run.ID, "err", err)
	}
}

// anyRouteWaits reports whether the configuration or a spec routes
// waiting events anywhere.
func (sn *serveNotify) anyRouteWaits() bool {
	routes := []config.NotifyRoute{sn.m.Config.Notify.NotifyRoute}
	list, _ := specs.LoadDir(sn.m.Config.Specs.Dir)
	for _, sp := range list {
		if sp.Notify != nil {
			routes = append(routes, sn.route(sp.Name))
		}
	}
	for _, r := range routes {
		if wantsKind(r, notify.Waiting) {
			return true
		}
	}
	return false
}

func wantsKind(r config.NotifyRoute, kind string) bool {
	for _, k := range r.Surfaces {
		if k == kind {
			return true
		}
	}
	for _, w := range r.Webhooks {
		if len(w.Events) == 0 {
			return true
		}
		for _, k := range w.Events {
			if k == kind {
				return true
			}
		}
	}
	return false
}

func firstLineOf(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i] + " …"
		}
	}
	if len(s) > 500 {
		return s[:500] + " …"
	}
	return s
}

// pauseAfterFailures is the daemon's PauseAfterFailures for
// serve.pause_after_failures: there 0 never pauses, in the daemon a
// negative number does (0 is its default).
func pauseAfterFailures(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// notifySecretRefusal refuses a spec's notify.webhooks when the
// configuration has no notify.secret to sign them with.
func notifySecretRefusal(cfg config.Config, sp specs.Spec) error {
	if sp.Notify == nil || len(sp.Notify.Webhooks) == 0 || cfg.Notify.Secret != "" {
		return nil
	}
	return &specs.Error{File: sp.Path, Line: sp.Line("notify"), Key: "notify.webhooks",
		Err: errors.New("webhook deliveries are signed: set notify.secret in the configuration (from the environment: ${NOTIFY_SECRET})")}
}
