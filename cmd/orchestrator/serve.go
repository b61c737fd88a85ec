package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

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
schedules, asks every pending question on its surfaces, serves the GitHub
webhook (when surfaces.github.webhook_secret is set), /healthz and Prometheus
/metrics on serve.listen, and on start takes up every waiting and interrupted
run from the store. SIGTERM or SIGINT stops scheduling, interrupts running
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
	list, err := specs.LoadDir(m.Config.Specs.Dir)
	if err != nil {
		return configError(fmt.Errorf("specs in %s: %w", m.Config.Specs.Dir, err))
	}
	var refused []error
	for _, sp := range list {
		refused = append(refused, specRefusals(m.Config, sp)...)
	}
	if len(refused) > 0 {
		return configError(problemsError("specs in "+m.Config.Specs.Dir, errors.Join(refused...)))
	}
	if !config.IsLoopbackListen(m.Config.Serve.Listen) {
		m.Logger.Warn("serve.listen is not a loopback address: /metrics and /healthz are public to whoever reaches it (they need no authentication)",
			"listen", m.Config.Serve.Listen)
	}
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	metrics := daemon.NewMetrics(st)
	m.metrics = metrics
	m.serving = true
	m.handlers = serveHandlers{}
	r, ss, err := m.newRunner(st, func(ev runner.Event) {
		metrics.Observe(ev)
		logEvent(m.Logger, ev)
	})
	if err != nil {
		return err
	}
	// Build the configured surfaces now: a bad setup fails at start, and
	// their webhook handlers are mounted.
	for _, name := range m.defaultSurfaces() {
		if _, err := ss.get(name, nil); err != nil {
			return configError(fmt.Errorf("surface %s: %w", name, err))
		}
	}
	d, err := daemon.New(daemon.Config{
		Specs: list,
		Runs:  r,
		Store: st,
		NewRun: func(sp specs.Spec) runner.NewRun {
			n, err := m.newRunFrom(sp.Path, runFlags{})
			if err != nil {
				m.Logger.Error("spec", "spec", sp.Name, "err", err)
				b, _ := json.Marshal(runOptions{SpecPath: sp.Path})
				return runner.NewRun{Spec: sp.Name, Title: sp.Name, Prompt: sp.Body, WorkDir: sp.WorkDir, Options: b}
			}
			return n
		},
		Listen:        m.Config.Serve.Listen,
		MaxConcurrent: m.Config.Serve.MaxConcurrentRuns,
		CatchUp:       m.Config.Serve.CatchUp,
		Handlers:      m.handlers,
		Metrics:       metrics,
		Logger:        m.Logger,
	})
	if err != nil {
		return configError(err)
	}
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
			log.Info("turn finished", "run", ev.RunID, "turn", ev.Turn, "status", o.Status, "category", o.Category, "cost_usd", o.CostUSD)
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
	case runner.EventRunEnded:
		if ev.Run != nil {
			log.Info("run stopped", "run", ev.RunID, "status", ev.Run.Status, "err", ev.Err)
		}
	}
}
