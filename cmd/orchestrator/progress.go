package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/tty"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/terminal"
)

// progress shows a run's progress: plain lines, a live status line when
// stdout is a terminal, or NDJSON events with --json.
type progress struct {
	mu      sync.Mutex
	out     io.Writer
	asJSON  bool
	term    *tty.Out // out as a terminal sees it: its live status line
	start   time.Time
	cost    float64
	turn    int
	ticker  *time.Ticker
	stopped chan struct{}
	maxLine int           // agent.max_line_bytes, to read transcripts
	refused []showRefused // tool calls the CLI refused, for the summary

	// What the terminal surface and this printer share (fgTerminal): the
	// model's text is printed once, and how to answer later once.
	textTurns map[int]bool // turns whose text was printed
	turnText  strings.Builder
	atPrompt  bool // the terminal surface left a prompt without its line's end
	laterSaid bool // the terminal surface printed how to answer later
	rehearsal bool // rehearse: the store goes when it ends, so no command to go on is suggested
}

func (m *Main) newProgress(asJSON bool) *progress {
	p := &progress{out: m.stdout(), asJSON: asJSON, start: time.Now(), maxLine: m.Config.Agent.MaxLineBytes.Int(), textTurns: map[int]bool{},
		rehearsal: m.rehearsing}
	p.term = tty.New(p.out, nil) // NDJSON: no status line
	if !asJSON {
		p.term = m.console()
		m.fg = p
	}
	if p.term.TTY() {
		// Log lines go above the live status line, never into it.
		m.Logger = slog.New(aboveStatus{h: m.Logger.Handler(), p: p})
	}
	return p
}

// line prints one line above the status line.
func (p *progress) line(format string, args ...any) {
	if p.asJSON {
		return
	}
	p.clearStatus()
	if p.atPrompt {
		fmt.Fprintln(p.out) // end the terminal's prompt line first
		p.atPrompt = false
	}
	fmt.Fprintf(p.out, format+"\n", args...)
	p.drawStatus()
}

// aboveStatus is a log handler that clears the live status line before a
// log record is written and draws it again after, so that a log line
// (on stderr, often the same terminal) never splices into it.
type aboveStatus struct {
	h slog.Handler
	p *progress
}

func (a aboveStatus) Enabled(ctx context.Context, l slog.Level) bool { return a.h.Enabled(ctx, l) }

func (a aboveStatus) Handle(ctx context.Context, r slog.Record) error {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	a.p.clearStatus()
	err := a.h.Handle(ctx, r)
	a.p.drawStatus()
	return err
}

func (a aboveStatus) WithAttrs(attrs []slog.Attr) slog.Handler {
	return aboveStatus{h: a.h.WithAttrs(attrs), p: a.p}
}

func (a aboveStatus) WithGroup(name string) slog.Handler {
	return aboveStatus{h: a.h.WithGroup(name), p: a.p}
}

// fgTerminal is the terminal surface of a foreground run printing its
// progress on the same output: a question's context (the model's text
// before it) is left out when the progress printed that text already, and
// the progress learns when the surface left a prompt open or said how to
// answer later.
type fgTerminal struct {
	*terminal.Surface
	p *progress
}

var _ surfaces.Resolver = fgTerminal{}

// foregroundTerminal wraps the terminal surface of a foreground run whose
// progress is printed as text (m.fg).
func (m *Main) foregroundTerminal(s *terminal.Surface) surfaces.Surface {
	if m.fg == nil || m.termOut != nil {
		return s
	}
	return fgTerminal{Surface: s, p: m.fg}
}

func (t fgTerminal) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	t.p.mu.Lock()
	if k := questions.KindOf(set); t.p.textTurns[set.Turn] && (k == questions.KindMarker || k == questions.KindLimit) {
		set.Context = "" // printed with the progress; an approval's context is its call
	}
	t.p.atPrompt = true
	t.p.mu.Unlock()
	err := t.Surface.Ask(ctx, set, answers)
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	switch {
	case err == nil:
		t.p.atPrompt = false // the answer's line (or what became of it) ended it
	case errors.Is(err, surfaces.ErrUnavailable):
		t.p.atPrompt = false // its how-to-answer-later ends with a newline
		t.p.laterSaid = true
	}
	return err
}

// Resolve lets the surface say the set was answered elsewhere: that line
// ends a prompt left open.
func (t fgTerminal) Resolve(ctx context.Context, set questions.Set, resp questions.Response) error {
	err := t.Surface.Resolve(ctx, set, resp)
	t.p.mu.Lock()
	t.p.atPrompt = false
	t.p.mu.Unlock()
	return err
}

func (p *progress) clearStatus() { p.term.ClearStatus() }

func (p *progress) drawStatus() { p.term.DrawStatus() }

// setStatus replaces the live status line (TTY only).
func (p *progress) setStatus(s string) { p.term.SetStatus(s) }

func (p *progress) startTicker() {
	if !p.term.TTY() || p.ticker != nil {
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
				if p.term.Status() != "" {
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
	return fmt.Sprintf("⋯ turn %d · %s · $%.4f", p.turn, since(time.Since(p.start)), p.cost)
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
		p.turnText.Reset()
		p.line("▸ turn %d (%s)", ev.Turn, ev.TurnKind)
		p.setStatus(p.statusText())
		p.startTicker()
	case runner.EventText:
		p.line("%s", indent(questions.Printable(ev.Text)))
		p.textTurns[ev.Turn] = true
		p.turnText.WriteString(ev.Text + "\n")
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
			msg := fmt.Sprintf("  turn %d finished in %s, $%.4f", ev.Turn, since(o.Duration), o.TurnCostUSD)
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
			for _, t := range p.refusedCalls(ev.Turn, *o) {
				p.line("  ✋ refused by the CLI: %s", toolCall(t.jsonTool))
				p.refused = append(p.refused, t)
			}
		}
	case runner.EventQuestion:
		p.stopTicker()
		switch {
		case ev.Set != nil && ev.Text != "": // the run asks whether to go on (a budget or turn limit)
			p.line("? %s; asking whether to go on (set %s) on %s", questions.Printable(ev.Text), ev.Set.ID, strings.Join(orNone(ev.Surfaces), ", "))
		case ev.Set != nil:
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

// refusedCalls lists the tool calls the CLI refused in a turn: from its
// transcript, with what each call was, else by the tool names the outcome
// has.
func (p *progress) refusedCalls(turn int, o executor.Outcome) []showRefused {
	if len(o.PermissionDenials) == 0 {
		return nil
	}
	var out []showRefused
	if o.TranscriptPath != "" {
		var jt jsonTurn
		fillFromTranscript(&jt, o.TranscriptPath, p.maxLine)
		for _, t := range jt.Tools {
			if t.Refused {
				out = append(out, showRefused{Turn: turn, jsonTool: t})
			}
		}
	}
	if len(out) == 0 {
		for _, name := range o.PermissionDenials {
			out = append(out, showRefused{Turn: turn, jsonTool: jsonTool{Name: questions.Printable(name), Refused: true}})
		}
	}
	return out
}

// summary ends a run's output with what needs a look: the tool calls the
// CLI refused (a run may "succeed" without doing what it needed). p.mu is
// held.
func (p *progress) summary() {
	if len(p.refused) == 0 {
		return
	}
	p.line("⚠ the CLI refused %d tool call(s) in this run; allow what the task needs with agent.allowed_tools or the spec's allowed_tools:", len(p.refused))
	for _, t := range p.refused {
		p.line("    %s (turn %d)", toolCall(t.jsonTool), t.Turn)
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
	// The final text is the last turn's text: printed again only when this
	// process did not print it as the model wrote it (a resumed run).
	if run.FinalText != "" && !strings.Contains(squash(p.turnText.String()), squash(run.FinalText)) {
		p.line("%s", indent(questions.Printable(run.FinalText)))
	}
	p.summary()
}

// squash makes text comparable: printable, its spaces collapsed.
func squash(s string) string { return strings.Join(strings.Fields(questions.Printable(s)), " ") }

func (p *progress) failed(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	p.line("✘ run %s failed: %s", run.ID, questions.Printable(run.Error))
	p.summary()
}

func (p *progress) stoppedAtLimit(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	p.line("■ run %s stopped, $%.4f: %s", run.ID, run.CostUSD, questions.Printable(run.Error))
	p.summary()
}

func (p *progress) waiting(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	if p.rehearsal {
		// Its store goes with it: no command would find the run.
		p.line("⏸ run %s is left waiting for an answer; the rehearsal ends here (rehearse again to answer it).", run.ID)
	} else if p.laterSaid {
		// The terminal surface has just said how to answer and resume.
		p.line("⏸ run %s is waiting for an answer.", run.ID)
	} else {
		p.line("⏸ run %s is waiting for an answer. Answer with 'orchestrator answer QID TEXT', then 'orchestrator resume %s'.", run.ID, run.ID)
	}
	p.summary()
}

// interrupted says where a run stands after a signal: Ctrl-C while waiting
// stops this process's waiting, not the run ("cancelled" is the cancel
// command's word).
func (p *progress) interrupted(run store.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		return
	}
	if p.rehearsal {
		p.line("■ rehearsal of run %s interrupted (%s); a rehearsal keeps nothing: rehearse again", run.ID, run.Status)
	} else if run.Status == store.RunWaiting {
		p.line("■ stopped waiting; the run is still waiting (orchestrator resume %s)", run.ID)
	} else {
		p.line("■ run %s interrupted (%s); continue it with 'orchestrator resume %s'", run.ID, run.Status, run.ID)
	}
	p.summary()
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

// console is stdout as a terminal sees it (tty.Out), decided once: the
// progress draws its status line there, and the terminal surface prints
// for a person when it is a terminal.
func (m *Main) console() *tty.Out {
	m.consoleOnce.Do(func() { m.consoleOut = tty.New(m.stdout(), m.Stdout) })
	return m.consoleOut
}

// stdout is Stdout for the writers that share it while a run goes
// (progress lines, the terminal surface, each from its own goroutine): one
// lock, so that their writes never interleave or race.
func (m *Main) stdout() io.Writer {
	m.outOnce.Do(func() { m.syncOut = &lockedWriter{w: m.Stdout} })
	return m.syncOut
}

// lockedWriter serialises the writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
