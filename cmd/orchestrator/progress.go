package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/terminal"
)

// progress shows a run's progress: plain lines, a live status line when
// stdout is a terminal, or NDJSON events with --json.
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	asJSON  bool
	tty     bool
	start   time.Time
	cost    float64
	turn    int
	status  string // the status line shown, "" when none
	ticker  *time.Ticker
	stopped chan struct{}
}

func (m *Main) newProgress(asJSON bool) *progress {
	p := &progress{out: m.Stdout, asJSON: asJSON, start: time.Now()}
	if f, ok := m.Stdout.(*os.File); ok && !asJSON {
		p.tty = terminal.IsTerminal(f)
	}
	return p
}

// line prints one line above the status line.
func (p *progress) line(format string, args ...any) {
	if p.asJSON {
		return
	}
	p.clearStatus()
	fmt.Fprintf(p.out, format+"\n", args...)
	p.drawStatus()
}

func (p *progress) clearStatus() {
	if p.tty && p.status != "" {
		fmt.Fprint(p.out, "\r\033[K")
	}
}

func (p *progress) drawStatus() {
	if p.tty && p.status != "" {
		fmt.Fprint(p.out, p.status)
	}
}

// setStatus replaces the live status line (TTY only).
func (p *progress) setStatus(s string) {
	if !p.tty {
		return
	}
	p.clearStatus()
	p.status = s
	p.drawStatus()
}

func (p *progress) startTicker() {
	if !p.tty || p.ticker != nil {
		return
	}
	p.ticker = time.NewTicker(250 * time.Millisecond)
	p.stopped = make(chan struct{})
	t, done := p.ticker, p.stopped
	go func() {
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.mu.Lock()
				if p.status != "" {
					p.setStatus(p.statusText())
				}
				p.mu.Unlock()
			}
		}
	}()
}

func (p *progress) stopTicker() {
	if p.ticker != nil {
		p.ticker.Stop()
		close(p.stopped)
		p.ticker = nil
	}
	p.setStatus("")
}

func (p *progress) statusText() string {
	return fmt.Sprintf("\033[2m⋯ turn %d · %s · $%.4f\033[0m", p.turn, since(time.Since(p.start)), p.cost)
}

// emit prints one NDJSON line.
func (p *progress) emit(ev jsonEvent) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	fmt.Fprintf(p.out, "%s\n", b)
}

func (p *progress) started(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		ev := newJSONEvent(evRunStarted, run.ID, time.Now())
		jr := newJSONRun(run)
		ev.Run = &jr
		p.emit(ev)
		return
	}
	p.line("run %s: %s (surfaces: %s)", run.ID, questions.Printable(run.Title), strings.Join(orNone(run.Surfaces), ", "))
}

func (p *progress) resumed(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		ev := newJSONEvent(evRunResumed, run.ID, time.Now())
		jr := newJSONRun(run)
		ev.Run = &jr
		p.emit(ev)
		return
	}
	p.line("resuming run %s: %s (%s)", run.ID, questions.Printable(run.Title), run.Status)
}

// ended prints the run_ended event: the run as Drive left it, and the error
// that stopped it, if any (the run's own error when it failed).
func (p *progress) ended(run store.Run, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.asJSON || run.ID == "" {
		return
	}
	ev := newJSONEvent(evRunEnded, run.ID, time.Now())
	jr := newJSONRun(run)
	ev.Run = &jr
	switch {
	case err != nil:
		ev.Error = questions.Printable(err.Error())
	case run.Status == store.RunFailed:
		ev.Error = jr.Error
	}
	p.emit(ev)
}

func orNone(s []string) []string {
	if len(s) == 0 {
		return []string{"none"}
	}
	return s
}

// observe receives the runner's events.
func (p *progress) observe(ev runner.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		if jev, ok := newJSONEventOf(ev, time.Now()); ok {
			p.emit(jev)
		}
		return
	}
	switch ev.Kind {
	case runner.EventTurnStarted:
		p.turn = ev.Turn
		p.line("▸ turn %d (%s)", ev.Turn, ev.TurnKind)
		p.status = p.statusText()
		p.drawStatus()
		p.startTicker()
	case runner.EventText:
		p.line("%s", indent(questions.Printable(ev.Text)))
	case runner.EventToolUse:
		if ev.Text != "" {
			p.line("  ⚙ %s: %s", questions.Printable(ev.Tool), oneLine(ev.Text))
		} else {
			p.line("  ⚙ %s", questions.Printable(ev.Tool))
		}
	case runner.EventCost:
		p.cost = ev.CostUSD
	case runner.EventTurnFinished:
		p.stopTicker()
		if o := ev.Outcome; o != nil {
			msg := fmt.Sprintf("  turn %d finished in %s, $%.4f", ev.Turn, since(o.Duration), o.CostUSD)
			if o.Category != "" {
				msg += fmt.Sprintf(" — %s: %s", o.Category, oneLine(o.Error))
			}
			p.line("%s", msg)
			if o.MalformedLines > 0 || o.OversizeLines > 0 {
				var parts []string
				if o.MalformedLines > 0 {
					parts = append(parts, fmt.Sprintf("%d not JSON", o.MalformedLines))
				}
				if o.OversizeLines > 0 {
					parts = append(parts, fmt.Sprintf("%d over agent.max_line_bytes", o.OversizeLines))
				}
				p.line("  ⚠ skipped lines of the CLI's output: %s", strings.Join(parts, ", "))
				for _, d := range skippedDetails(*o) {
					p.line("    %s", oneLine(d))
				}
			}
		}
	case runner.EventQuestion:
		p.stopTicker()
		if ev.Set != nil {
			p.line("? the model asks %d question(s) (set %s) on %s", len(ev.Set.Questions), ev.Set.ID, strings.Join(orNone(ev.Surfaces), ", "))
		}
	case runner.EventAnswer:
		if ev.Response != nil {
			p.line("✓ answered by %s on %s", oneLine(ev.Response.By), ev.Response.Surface)
		}
	case runner.EventReminder:
		p.line("… reminder sent for set %s", setID(ev))
	case runner.EventEscalated:
		p.line("↑ set %s escalated to %s", setID(ev), strings.Join(ev.Surfaces, ", "))
	case runner.EventRetry:
		p.line("↻ %s", ev.Text)
	case runner.EventDelivered:
		p.line("⇪ %s", ev.Text)
	case runner.EventCorrection:
		p.line("✎ the model's QUESTION block was not valid (%s); asking it to correct it", oneLine(ev.Text))
	}
}

func setID(ev runner.Event) string {
	if ev.Set != nil {
		return ev.Set.ID
	}
	return ""
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

// oneLine makes untrusted text printable on one line of at most 200
// characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(questions.Printable(s)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}

func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopTicker()
}

func (p *progress) done(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	p.line("✔ run %s done in %s, $%.4f", run.ID, since(time.Since(p.start)), run.CostUSD)
	if run.FinalText != "" {
		p.line("%s", indent(questions.Printable(run.FinalText)))
	}
}

func (p *progress) failed(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	p.line("✘ run %s failed: %s", run.ID, questions.Printable(run.Error))
}

func (p *progress) waiting(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	p.line("⏸ run %s is waiting for an answer. Answer with 'orchestrator answer QID TEXT', then 'orchestrator resume %s'.", run.ID, run.ID)
}

func (p *progress) interrupted(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	p.line("■ run %s interrupted (%s); continue it with 'orchestrator resume %s'", run.ID, run.Status, run.ID)
}

// since formats a duration for people.
func since(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// foreground quiets the log of commands that show their own progress (run,
// resume, rehearse): unless the level was chosen (--log-level or
// log.level), only warnings and errors are logged beside the progress.
func (m *Main) foreground() {
	if m.logLevelFlag != "" || m.Config.Line("log.level") != 0 {
		return
	}
	lc := m.Config.Log
	lc.Level = "warn"
	m.Logger = newLogger(m.Stderr, lc)
}
