package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/daemon"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func (m *Main) newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: scheduled specs, pending questions, webhook, /healthz, /metrics",
		Long: `serve is the long-running daemon. It runs the specs of specs.dir on their
schedules and follows the folder: added, changed and removed spec files take
effect within 2 seconds; a file that stops validating keeps its last good
version and is reported (log, /healthz). Without a specs.dir folder it drives
the store's runs and questions only, and picks the folder up when it appears.
It asks every pending question on its surfaces, serves the GitHub
webhook (when surfaces.github.webhook_secret is set), /healthz and Prometheus
/metrics on serve.listen, and on start takes up every waiting and interrupted
run from the store, and later every run no process drives (a 'run' that exited
waiting, then answered). SIGTERM or SIGINT stops scheduling, interrupts running
turns (their sessions stay resumable) and keeps every pending question; the
next serve continues them. Only one serve may use a state directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runServe(cmd.Context())
		},
	}
	return cmd
}

// serveHandlers are the HTTP handlers the surfaces contribute (the GitHub
// webhook), by ServeMux pattern; filled in by buildSurface.
type serveHandlers map[string]http.Handler

func (m *Main) runServe(ctx context.Context) error {
	if !config.IsLoopbackListen(m.Config.Serve.Listen) {
		m.Logger.Warn("serve.listen is not a loopback address: /metrics and /healthz are public to whoever reaches it (they need no authentication)",
			"listen", m.Config.Serve.Listen)
	}
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	servePprof(ctx, m.Logger)
	metrics := daemon.NewMetrics(st)
	metrics.Registry.MustRegister(newSpendCollector(st, m.Config.Limits)) // spend_metrics.go
	m.metrics = metrics
	m.serving = true
	m.handlers = serveHandlers{}
	var sn *serveNotify // notify.go
	r, ss, err := m.newRunner(st, func(ev runner.Event) {
		metrics.Observe(ev)
		logEvent(m.Logger, ev)
		sn.observe(ev)
	})
	if err != nil {
		return err
	}
	sn = m.newServeNotify(st, ss)
	m.notifier = sn.n
	// Build the configured surfaces now: a bad setup fails at start, and
	// their webhook handlers are mounted.
	for _, name := range m.defaultSurfaces() {
		if _, err := ss.get(name, nil); err != nil {
			return configError(fmt.Errorf("surface %s: %w", name, err))
		}
	}
	var dm atomic.Pointer[daemon.Daemon] // the daemon, once made: whether it leads
	leading := func() bool { d := dm.Load(); return d != nil && d.Leader() }
	if err := m.startTriggers(ctx, st, r, leading); err != nil { // triggers.go
		return err
	}
	if err := m.startSlackTriggers(ctx, st, r, ss); err != nil { // trigger_slack.go
		return err
	}
	if err := m.startReviewIntake(ctx, st, ss); err != nil { // review.go
		return err
	}
	resumer, err := m.mountWeb(ctx, st, ss)
	if err != nil {
		return err
	}
	d, err := daemon.New(daemon.Config{
		SpecsDir: m.Config.Specs.Dir,
		CheckSpec: func(sp specs.Spec) error {
			return errors.Join(specRefusals(m.Config, sp)...)
		},
		Runs:          r,
		Asks:          r,
		Store:         st,
		NewRun:        m.newRunFromSpec,
		Listen:        m.Config.Serve.Listen,
		MaxConcurrent: m.Config.Serve.MaxConcurrentRuns,
		CatchUp:       m.Config.Serve.CatchUp,
		Handlers:      m.handlers,
		Metrics:       metrics,
		SurfaceHealth: ss.health,
		Logger:        m.Logger,

		// Schedule health and its notices (notify.go).
		PauseAfterFailures: pauseAfterFailures(m.Config.Serve.PauseAfterFailures),
		Notice:             sn.notice,
		// A schedule past its spend cap asks once per period (runner/caps.go).
		CapSkip: func(ctx context.Context, sp specs.Spec) (string, error) {
			return r.CapSkip(ctx, sp.Name, sp.MaxCostUSDPerDay)
		},
	})
	if err != nil {
		return configError(problemsError("serve", err))
	}
	resumer.d = d
	dm.Store(d)
	go m.retryDeliveries(ctx, st, r)
	go m.serveGC(ctx, st) // serve_gc.go
	sn.start(ctx)
	defer sn.wait()
	go func() {
		select {
		case <-d.Ready():
			if m.serveReady != nil {
				m.serveReady(d.Addr())
			}
		case <-ctx.Done():
		}
	}()
	return d.Run(ctx)
}

// logEvent logs the runner's events in the daemon, where no progress is shown.
func logEvent(log *slog.Logger, ev runner.Event) {
	switch ev.Kind {
	case runner.EventTurnStarted:
		log.Info("turn started", "run", ev.RunID, "turn", ev.Turn, "kind", ev.TurnKind)
	case runner.EventToolUse:
		log.Debug("tool use", "run", ev.RunID, "tool", ev.Tool, "input", ev.Text)
	case runner.EventTurnFinished:
		if o := ev.Outcome; o != nil {
			attrs := []any{"run", ev.RunID, "turn", ev.Turn, "status", o.Status}
			if o.Category != "" {
				attrs = append(attrs, "category", o.Category)
			}
			log.Info("turn finished", append(attrs, "cost_usd", roundCost(o.TurnCostUSD))...)
		}
	case runner.EventQuestion:
		if ev.Set != nil {
			log.Info("question asked", "run", ev.RunID, "set", ev.Set.ID, "questions", len(ev.Set.Questions), "surfaces", ev.Surfaces)
		}
	case runner.EventAnswer:
		if ev.Response != nil {
			log.Info("answered", "run", ev.RunID, "set", ev.Response.SetID, "by", ev.Response.By, "surface", ev.Response.Surface)
		}
	case runner.EventReminder, runner.EventEscalated, runner.EventRetry, runner.EventCorrection:
		log.Info(string(ev.Kind), "run", ev.RunID, "text", ev.Text, "surfaces", ev.Surfaces)
	case runner.EventDelivered:
		log.Info("delivered", "run", ev.RunID, "delivery", ev.Text)
	case runner.EventRunEnded:
		if ev.Run != nil {
			attrs := []any{"run", ev.RunID, "status", ev.Run.Status, "cost_usd", roundCost(ev.Run.CostUSD)}
			if ev.Err != nil { // a run that ended well logs no err=<nil>
				attrs = append(attrs, "err", ev.Err)
			}
			log.Info("run stopped", attrs...)
		}
	}
}

// roundCost rounds a cost in US dollars to the 1/10000 the progress lines
// show, for logs.
func roundCost(usd float64) float64 { return math.Round(usd*1e4) / 1e4 }
