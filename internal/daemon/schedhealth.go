package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// HealthStore is what schedule health reads and writes of the store
// (*store.Store satisfies it): the pauses every instance reads at each
// tick, the failure streaks that pause a spec, the ticks that started no
// run. A Store without it has no schedule health.
type HealthStore interface {
	ScheduleIsPaused(ctx context.Context, spec string) (bool, error)
	PauseSchedule(ctx context.Context, p store.SchedulePause) (bool, error)
	PausedSchedules(ctx context.Context) ([]store.SchedulePause, error)
	FailureStreak(ctx context.Context, spec string, n int) ([]store.Run, error)
	RecordSkips(ctx context.Context, spec, reason string, n int64, last time.Time) (bool, error)
	SkipsNoticed(ctx context.Context, spec string, t time.Time) (bool, error)
	ScheduleSkips(ctx context.Context) ([]store.ScheduleSkip, error)
}

// DefaultPauseAfterFailures is Config.PauseAfterFailures' default.
const DefaultPauseAfterFailures = 3

// ScheduleNotice is what the daemon tells about a spec's schedule
// (Config.Notice): it paused itself, or ticks started no run.
type ScheduleNotice struct {
	// Kind is NoticePaused or NoticeSkipped.
	Kind string
	Spec specs.Spec
	// Runs are the failed runs that paused the spec, newest first.
	Runs []store.Run
	// Skips are the spec's skipped ticks (NoticeSkipped), by reason.
	Skips []store.ScheduleSkip
	// Text says it for people, with how to resume.
	Text string
}

// Kinds of ScheduleNotice.
const (
	NoticePaused  = "paused"
	NoticeSkipped = "skipped"
)

func (d *Daemon) healthStore() HealthStore {
	h, _ := d.cfg.Store.(HealthStore)
	return h
}

// specByName returns the version of the spec the daemon schedules.
func (d *Daemon) specByName(name string) (specs.Spec, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.specTexts[name]; ok {
		return l.spec, true
	}
	for _, sp := range d.cfg.Specs {
		if sp.Name == name {
			return sp, true
		}
	}
	return specs.Spec{}, false
}

// pauseAfter is how many failed runs in a row pause sp; 0 never.
func (d *Daemon) pauseAfter(sp specs.Spec) int {
	if sp.PauseAfterFailures != nil {
		return int(*sp.PauseAfterFailures)
	}
	switch n := d.cfg.PauseAfterFailures; {
	case n < 0:
		return 0
	case n == 0:
		return DefaultPauseAfterFailures
	default:
		return n
	}
}

// paused is the scheduler's Paused: a store read at each tick, so that a
// pause made at another instance holds here from the next tick. A store
// error does not pause (the tick then fails to make its run, logged).
func (d *Daemon) paused(spec string) bool {
	h := d.healthStore()
	if h == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p, err := h.ScheduleIsPaused(ctx, spec)
	if err != nil {
		d.log.Error("read whether the spec's schedule is paused", "spec", spec, "err", err)
		return false
	}
	return p
}

// skipped is the scheduler's Skipped: the ticks are recorded in the store
// (status, metrics) and told once a day.
func (d *Daemon) skipped(spec, reason string, n int64, last time.Time) {
	if reason == specs.SkipMissed {
		d.log.Warn("schedule ticks missed: no serve ran at them", "spec", spec, "ticks", n, "last", last)
	}
	h := d.healthStore()
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	due, err := h.RecordSkips(ctx, spec, reason, n, last)
	if err != nil {
		d.log.Error("record the skipped ticks", "spec", spec, "err", err)
		return
	}
	if !due || d.cfg.Notice == nil {
		return
	}
	if ok, err := h.SkipsNoticed(ctx, spec, time.Now()); err != nil || !ok {
		return
	}
	all, err := h.ScheduleSkips(ctx)
	if err != nil {
		d.log.Error("read the skipped ticks", "spec", spec, "err", err)
		return
	}
	var mine []store.ScheduleSkip
	var parts []string
	for _, k := range all {
		if k.Spec == spec {
			mine = append(mine, k)
			parts = append(parts, fmt.Sprintf("%d %s", k.Count, skipWhy(k.Reason)))
		}
	}
	sp, _ := d.specByName(spec)
	sp.Name = spec
	d.cfg.Notice(ctx, ScheduleNotice{Kind: NoticeSkipped, Spec: sp, Skips: mine,
		Text: fmt.Sprintf("Ticks of the schedule of spec %s started no run: %s. `orchestrator status` lists them.", spec, strings.Join(parts, ", "))})
}

func skipWhy(reason string) string {
	switch reason {
	case store.SkipMissed:
		return "missed (no serve ran)"
	case store.SkipBusy:
		return "skipped (the previous run still ran or waited on a question)"
	case store.SkipCap:
		return "skipped by a spend cap (asked once this period)"
	}
	return reason
}

// checkFailures pauses spec's schedule when its last runs failed in a
// row, and tells it (once: the store pauses it once).
func (d *Daemon) checkFailures(ctx context.Context, spec string) {
	h := d.healthStore()
	if h == nil || spec == "" {
		return
	}
	sp, ok := d.specByName(spec)
	if !ok || sp.Schedule == "" {
		return // only a schedule pauses
	}
	n := d.pauseAfter(sp)
	if n <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	runs, err := h.FailureStreak(ctx, spec, n)
	if err != nil {
		d.log.Error("read the spec's last runs", "spec", spec, "err", err)
		return
	}
	if runs == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The schedule of spec %s is paused: its last %d runs failed.\n", spec, len(runs))
	for _, r := range runs {
		fmt.Fprintf(&b, "- %s: %s\n", r.ID, firstLine(r.Error))
	}
	fmt.Fprintf(&b, "Resume it with `orchestrator schedule resume %s` (or Resume in the web inbox) once the cause is fixed; `orchestrator show RUN` shows a run.", spec)
	detail := b.String()
	paused, err := h.PauseSchedule(ctx, store.SchedulePause{Spec: spec, Reason: store.PauseFailures, Detail: detail, By: "orchestrator"})
	if err != nil {
		d.log.Error("pause the spec's schedule", "spec", spec, "err", err)
		return
	}
	if !paused {
		return
	}
	d.log.Warn("schedule paused: its last runs failed", "spec", spec, "failures", len(runs), "resume", "orchestrator schedule resume "+spec)
	if d.cfg.Notice != nil {
		d.cfg.Notice(ctx, ScheduleNotice{Kind: NoticePaused, Spec: sp, Runs: runs, Text: detail})
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 300 {
		s = s[:300] + " …"
	}
	if s == "" {
		return "(no error recorded)"
	}
	return s
}

var (
	specPausedDesc = prometheus.NewDesc("orchestrator_spec_paused",
		"1 while the spec's schedule is paused (by hand, or after its runs failed), 0 once resumed.", []string{"spec"}, nil)
	ticksSkippedDesc = prometheus.NewDesc("orchestrator_schedule_ticks_skipped_total",
		"Schedule ticks that started no run, by reason: missed (no serve ran), busy (the previous run still ran or waited).",
		[]string{"spec", "reason"}, nil)
)

// healthCollector reads the pauses and skipped ticks from the store at
// each scrape: they hold for every instance and survive restarts.
type healthCollector struct {
	h HealthStore
	// scheduled lists the specs scheduled here: 0 for those not paused.
	scheduled func() []string
	mu        sync.Mutex
	seen      map[string]bool // specs paused at a scrape: 0 once resumed
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- specPausedDesc
	ch <- ticksSkippedDesc
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	paused, err := c.h.PausedSchedules(ctx)
	if err == nil {
		c.mu.Lock()
		now := map[string]bool{}
		for _, p := range paused {
			now[p.Spec] = true
			c.seen[p.Spec] = true
		}
		if c.scheduled != nil {
			for _, name := range c.scheduled() {
				c.seen[name] = true
			}
		}
		for spec := range c.seen {
			v := 0.0
			if now[spec] {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(specPausedDesc, prometheus.GaugeValue, v, spec)
		}
		c.mu.Unlock()
	}
	if skips, err := c.h.ScheduleSkips(ctx); err == nil {
		for _, k := range skips {
			ch <- prometheus.MustNewConstMetric(ticksSkippedDesc, prometheus.CounterValue, float64(k.Count), k.Spec, k.Reason)
		}
	}
}

// watchHealth registers the schedule health metrics once per Metrics.
func (m *Metrics) watchHealth(h HealthStore, scheduled func() []string) {
	m.healthOnce.Do(func() {
		m.Registry.MustRegister(&healthCollector{h: h, scheduled: scheduled, seen: map[string]bool{}})
	})
}

// scheduledSpecs lists the names of the specs with a schedule.
func (d *Daemon) scheduledSpecs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name, l := range d.specTexts {
		if l.spec.Schedule != "" {
			out = append(out, name)
		}
	}
	for _, sp := range d.cfg.Specs {
		if sp.Schedule != "" {
			out = append(out, sp.Name)
		}
	}
	return out
}
