package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func (m *Main) newScheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Pause or resume a spec's schedule",
		Long: `schedule pause SPEC stops the spec's schedule: its ticks start no run, on
every serve sharing the store, until schedule resume SPEC. A scheduled spec
whose last serve.pause_after_failures runs failed in a row (default 3; a
spec's pause_after_failures wins) is paused by serve itself, with a notice on
its surfaces; status lists the paused specs and why. Resuming forgives the
failures before it: the next pause takes as many new ones.`,
		Args: cobra.NoArgs,
	}
	for _, verb := range []string{"pause", "resume"} {
		cmd.AddCommand(&cobra.Command{
			Use:         verb + " SPEC",
			Short:       map[string]string{"pause": "Pause a spec's schedule: its ticks start no run", "resume": "Resume a paused spec's schedule"}[verb],
			Annotations: noSurfacesAnnotation(),
			Args:        cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return m.runSchedule(cmd.Context(), verb, args[0])
			},
		})
	}
	return cmd
}

func (m *Main) runSchedule(ctx context.Context, verb, name string) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	if verb == "pause" {
		list, _ := specs.LoadDir(m.Config.Specs.Dir)
		known := false
		for _, sp := range list {
			known = known || (sp.Name == name && sp.Schedule != "")
		}
		if !known {
			return usageError(fmt.Errorf("schedule pause %s: no scheduled spec of that name in %s", name, m.Config.Specs.Dir))
		}
		ok, err := st.PauseSchedule(ctx, store.SchedulePause{Spec: name, Reason: store.PauseByHand, Detail: "paused by " + whoami(), By: whoami()})
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintf(m.Stdout, "the schedule of %s is paused already.\n", name)
			return nil
		}
		fmt.Fprintf(m.Stdout, "the schedule of %s is paused: its ticks start no run until 'orchestrator schedule resume %s'.\n", name, name)
		return nil
	}
	ok, err := st.ResumeSchedule(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(m.Stdout, "the schedule of %s was not paused.\n", name)
		return nil
	}
	fmt.Fprintf(m.Stdout, "the schedule of %s is resumed: it runs from its next tick.\n", name)
	return nil
}

// statusPause is why a spec's schedule is paused (status --json).
type statusPause struct {
	Reason   string    `json:"reason"` // failures or by_hand
	Detail   string    `json:"detail"`
	By       string    `json:"by,omitempty"`
	PausedAt time.Time `json:"paused_at"`
}

// statusTicksSkipped counts a spec's ticks that started no run.
type statusTicksSkipped struct {
	Reason   string     `json:"reason"` // missed or busy
	Count    int64      `json:"count"`
	LastTick *time.Time `json:"last_tick,omitempty"`
}

// statusScheduleHealth adds to schedule the pauses and skipped ticks of
// the store: a paused spec has no next run; a paused spec no longer in
// specs.dir is listed too.
func statusScheduleHealth(ctx context.Context, st *store.Store, schedule []statusNext, spec string) ([]statusNext, error) {
	paused, err := st.PausedSchedules(ctx)
	if err != nil {
		return nil, err
	}
	skips, err := st.ScheduleSkips(ctx)
	if err != nil {
		return nil, err
	}
	at := map[string]int{}
	for i, s := range schedule {
		at[s.Spec] = i
	}
	entry := func(name string) *statusNext {
		i, ok := at[name]
		if !ok {
			schedule = append(schedule, statusNext{Spec: name})
			i = len(schedule) - 1
			at[name] = i
		}
		return &schedule[i]
	}
	for _, p := range paused {
		if spec != "" && p.Spec != spec {
			continue
		}
		e := entry(p.Spec)
		e.Next, e.SkippedWhile = nil, nil
		e.Paused = &statusPause{Reason: p.Reason, Detail: p.Detail, By: p.By, PausedAt: p.PausedAt}
	}
	for _, k := range skips {
		if _, ok := at[k.Spec]; !ok || (spec != "" && k.Spec != spec) {
			continue // a spec no longer scheduled
		}
		e := entry(k.Spec)
		s := statusTicksSkipped{Reason: k.Reason, Count: k.Count}
		if !k.LastTick.IsZero() {
			t := k.LastTick
			s.LastTick = &t
		}
		e.TicksSkipped = append(e.TicksSkipped, s)
	}
	return schedule, nil
}

// printScheduleHealth lists the paused specs with why, and the ticks that
// started no run.
func printScheduleHealth(out io.Writer, schedule []statusNext) {
	for _, s := range schedule {
		if s.Paused != nil {
			fmt.Fprintf(out, "\nschedule of %s paused (%s, %s): %s\n", s.Spec, s.Paused.Reason, s.Paused.PausedAt.Local().Format(time.RFC3339), s.Paused.Detail)
			if s.Paused.Reason != store.PauseFailures {
				fmt.Fprintf(out, "resume it with 'orchestrator schedule resume %s'\n", s.Spec)
			}
		}
	}
	first := true
	for _, s := range schedule {
		for _, k := range s.TicksSkipped {
			if first {
				fmt.Fprintln(out)
				first = false
			}
			what := "skipped while the previous run ran or waited"
			if k.Reason == store.SkipMissed {
				what = "missed: no serve ran"
			}
			fmt.Fprintf(out, "%s: %d tick(s) %s", s.Spec, k.Count, what)
			if k.LastTick != nil {
				fmt.Fprintf(out, " (last %s)", k.LastTick.Local().Format(time.RFC3339))
			}
			fmt.Fprintln(out)
		}
	}
}

// webSchedules is the web inbox's Schedules: the scheduled specs of
// specs.dir with their pauses in the store.
type webSchedules struct {
	m  *Main
	st *store.Store
}

func (w webSchedules) Schedules(ctx context.Context) ([]web.Schedule, error) {
	list, _ := specs.LoadDir(w.m.Config.Specs.Dir)
	var out []web.Schedule
	for _, sp := range list {
		if sp.Schedule == "" {
			continue
		}
		p, _, err := w.st.SchedulePauseOf(ctx, sp.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, web.Schedule{Spec: sp.Name, Schedule: sp.Schedule, Paused: p.Paused, Reason: p.Reason, Detail: p.Detail, PausedAt: p.PausedAt})
	}
	slices.SortFunc(out, func(a, b web.Schedule) int { return strings.Compare(a.Spec, b.Spec) })
	return out, nil
}

func (w webSchedules) SetPaused(ctx context.Context, spec string, paused bool, by string) error {
	list, _ := specs.LoadDir(w.m.Config.Specs.Dir)
	known := false
	for _, sp := range list {
		known = known || (sp.Name == spec && sp.Schedule != "")
	}
	if !known {
		return fmt.Errorf("spec %s: %w", spec, web.ErrNotFound)
	}
	if !paused {
		_, err := w.st.ResumeSchedule(ctx, spec)
		return err
	}
	_, err := w.st.PauseSchedule(ctx, store.SchedulePause{Spec: spec, Reason: store.PauseByHand, Detail: "paused by " + by + " in the web inbox", By: by})
	return err
}
