package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// The portable-session tests drive runs with a fake CLI: this test binary
// run again with fakeCLIEnv set. Like the real one, it keeps its session
// file under $HOME/.claude/projects/<folder of its working directory>, only
// appends to it (a "user" and an "assistant" entry a turn, shaped as the
// real CLI's), and fails a --resume of a session it has no file of. Its
// reply to a resume counts the records the session held, which shows which
// conversation it continued.
const fakeCLIEnv = "RUNNER_FAKE_CLAUDE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeCLIEnv) != "" {
		os.Exit(fakeCLI())
	}
	os.Exit(m.Run())
}

const fakeQuestion = `I need a decision.` + "\n" + `<!--QUESTION:{"questions":[{"question":"Which auth method?","header":"Auth","options":[` +
	`{"label":"OAuth2"},{"label":"JWT"}]}]}-->`

func fakeCLI() int {
	var sid, resume, prompt string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--session-id", "--resume":
			if args[i] == "--resume" {
				resume = args[i+1]
			}
			sid = args[i+1]
			i++
		case "--":
			prompt = strings.Join(args[i+1:], " ")
			i = len(args)
		}
	}
	if prompt == "" {
		b, _ := io.ReadAll(os.Stdin)
		prompt = string(b)
	}
	e, err := executor.New(executor.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	path, err := e.SessionPath("", sid)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	prior, err := os.ReadFile(path)
	if resume != "" && err != nil {
		fmt.Fprintf(os.Stderr, "No conversation found with session ID: %s\n", sid)
		return 1
	}
	reply := fakeQuestion
	if resume != "" {
		reply = fmt.Sprintf("Resumed after %d records.", bytes.Count(prior, []byte("\n")))
	}
	os.MkdirAll(filepath.Dir(path), 0o700)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, rec := range []map[string]any{
		{"type": "user", "message": map[string]any{"role": "user", "content": prompt}},
		{"type": "assistant", "message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": reply}}}},
	} {
		b, _ := json.Marshal(rec)
		f.Write(append(b, '\n'))
	}
	f.Close()
	line := func(m map[string]any) {
		m["session_id"] = sid
		b, _ := json.Marshal(m)
		os.Stdout.Write(append(b, '\n'))
	}
	line(map[string]any{"type": "system", "subtype": "init", "model": "fake"})
	line(map[string]any{"type": "assistant", "message": map[string]any{"id": "m", "content": []any{map[string]any{"type": "text", "text": reply}}}})
	line(map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": reply, "num_turns": 1})
	return 0
}

// machine is an executor of the fake CLI with its own HOME: another
// machine's CLI session store.
func machine(t *testing.T) (*executor.Executor, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	e, err := executor.New(executor.Config{Command: exe, BaseEnv: []string{}, Env: map[string]string{fakeCLIEnv: "1", "HOME": home},
		KillGrace: time.Second, ResultGrace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return e, home
}

// withoutSessionFiles is an agent whose session file the runner cannot
// move: what it did before sessions were portable.
type withoutSessionFiles struct{ Agent }

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// sessionRig is one store shared by runners on several machines, the run's
// working directory the same path on each.
type sessionRig struct {
	t      *testing.T
	st     *store.Store
	wd     string
	mu     sync.Mutex
	agent  Agent // the machine the next drive runs on
	r      *Runner
	cancel context.CancelFunc // of the drive under way
}

func newSessionRig(t *testing.T) *sessionRig {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := &sessionRig{t: t, st: st, wd: t.TempDir()}
	g.r, err = New(Config{
		Store: st,
		Resolve: func(store.Run) (Resolved, error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return Resolved{Agent: g.agent}, nil
		},
		Observe: func(ev Event) {
			if ev.Kind == EventQuestion {
				g.mu.Lock()
				g.cancel() // the machine stops while the question waits
				g.mu.Unlock()
			}
		},
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// drive drives run on agent until it is final or waits on a question.
func (g *sessionRig) drive(agent Agent, runID string) store.Run {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g.mu.Lock()
	g.agent, g.cancel = agent, cancel
	g.mu.Unlock()
	run, err := g.r.Drive(ctx, runID)
	if err != nil && !errors.Is(err, context.Canceled) {
		g.t.Fatalf("drive: %v", err)
	}
	return run
}

// asked creates a run and drives its first turn on agent to the question it
// asks, then answers it in the store, as `orchestrator answer` would.
func (g *sessionRig) asked(agent Agent) (store.Run, questions.Set) {
	g.t.Helper()
	ctx := context.Background()
	run, err := g.r.Create(ctx, NewRun{Prompt: "Implement spec X", WorkDir: g.wd})
	if err != nil {
		g.t.Fatal(err)
	}
	if got := g.drive(agent, run.ID); got.Status != store.RunWaiting {
		g.t.Fatalf("after the first turn: %s %q", got.Status, got.Error)
	}
	sets, err := g.st.QuestionSets(ctx, store.SetFilter{RunID: run.ID})
	if err != nil || len(sets) != 1 {
		g.t.Fatalf("question sets %v, %v", sets, err)
	}
	set := sets[0].Set
	if _, err := g.st.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "cli", At: time.Now(),
		Answers: []questions.Answer{{QuestionID: set.Questions[0].ID, Labels: []string{"OAuth2"}}}}); err != nil {
		g.t.Fatal(err)
	}
	return run, set
}

func readSession(t *testing.T, e *executor.Executor, wd, sid string) string {
	t.Helper()
	b, err := e.ReadSession(wd, sid)
	if err != nil && !errors.Is(err, executor.ErrSessionFileNotFound) {
		t.Fatal(err)
	}
	return string(b)
}

// TestSessionMovesToAnotherMachine: a run whose question was asked on
// machine A resumes on machine B, which never had its session: B's CLI
// continues A's conversation (both records of the first turn), with the
// answer once; the store then holds B's session. Without the session moved,
// the same resume fails with CategorySessionNotFound.
func TestSessionMovesToAnotherMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newSessionRig(t)
	a, _ := machine(t)
	b, _ := machine(t)
	run, set := g.asked(a)
	stored, ok, err := g.st.Session(ctx, run.ID, run.SessionID)
	if err != nil || !ok || string(stored) != readSession(t, a, g.wd, run.SessionID) {
		t.Fatalf("the store's copy after the first turn (%v, %v) is not A's session file", ok, err)
	}
	got := g.drive(b, run.ID)
	if got.Status != store.RunDone || got.FinalText != "Resumed after 2 records." {
		t.Fatalf("resumed on B: %s %q %q", got.Status, got.FinalText, got.Error)
	}
	onB := readSession(t, b, g.wd, run.SessionID)
	if n := strings.Count(onB, set.ID); n != 1 || !strings.HasPrefix(onB, string(stored)) {
		t.Fatalf("B's session has the answer %d times, or is not A's continued:\n%s", n, onB)
	}
	if strings.Contains(readSession(t, a, g.wd, run.SessionID), set.ID) {
		t.Fatal("A's session got the answer")
	}
	if latest, _, _ := g.st.Session(ctx, run.ID, run.SessionID); string(latest) != onB {
		t.Fatal("the store does not hold B's session after the resume")
	}

	t.Run("not moved", func(t *testing.T) {
		g := newSessionRig(t)
		a, _ := machine(t)
		b, _ := machine(t)
		run, _ := g.asked(a)
		got := g.drive(withoutSessionFiles{b}, run.ID)
		last, _, err := g.st.LastTurn(ctx, run.ID)
		if err != nil || got.Status != store.RunFailed || last.Result.Category != executor.CategorySessionNotFound {
			t.Fatalf("resume without the session: %s %q, last turn %q, %v", got.Status, got.Error, last.Result.Category, err)
		}
	})
}

// TestRecoverLooksIntoTheStoredSession: the answer turn was claimed and its
// CLI started on A, which died after the answer reached A's session but
// before the turn was recorded. B has only the store's copy, which lacks
// the answer: the prompt did not reach the conversation B continues, so
// B hands the answer over again, once. A itself finds the answer in its own
// (longer) session, keeps it, saves it to the store, and continues.
func TestRecoverLooksIntoTheStoredSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, where := range []string{"elsewhere", "same machine"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			g := newSessionRig(t)
			a, _ := machine(t)
			run, set := g.asked(a)
			turn, err := g.st.BeginTurn(ctx, store.Turn{RunID: run.ID, Kind: store.TurnAnswer, SetID: set.ID,
				Prompt: "answers to " + set.ID, SessionID: run.SessionID, Resume: true})
			if err != nil {
				t.Fatal(err)
			}
			before := readSession(t, a, g.wd, run.SessionID)
			crashed := before + `{"type":"user","message":{"role":"user","content":"answers to ` + set.ID + `"}}` + "\n"
			if err := a.WriteSession(g.wd, run.SessionID, []byte(crashed)); err != nil {
				t.Fatal(err)
			}
			on := a
			if where == "elsewhere" {
				on, _ = machine(t)
			}
			got := g.drive(on, run.ID)
			if got.Status != store.RunDone {
				t.Fatalf("after recovering: %s %q", got.Status, got.Error)
			}
			turns, _ := g.st.Turns(ctx, run.ID)
			rec := turns[turn.Seq-1].Result.Category
			session := readSession(t, on, g.wd, run.SessionID)
			if n := strings.Count(session, set.ID); n != 1 {
				t.Fatalf("the answer is %d times in the session the run went on with:\n%s", n, session)
			}
			switch where {
			case "elsewhere":
				if rec != store.CategoryNotDelivered || got.FinalText != "Resumed after 2 records." {
					t.Fatalf("crashed turn %q, final %q: want it not delivered and handed over again", rec, got.FinalText)
				}
			case "same machine":
				if rec != store.CategoryInterrupted || got.FinalText != "Resumed after 3 records." {
					t.Fatalf("crashed turn %q, final %q: want it delivered and the session continued", rec, got.FinalText)
				}
			}
		})
	}
}

// TestRecoverAnswerOnlyQueued: the answer turn's CLI was killed after it
// logged the prompt it took in (a "queue-operation" entry holding the
// answer's text) and before it wrote the prompt as the conversation's
// "user" entry, and the session was saved to the store at that moment.
// A `--resume` sends the conversation without the queued text (measured
// with 2.1.330, TestE2EResumeAfterAKilledTurn in executor), so the answer
// did not reach the model: recover records the turn not delivered and the
// answer is handed over again, once in the conversation. Whichever machine
// takes over, and whatever the load: the session file is written here, no
// CLI is killed.
func TestRecoverAnswerOnlyQueued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, where := range []string{"elsewhere", "same machine"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			g := newSessionRig(t)
			a, _ := machine(t)
			run, set := g.asked(a)
			turn, err := g.st.BeginTurn(ctx, store.Turn{RunID: run.ID, Kind: store.TurnAnswer, SetID: set.ID,
				Prompt: "answers to " + set.ID, SessionID: run.SessionID, Resume: true})
			if err != nil {
				t.Fatal(err)
			}
			crashed := readSession(t, a, g.wd, run.SessionID) +
				`{"type":"queue-operation","operation":"enqueue","sessionId":"` + run.SessionID + `","content":"answers to ` + set.ID + `"}` + "\n" +
				`{"type":"queue-operation","operation":"dequeue","sessionId":"` + run.SessionID + `"}` + "\n"
			if err := a.WriteSession(g.wd, run.SessionID, []byte(crashed)); err != nil {
				t.Fatal(err)
			}
			if err := g.st.SaveSession(ctx, run.ID, run.SessionID, []byte(crashed)); err != nil {
				t.Fatal(err)
			}
			on := a
			if where == "elsewhere" {
				on, _ = machine(t)
			}
			got := g.drive(on, run.ID)
			if got.Status != store.RunDone {
				t.Fatalf("after recovering: %s %q", got.Status, got.Error)
			}
			turns, _ := g.st.Turns(ctx, run.ID)
			if rec := turns[turn.Seq-1].Result.Category; rec != store.CategoryNotDelivered {
				t.Fatalf("crashed turn %q: want it not delivered and the answer handed over again", rec)
			}
			session := readSession(t, on, g.wd, run.SessionID)
			prompts := 0
			for _, line := range strings.Split(session, "\n") {
				if strings.Contains(line, `"type":"user"`) && strings.Contains(line, set.ID) {
					prompts++
				}
			}
			if prompts != 1 || got.FinalText != "Resumed after 4 records." {
				t.Fatalf("the answer is the user's prompt %d times in the session the run went on with (final %q):\n%s", prompts, got.FinalText, session)
			}
		})
	}
}

// fakeFiles is a SessionFiles in memory.
type fakeFiles struct {
	Agent
	files   map[string][]byte
	readErr error
	writes  int
}

func (f *fakeFiles) ReadSession(workDir, sessionID string) ([]byte, error) {
	if f.readErr != nil {
		return nil, f.readErr
	}
	b, ok := f.files[workDir+"|"+sessionID]
	if !ok {
		return nil, fmt.Errorf("session %s: %w", sessionID, executor.ErrSessionFileNotFound)
	}
	return b, nil
}

func (f *fakeFiles) WriteSession(workDir, sessionID string, content []byte) error {
	f.writes++
	f.files[workDir+"|"+sessionID] = bytes.Clone(content)
	return nil
}

// TestRestoreSession: the stored copy replaces a local file that is missing,
// shorter or another conversation, never one that continues it; nothing
// happens without a stored copy, or with an agent that keeps no session
// file; saving takes the local file, and a missing one is no error.
func TestRestoreSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := New(Config{Store: st, Resolve: func(store.Run) (Resolved, error) { return Resolved{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.CreateRun(ctx, store.Run{ID: "r1", Prompt: "p", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	none := &fakeFiles{files: map[string][]byte{}}
	r.restoreSession(ctx, none, run, "s1", "/wd")
	if none.writes != 0 {
		t.Fatal("restored without a stored copy")
	}
	const stored = "one\ntwo\n"
	if err := st.SaveSession(ctx, "r1", "s1", []byte(stored)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, local string
		missing     bool
		want        string
	}{
		{name: "missing", missing: true, want: stored},
		{name: "shorter", local: "one\n", want: stored},
		{name: "same", local: stored, want: stored},
		{name: "further along", local: stored + "three\n", want: stored + "three\n"},
		{name: "another conversation, longer", local: "one\nTWO\nthree\n", want: stored},
		{name: "empty", local: "", want: stored},
	} {
		f := &fakeFiles{files: map[string][]byte{}}
		if !c.missing {
			f.files["/wd|s1"] = []byte(c.local)
		}
		r.restoreSession(ctx, f, run, "s1", "/wd")
		if got := string(f.files["/wd|s1"]); got != c.want {
			t.Errorf("%s: local file %q after restoring, want %q", c.name, got, c.want)
		}
	}
	r.restoreSession(ctx, withoutSessionFiles{}, run, "s1", "/wd") // no SessionFiles: nothing to do, no panic

	// Saving: the local file goes to the store; a missing or unreadable
	// one leaves the stored copy as it was.
	f := &fakeFiles{files: map[string][]byte{"/wd|s1": []byte("saved\n")}}
	r.saveSession(ctx, f, run, store.Turn{SessionID: "s1"}, "/wd")
	if got, _, _ := st.Session(ctx, "r1", "s1"); string(got) != "saved\n" {
		t.Fatalf("stored %q after saving", got)
	}
	r.saveSession(ctx, f, run, store.Turn{SessionID: "s1"}, "/elsewhere")
	f.readErr = errors.New("permission denied")
	r.saveSession(ctx, f, run, store.Turn{SessionID: "s1"}, "/wd")
	if got, _, _ := st.Session(ctx, "r1", "s1"); string(got) != "saved\n" {
		t.Fatalf("stored %q after saves that had nothing to read", got)
	}
}

// BenchmarkSessionCopy measures what portable sessions add to a turn on
// SQLite, for a session file of 4 MiB of JSONL: the save after the turn,
// and the restore before a resume when the local file is the same (the
// common case: the run stays on one machine) or missing (another machine).
func BenchmarkSessionCopy(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r, err := New(Config{Store: st, Resolve: func(store.Run) (Resolved, error) { return Resolved{}, nil }})
	if err != nil {
		b.Fatal(err)
	}
	run, err := st.CreateRun(ctx, store.Run{ID: "r1", Prompt: "p", SessionID: "s1"})
	if err != nil {
		b.Fatal(err)
	}
	e, err := executor.New(executor.Config{BaseEnv: []string{}, Env: map[string]string{"HOME": b.TempDir()}})
	if err != nil {
		b.Fatal(err)
	}
	var content []byte
	for i := 0; len(content) < 4<<20; i++ {
		content = fmt.Appendf(content, `{"type":"assistant","uuid":"%08d","message":{"content":[{"type":"text","text":"step %d: edited the handler and ran the tests; all pass"}]}}`+"\n", i, i)
	}
	wd := b.TempDir()
	if err := e.WriteSession(wd, "s1", content); err != nil {
		b.Fatal(err)
	}
	b.Run("save", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			r.saveSession(ctx, e, run, store.Turn{SessionID: "s1"}, wd)
		}
	})
	b.Run("restore-same", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			r.restoreSession(ctx, e, run, "s1", wd)
		}
	})
	b.Run("restore-missing", func(b *testing.B) {
		path, _ := e.SessionPath(wd, "s1")
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			os.Remove(path)
			r.restoreSession(ctx, e, run, "s1", wd)
		}
	})
}
