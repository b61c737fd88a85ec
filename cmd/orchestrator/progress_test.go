package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/tty"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
	"github.com/orchestrator-dev/orchestrator/surfaces/terminal"
)

// syncBuffer is a fake terminal: the progress and a log handler write to
// it from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ttyProgress is a progress printing to a fake TTY.
func ttyProgress(out io.Writer) *progress {
	return &progress{out: out, term: tty.NewTerminal(out, 0), start: time.Now(), textTurns: map[int]bool{}}
}

// TestLogLinesGoAboveTheStatusLine: with a live status line on a TTY, a log
// line clears it first and it is drawn again after: the log line starts at
// the beginning of a clean line, never spliced into the status.
func TestLogLinesGoAboveTheStatusLine(t *testing.T) {
	t.Parallel()
	var tty syncBuffer
	p := ttyProgress(&tty)
	log := slog.New(aboveStatus{h: slog.NewTextHandler(&tty, nil), p: p})
	p.observe(runner.Event{Kind: runner.EventTurnStarted, RunID: "r1", Turn: 1, TurnKind: store.TurnStart})
	log.Warn("the surface is slow", "surface", "github")
	p.stop()
	out := tty.String()
	i := strings.Index(out, "time=")
	if i < 0 {
		t.Fatalf("no log line in %q", out)
	}
	before, after := out[:i], out[i:]
	if !strings.HasSuffix(before, "\r\033[K") {
		t.Errorf("the status line is not cleared before the log line: %q", out)
	}
	end := strings.Index(after, "\n")
	if !strings.Contains(after[end+1:], "⋯ turn 1") {
		t.Errorf("the status line is not drawn again after the log line: %q", out)
	}
	if strings.Contains(after[:end], "⋯") {
		t.Errorf("the log line holds the status line: %q", after[:end])
	}
}

// TestLogHandlerKeepsAttrsAndGroups: the wrapping handler still passes
// attributes and groups on.
func TestLogHandlerKeepsAttrsAndGroups(t *testing.T) {
	t.Parallel()
	var tty syncBuffer
	log := slog.New(aboveStatus{h: slog.NewTextHandler(&tty, nil), p: ttyProgress(&tty)})
	log.With("run", "r1").WithGroup("g").Info("hello", "k", "v")
	if out := tty.String(); !strings.Contains(out, "run=r1") || !strings.Contains(out, "g.k=v") {
		t.Errorf("log line = %q", out)
	}
}

// TestFinalTextPrintedOnce: the model's last text is printed as it comes,
// and not again under "done"; a resumed run that did not print it here
// shows it.
func TestFinalTextPrintedOnce(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := &progress{out: &out, start: time.Now(), textTurns: map[int]bool{}}
	p.observe(runner.Event{Kind: runner.EventTurnStarted, RunID: "r1", Turn: 2, TurnKind: store.TurnAnswer})
	p.observe(runner.Event{Kind: runner.EventText, RunID: "r1", Turn: 2, Text: "Done. Implemented using Signed JWT."})
	p.done(store.Run{ID: "r1", Status: store.RunDone, FinalText: "Done. Implemented using Signed JWT."})
	if n := strings.Count(out.String(), "Implemented using Signed JWT."); n != 1 {
		t.Errorf("the final text is printed %d times:\n%s", n, out.String())
	}
	out.Reset()
	p = &progress{out: &out, start: time.Now(), textTurns: map[int]bool{}}
	p.done(store.Run{ID: "r1", Status: store.RunDone, FinalText: "Done. Implemented using Signed JWT."})
	if n := strings.Count(out.String(), "Implemented using Signed JWT."); n != 1 {
		t.Errorf("a resumed run's final text is printed %d times:\n%s", n, out.String())
	}
}

// blockingReader never returns: a terminal nobody types on.
type blockingReader struct{ done chan struct{} }

func (b blockingReader) Read([]byte) (int, error) { <-b.done; return 0, io.EOF }

// TestCtrlCWhileWaitingSaysStoppedWaiting: a signal while the terminal
// waits for an answer stops this process's waiting, not the run: the line
// says so (not "cancelled") on a line of its own after the prompt, and the
// process prints nothing more.
func TestCtrlCWhileWaitingSaysStoppedWaiting(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	p := &progress{out: &out, start: time.Now(), textTurns: map[int]bool{}}
	in := blockingReader{done: make(chan struct{})}
	defer close(in.done)
	s := terminal.New(in, &out, terminal.Options{})
	defer s.Close()
	m := &Main{fg: p}
	sf := m.foregroundTerminal(s)
	set := questions.Set{ID: "s1", RunID: "r1", Turn: 1, Questions: []questions.Question{{ID: "q1", Text: "Which?", Options: []questions.Option{{Label: "A"}, {Label: "B"}}}}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !strings.Contains(out.String(), "q1> ") {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if err := sf.Ask(ctx, set, pending(set)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask = %v", err)
	}
	p.interrupted(store.Run{ID: "r1", Status: store.RunWaiting})
	got := out.String()
	if !strings.HasSuffix(got, "q1> \n■ stopped waiting; the run is still waiting (orchestrator resume r1)\n") {
		t.Errorf("output ends %q", got[max(0, len(got)-120):])
	}
	if strings.Contains(got, "cancel") {
		t.Errorf("Ctrl-C while waiting says cancelled: %q", got)
	}
	var stderr bytes.Buffer
	(&Main{Stderr: &stderr}).printError(silentExit(exitCancelled), exitCancelled)
	if stderr.Len() != 0 {
		t.Errorf("after the line, the process prints %q", stderr.String())
	}
}

// TestQuestionContextNotPrintedTwice: the terminal surface of a foreground
// run leaves out a question's context when the progress printed the
// model's text of that turn already; a question of another turn (a resumed
// run) keeps it.
func TestQuestionContextNotPrintedTwice(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	p := &progress{out: &out, start: time.Now(), textTurns: map[int]bool{}}
	p.observe(runner.Event{Kind: runner.EventTurnStarted, RunID: "r1", Turn: 1, TurnKind: store.TurnStart})
	p.observe(runner.Event{Kind: runner.EventText, RunID: "r1", Turn: 1, Text: "Here is my plan: a login page."})
	s := terminal.New(strings.NewReader("1\n1\n"), &out, terminal.Options{})
	defer s.Close()
	sf := (&Main{fg: p}).foregroundTerminal(s)
	set := questions.Set{ID: "s1", RunID: "r1", Turn: 1, Context: "Here is my plan: a login page.",
		Questions: []questions.Question{{ID: "q1", Text: "Which?", Options: []questions.Option{{Label: "A"}, {Label: "B"}}}}}
	if err := sf.Ask(context.Background(), set, pending(set)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "Here is my plan"); n != 1 {
		t.Errorf("the model's text is printed %d times:\n%s", n, out.String())
	}
	set.ID, set.Turn, set.Context = "s2", 3, "Earlier plan, not printed here."
	if err := sf.Ask(context.Background(), set, pending(set)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Earlier plan, not printed here.") {
		t.Errorf("the context of a question whose text was not printed is left out:\n%s", out.String())
	}
}

// TestAnswerLaterSaidOnce: once the terminal surface said how to answer
// later, the waiting line does not say it again.
func TestAnswerLaterSaidOnce(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	p := &progress{out: &out, start: time.Now(), textTurns: map[int]bool{}}
	s := terminal.New(strings.NewReader(""), &out, terminal.Options{})
	defer s.Close()
	sf := (&Main{fg: p}).foregroundTerminal(s)
	set := questions.Set{ID: "s1", RunID: "r1", Turn: 1, Questions: []questions.Question{{ID: "q1", Text: "Which?"}}}
	if err := sf.Ask(context.Background(), set, pending(set)); err == nil {
		t.Fatal("Ask with no input succeeded")
	}
	p.waiting(store.Run{ID: "r1", Status: store.RunWaiting})
	got := out.String()
	if n := strings.Count(got, "resume r1"); n != 1 {
		t.Errorf("how to resume is said %d times:\n%s", n, got)
	}
	if n := strings.Count(got, "answer q1"); n != 1 {
		t.Errorf("how to answer is said %d times:\n%s", n, got)
	}
	if !strings.Contains(got, "⏸ run r1 is waiting for an answer.") {
		t.Errorf("no waiting line:\n%s", got)
	}
}

// TestRunPrintsModelTextOnce: with the real CLI, run's plain output has
// the model's text once (not again in the question, not again under
// "done"), and when the input ends, how to answer later once.
func TestRunPrintsModelTextOnce(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	code, out, _ := e.run("2\n", "run", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, text := range []string{"I need a decision.", "Implemented with JWT."} {
		if n := strings.Count(out, text); n != 1 {
			t.Errorf("%q is printed %d times:\n%s", text, n, out)
		}
	}
	code, out, _ = e.run("", "run", "--prompt", "Implement spec X")
	if code != exitWaiting {
		t.Fatalf("exit %d, want %d", code, exitWaiting)
	}
	if n := strings.Count(out, "orchestrator resume "); n != 1 {
		t.Errorf("how to resume is said %d times:\n%s", n, out)
	}
	if n := strings.Count(out, "orchestrator answer "); n != 1 {
		t.Errorf("how to answer is said %d times:\n%s", n, out)
	}
}

// pending is in-memory Answers where set waits for an answer.
func pending(set questions.Set) *surfacetest.Answers {
	a := surfacetest.NewAnswers()
	a.Add(set)
	return a
}
