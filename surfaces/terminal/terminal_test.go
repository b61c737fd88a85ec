package terminal_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
	"github.com/orchestrator-dev/orchestrator/surfaces/terminal"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const timeout = time.Minute

// screen is the terminal's output; waiters learn of every write.
type screen struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newScreen() *screen { return &screen{changed: make(chan struct{})} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until ok(the output) holds.
func (s *screen) waitFor(ok func(string) bool) bool {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		out, ch := s.buf.String(), s.changed
		s.mu.Unlock()
		if ok(out) {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// waitPrompt waits until the terminal waits for an answer to question qid.
func (s *screen) waitPrompt(t *testing.T, qid string) bool {
	t.Helper()
	if !s.waitFor(func(out string) bool { return strings.HasSuffix(out, qid+"> ") }) {
		t.Errorf("no prompt for %s within %v; output:\n%s", qid, timeout, s.String())
		return false
	}
	return true
}

// rig is a terminal surface whose input is typed through a pipe.
type rig struct {
	s   *terminal.Surface
	in  *io.PipeWriter
	out *screen
}

func newRig(t *testing.T, opts terminal.Options) *rig {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	out := newScreen()
	return &rig{s: newSurface(t, pr, out, opts), in: pw, out: out}
}

func (r *rig) typeLine(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		t.Errorf("type %q: %v", line, err)
	}
}

// line is what a person types to give a.
func line(q questions.Question, a questions.Answer) string {
	if len(a.Labels) > 0 {
		var nums []string
		for _, l := range a.Labels {
			for i, o := range q.Options {
				if o.Label == l {
					nums = append(nums, strconv.Itoa(i+1))
				}
			}
		}
		return strings.Join(nums, ",")
	}
	if len(q.Options) > 0 {
		return "other: " + a.Text
	}
	return a.Text
}

func TestConformance(t *testing.T) {
	t.Parallel()
	r := newRig(t, terminal.Options{Echo: true})
	surfacetest.Run(t, surfacetest.Backend{
		New: func(*testing.T) surfaces.Surface { return r.s },
		// The operator reads the screen and answers the question shown.
		Answer: func(t *testing.T, set questions.Set, answers []questions.Answer) {
			for i, q := range set.Questions {
				if !r.out.waitPrompt(t, q.ID) {
					return
				}
				r.typeLine(t, line(q, answers[i]))
			}
		},
		// The screen: what the operator was told.
		Shown:    func(*testing.T, questions.Set) string { return r.out.String() },
		Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true},
		Timeout:  timeout,
	})
}

// newSurface is terminal.New, closed when the test ends.
func newSurface(t testing.TB, in io.Reader, out io.Writer, opts terminal.Options) *terminal.Surface {
	s := terminal.New(in, out, opts)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestClose(t *testing.T) {
	t.Parallel()
	r := newRig(t, terminal.Options{})
	set := surfacetest.SingleChoice("close")
	done := make(chan error, 1)
	go func() { _, err := ask(t, r.s, set); done <- err }()
	r.out.waitPrompt(t, set.Questions[0].ID)
	r.s.Close()
	if err := <-done; !errors.Is(err, surfaces.ErrUnavailable) {
		t.Errorf("Ask on a closed surface = %v, want ErrUnavailable", err)
	}
	if _, err := ask(t, r.s, set); !errors.Is(err, surfaces.ErrUnavailable) {
		t.Errorf("Ask after Close = %v, want ErrUnavailable", err)
	}
}

func TestStripsEscapes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := newSurface(t, strings.NewReader("1\n"), &out, terminal.Options{})
	set := surfacetest.NewSet("escapes").Title("").Context("").Question(questions.Question{
		Header: "\x1b[31mRed\x1b[0m", Text: "a\x1b]0;title\x07b\x1b]8;;http://x\x1b\\c\x1bMd\x1b[", Options: []questions.Option{{Label: "ok"}},
	}).Set()
	if _, err := ask(t, s, set); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Red [" + set.Questions[0].ID + "]\n", "\nabcd\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%q", want, out.String())
		}
	}
}

// answersOf holds the answers taken on each surface (a store would).
var answersOf sync.Map // *terminal.Surface → *surfacetest.Answers

func answersFor(s *terminal.Surface, set questions.Set) *surfacetest.Answers {
	a, _ := answersOf.LoadOrStore(s, surfacetest.NewAnswers())
	ans := a.(*surfacetest.Answers)
	if len(ans.Offers(set.ID)) == 0 {
		ans.Add(set)
	}
	return ans
}

// ask asks set on s and returns the answer s gave.
func ask(t testing.TB, s *terminal.Surface, set questions.Set) (questions.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a := answersFor(s, set)
	if err := s.Ask(ctx, set, a); err != nil {
		return questions.Response{}, err
	}
	resp, ok := a.Final(set.ID)
	if !ok {
		return questions.Response{}, errors.New("Ask returned nil, and the set has no answer")
	}
	return resp, nil
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestGolden answers a set from piped input, with a bad answer on the way,
// then reaches the end of the input on the next set.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts terminal.Options
	}{
		{"plain.golden", terminal.Options{Echo: true}},
		{"pretty.golden", terminal.Options{Pretty: true, Command: "orc"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			s := newSurface(t, strings.NewReader("9\nsqlite\n1, 3\nother: MPL-2.0\r\n"), &out, tt.opts)
			set := surfacetest.TwoQuestions("golden")
			resp, err := ask(t, s, set)
			if err != nil {
				t.Fatal(err)
			}
			surfacetest.CheckResponse(t, "terminal", set, resp, []questions.Answer{
				surfacetest.Choose(set.Questions[0], "SQLite"),
				surfacetest.Choose(set.Questions[1], "Linux", "Windows"),
			}, time.Now().Add(-time.Minute))
			other := surfacetest.NewSet("golden").Turn(2).Other().Free().Set()
			if _, err := ask(t, s, other); !errors.Is(err, surfaces.ErrUnavailable) {
				t.Fatalf("Ask at the end of the input = %v, want ErrUnavailable", err)
			}
			golden(t, tt.name, out.String())
		})
	}
}

func TestEOF(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := newSurface(t, strings.NewReader(""), &out, terminal.Options{})
	set := surfacetest.TwoQuestions("eof")
	for i := range 2 {
		resp, err := ask(t, s, set)
		if !errors.Is(err, surfaces.ErrUnavailable) || resp.SetID != "" {
			t.Fatalf("Ask %d = %+v, %v; want ErrUnavailable", i, resp, err)
		}
	}
	got := out.String()
	for _, want := range []string{
		"orchestrator answer " + set.Questions[0].ID + " <answer>",
		"orchestrator answer " + set.Questions[1].ID + " <answer>",
		"orchestrator resume " + set.RunID,
	} {
		if strings.Count(got, want) != 1 {
			t.Errorf("output says %q %d times, want once:\n%s", want, strings.Count(got, want), got)
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("device gone") }

func TestReadError(t *testing.T) {
	t.Parallel()
	s := newSurface(t, failingReader{}, io.Discard, terminal.Options{})
	_, err := ask(t, s, surfacetest.SingleChoice("readerr"))
	if !errors.Is(err, surfaces.ErrUnavailable) || !strings.Contains(err.Error(), "device gone") {
		t.Errorf("Ask = %v, want ErrUnavailable saying why", err)
	}
}

func TestLastLineWithoutNewline(t *testing.T) {
	t.Parallel()
	s := newSurface(t, strings.NewReader("2"), io.Discard, terminal.Options{})
	set := surfacetest.SingleChoice("nonewline")
	resp, err := ask(t, s, set)
	if err != nil || resp.Answers[0].Labels[0] != "SQLite" {
		t.Errorf("Ask = %+v, %v; want SQLite", resp, err)
	}
}

func TestReprompt(t *testing.T) {
	t.Parallel()
	r := newRig(t, terminal.Options{Echo: true})
	set := surfacetest.SingleChoice("reprompt")
	q := set.Questions[0]
	go func() {
		for _, l := range []string{"", "9", "1,2", "other: x", "mysql"} {
			if !r.out.waitPrompt(t, q.ID) {
				return
			}
			r.typeLine(t, l)
		}
	}()
	resp, err := ask(t, r.s, set)
	if err != nil || resp.Answers[0].Labels[0] != "MySQL" {
		t.Fatalf("Ask = %+v, %v; want MySQL", resp, err)
	}
	out := r.out.String()
	if n := strings.Count(out, "Not a valid answer"); n != 4 {
		t.Errorf("%d re-prompts, want 4:\n%s", n, out)
	}
	if n := strings.Count(out, q.ID+"> "); n != 5 {
		t.Errorf("%d prompts, want 5:\n%s", n, out)
	}
	if !strings.Contains(out, "Postgres") || !strings.Contains(out, "3") {
		t.Errorf("re-prompt does not list the valid choices:\n%s", out)
	}
}

// TestLineAfterCancel: a line typed once an Ask has ended is the answer to
// the next question asked.
func TestLineAfterCancel(t *testing.T) {
	t.Parallel()
	r := newRig(t, terminal.Options{})
	set := surfacetest.SingleChoice("aftercancel")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.s.Ask(ctx, set, answersFor(r.s, set)) }()
	r.out.waitPrompt(t, set.Questions[0].ID)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Ask = %v", err)
	}
	r.typeLine(t, "3") // read while no Ask runs
	resp, err := ask(t, r.s, set)
	if err != nil || resp.Answers[0].Labels[0] != "MySQL" {
		t.Errorf("next Ask = %+v, %v; want MySQL", resp, err)
	}
}

// TestPartialKept: answers to the first questions of a set survive a
// cancelled Ask; the next Ask asks only the rest.
func TestPartialKept(t *testing.T) {
	t.Parallel()
	r := newRig(t, terminal.Options{Echo: true})
	set := surfacetest.TwoQuestions("partial")
	q1, q2 := set.Questions[0], set.Questions[1]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.s.Ask(ctx, set, answersFor(r.s, set)) }()
	r.out.waitPrompt(t, q1.ID)
	r.typeLine(t, "1")
	r.out.waitPrompt(t, q2.ID)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Ask = %v", err)
	}
	before := len(r.out.String())
	go func() {
		r.out.waitPrompt(t, q2.ID)
		r.typeLine(t, "2,3")
	}()
	resp, err := ask(t, r.s, set)
	if err != nil {
		t.Fatal(err)
	}
	surfacetest.CheckResponse(t, "terminal", set, resp, []questions.Answer{
		surfacetest.Choose(q1, "Postgres"), surfacetest.Choose(q2, "macOS", "Windows"),
	}, time.Now().Add(-time.Minute))
	if again := r.out.String()[before:]; strings.Contains(again, q1.ID+"> ") {
		t.Errorf("second Ask asked the answered question again:\n%s", again)
	}
	// Asking an answered set again returns its answer without asking.
	before = len(r.out.String())
	if again, err := ask(t, r.s, set); err != nil || !again.At.Equal(resp.At) {
		t.Errorf("Ask of an answered set = %+v, %v; want the same response", again, err)
	}
	if printed := r.out.String()[before:]; printed != "" {
		t.Errorf("Ask of an answered set printed %q", printed)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := newSurface(t, strings.NewReader(""), &out, terminal.Options{})
	ctx := context.Background()
	set := surfacetest.TwoQuestions("resolve")
	resp := questions.Response{
		SetID: set.ID, By: "@octo\x1b[31mcat", Surface: "github", At: time.Now(),
		Answers: []questions.Answer{
			surfacetest.Choose(set.Questions[0], "SQLite"),
			surfacetest.Choose(set.Questions[1], "Linux", "macOS"),
		},
	}
	for range 2 {
		if err := s.Resolve(ctx, set, resp); err != nil {
			t.Fatal(err)
		}
	}
	want := "\nAnswered elsewhere by @octocat on github: Database: SQLite; Platforms: Linux, macOS\n"
	if out.String() != want {
		t.Errorf("Resolve printed %q, want %q once", out.String(), want)
	}

	out.Reset()
	own := surfacetest.SingleChoice("resolve-own")
	if err := s.Resolve(ctx, own, questions.Response{SetID: own.ID, Surface: "terminal", By: "terminal",
		Answers: []questions.Answer{surfacetest.Choose(own.Questions[0], "MySQL")}}); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("Resolve of the terminal's own answer printed %q", out.String())
	}
}

// TestHostileTextPlain: nothing the model wrote reaches a plain output as a
// control character or escape sequence.
func TestHostileTextPlain(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := newSurface(t, strings.NewReader("2\n"), &out, terminal.Options{})
	set := surfacetest.Hostile("hostile")
	if _, err := ask(t, s, set); err != nil {
		t.Fatal(err)
	}
	checkPrintable(t, out.String())
}

func checkPrintable(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
			t.Fatalf("output has control character %U at %d:\n%q", r, i, out)
		}
	}
}

func FuzzAskOutput(f *testing.F) {
	h := surfacetest.HostileQuestion()
	f.Add(h.Header, h.Text, h.Options[0].Label, h.Options[0].Description, "ctx", "1")
	f.Add("", "free?", "", "", "", "anything")
	f.Fuzz(func(t *testing.T, header, text, label, desc, context, answer string) {
		q := questions.Question{Header: header, Text: text}
		if label != "" {
			q.Options = []questions.Option{{Label: label, Description: desc}}
		}
		set := surfacetest.NewSet("fuzz").Context(context).Question(q).Set()
		var out bytes.Buffer
		s := newSurface(t, strings.NewReader(answer+"\n1\n"+label+"\n"), &out, terminal.Options{})
		resp, err := ask(t, s, set)
		if err != nil && !errors.Is(err, surfaces.ErrUnavailable) {
			t.Fatalf("Ask = %v", err)
		}
		if err == nil {
			if cerr := surfacetest.ValidResponse(set, resp); cerr != nil {
				t.Fatalf("Ask returned an invalid response: %v", cerr)
			}
		}
		checkPrintable(t, out.String())
	})
}

// endless types the same answer forever.
type endless struct{ line []byte }

func (e endless) Read(p []byte) (int, error) {
	n := 0
	for n+len(e.line) <= len(p) {
		n += copy(p[n:], e.line)
	}
	if n == 0 {
		return copy(p, e.line), nil
	}
	return n, nil
}

func BenchmarkAsk(b *testing.B) {
	s := newSurface(b, endless{[]byte("2\n")}, io.Discard, terminal.Options{})
	set := surfacetest.SingleChoice("bench")
	i := 0
	for b.Loop() {
		i++
		set.ID = "bench-" + strconv.Itoa(i)
		if _, err := ask(b, s, set); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLongContextKeepsBothEnds(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := newSurface(t, strings.NewReader("1\n"), &out, terminal.Options{})
	ctx := "THE START\n" + strings.Repeat("héllo wörld, line of model text\n", 2000) + "THE END"
	set := surfacetest.NewSet("long").Context(ctx).Single().Set()
	if _, err := ask(t, s, set); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "THE START") || !strings.Contains(got, "THE END") || !strings.Contains(got, "characters cut …") || len(got) > 6<<10 {
		t.Errorf("long context printed as %d bytes, want its start and end and what was cut:\n%s", len(got), got)
	}
	checkPrintable(t, got)
}

// TestPassiveNeverPrompts: a daemon's terminal (Passive) writes nothing to
// its output and reads nothing: it logs the question once, with the
// command that answers it and no resume hint, and waits for its context.
func TestPassiveNeverPrompts(t *testing.T) {
	t.Parallel()
	var out, logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	s := terminal.New(strings.NewReader("2\n"), &out, terminal.Options{Passive: true, Logger: logger})
	set := surfacetest.SingleChoice("passive")
	for range 2 { // asked again (a reminder, a restart): logged once
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := s.Ask(ctx, set, surfacetest.NewAnswers())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ask: %v, want the context's end", err)
		}
	}
	if err := s.Resolve(context.Background(), set, questions.Response{SetID: set.ID, By: "ann", Surface: "github"}); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("a passive terminal wrote to its output:\n%s", out.String())
	}
	mu.Lock()
	l := logs.String()
	mu.Unlock()
	if n := strings.Count(l, "question waiting"); n != 1 {
		t.Errorf("logged the question %d times, want 1:\n%s", n, l)
	}
	if !strings.Contains(l, "answer "+set.Questions[0].ID+" <answer>") || strings.Contains(l, "resume") {
		t.Errorf("the log line lacks the answer command or has a resume hint:\n%s", l)
	}
	if !strings.Contains(l, "question answered") || !strings.Contains(l, "by=ann") {
		t.Errorf("the answer elsewhere is not logged:\n%s", l)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestApprovalShowsHiddenFirstLine: a command whose dangerous first line is
// followed by 4 KiB of comments shows that line, says how much was cut and
// where the whole is (issue 21).
func TestApprovalShowsHiddenFirstLine(t *testing.T) {
	t.Parallel()
	for _, pretty := range []bool{false, true} {
		var out bytes.Buffer
		s := newSurface(t, strings.NewReader("Deny\n"), &out, terminal.Options{Pretty: pretty})
		set := surfacetest.HiddenApproval()
		if _, err := ask(t, s, set); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		for _, want := range []string{surfacetest.HiddenFirstLine, "echo done", "characters cut …", "orchestrator show " + set.RunID} {
			if !strings.Contains(got, want) {
				t.Errorf("pretty %v: the terminal does not show %q:\n%s", pretty, want, got)
			}
		}
	}
}

// TestInputClosedStillShowsTheQuestion: asked once the input has ended,
// the terminal still shows the question before how to answer it later (a
// log or a pipe reader sees what waits).
func TestInputClosedStillShowsTheQuestion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := newSurface(t, strings.NewReader(""), &out, terminal.Options{})
	first, second := surfacetest.SingleChoice("first"), surfacetest.NewSet("second").Free().Set()
	if _, err := ask(t, s, first); !errors.Is(err, surfaces.ErrUnavailable) {
		t.Fatalf("first Ask: %v, want unavailable", err)
	}
	out.Reset() // the input's end is known now
	if _, err := ask(t, s, second); !errors.Is(err, surfaces.ErrUnavailable) {
		t.Fatalf("second Ask: %v, want unavailable", err)
	}
	got := out.String()
	for _, want := range []string{second.Questions[0].Text, "answer " + second.Questions[0].ID + " <answer>"} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, second.Questions[0].Text) > strings.Index(got, "Input closed") {
		t.Errorf("how to answer later comes before the question:\n%s", got)
	}
}

// TestPassiveWatch: serve's terminal watches without waiting: Watch logs
// the set once and returns, Unwatch forgets it (watched again, it is logged
// again), and a settled set leaves nothing behind. A terminal that prompts
// does not watch.
func TestPassiveWatch(t *testing.T) {
	t.Parallel()
	var out, logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	s := terminal.New(strings.NewReader(""), &out, terminal.Options{Passive: true, Logger: logger})
	if !s.Watches() {
		t.Error("a passive terminal says it does not watch")
	}
	ctx := context.Background()
	set := surfacetest.SingleChoice("passive-watch")
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(logs.String(), "question waiting")
	}
	for range 2 {
		if err := s.Watch(ctx, set, surfacetest.NewAnswers()); err != nil {
			t.Fatalf("Watch: %v", err)
		}
	}
	if n := count(); n != 1 {
		t.Errorf("watched twice: logged %d times, want 1", n)
	}
	s.Unwatch(set.ID)
	s.Unwatch(set.ID)
	if err := s.Watch(ctx, set, surfacetest.NewAnswers()); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Errorf("watched after Unwatch: logged %d times, want 2", n)
	}
	if err := s.Resolve(ctx, set, questions.Response{SetID: set.ID, By: "ann", Surface: "github"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Watch(ctx, questions.Set{ID: "empty"}, surfacetest.NewAnswers()); err == nil {
		t.Error("Watch of a set without questions: nil error")
	}
	if out.Len() != 0 {
		t.Errorf("a passive terminal wrote to its output:\n%s", out.String())
	}

	prompting := terminal.New(strings.NewReader(""), &out, terminal.Options{})
	if prompting.Watches() {
		t.Error("a prompting terminal says it watches")
	}
	if err := prompting.Watch(ctx, set, surfacetest.NewAnswers()); !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, terminal.ErrPrompts) {
		t.Errorf("Watch on a prompting terminal = %v, want ErrPrompts", err)
	}
}

// BenchmarkPassiveWatch watches 10,000 sets on serve's terminal and reports
// the bytes (heap and stacks) and goroutines each costs while watched.
func BenchmarkPassiveWatch(b *testing.B) {
	const n = 10000
	sets := make([]questions.Set, n)
	for i := range sets {
		sets[i] = surfacetest.SingleChoice(fmt.Sprintf("bench-%d", i))
	}
	ctx := context.Background()
	a := surfacetest.NewAnswers()
	var bytesPer, goroutinesPer float64
	for b.Loop() {
		s := terminal.New(strings.NewReader(""), io.Discard, terminal.Options{Passive: true})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		for _, set := range sets {
			if err := s.Watch(ctx, set, a); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		bytesPer = float64(int64(after.HeapAlloc+after.StackInuse)-int64(before.HeapAlloc+before.StackInuse)) / n
		goroutinesPer = float64(runtime.NumGoroutine()-g0) / n
		for _, set := range sets {
			s.Unwatch(set.ID)
		}
	}
	b.ReportMetric(bytesPer, "B/set")
	b.ReportMetric(goroutinesPer, "goroutines/set")
}
