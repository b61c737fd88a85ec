package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// These tests drive the whole program — CLI commands, run loop, store,
// terminal surface — with the REAL Claude Code CLI talking to the fake
// Messages API on loopback.

// envChild makes the test binary run as the orchestrator (crash tests).
const envChild = "ORCHESTRATOR_E2E_CHILD"

const authMarker = `<!--QUESTION:{"questions":[{"question":"Which auth method?","header":"Auth","options":[` +
	`{"label":"OAuth2","description":"Use OAuth2"},{"label":"JWT","description":"Stateless"}]}]}-->`

// answerRule matches the prompt that carries answers (questions.FormatResponse).
const answerRule = "BEGIN ANSWERS"

// standardRules: the task asks one question; the answer is confirmed by
// echoing the chosen label; a "continue" after an interruption finishes.
func standardRules(answerDelay time.Duration) []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "I need a decision.\n" + authMarker}},
		{When: answerRule, Respond: func(r fakeapi.Request) fakeapi.Reply {
			label := "nothing"
			for _, l := range []string{"OAuth2", "JWT"} {
				if strings.Contains(r.LastUserText, "chose: "+l) || strings.Contains(r.LastUserText, l) {
					label = l
				}
			}
			return fakeapi.Reply{Text: "Implemented with " + label + ".", ChunkDelay: answerDelay, Chunks: 4}
		}},
		{When: "from where you left off", Reply: fakeapi.Reply{Text: "Finished after the interruption."}},
	}
}

type e2e struct {
	base   string // the config file's common part
	t      testing.TB
	fake   *fakeapi.Server
	dir    string
	config string
	state  string
}

func newE2E(t testing.TB, rules ...fakeapi.Rule) *e2e {
	t.Helper()
	claude := clitest.Claude(t)
	f := fakeapi.New(rules...)
	ts := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); ts.Close() })
	dir := t.TempDir()
	e := &e2e{t: t, fake: f, dir: dir, config: filepath.Join(dir, "orchestrator.yaml"), state: filepath.Join(dir, "state")}
	env := clitest.Env(t, ts.URL)
	var b strings.Builder
	fmt.Fprintf(&b, "state_dir: %q\nagent:\n  command: %q\n  timeout: 2m\n  env:\n", e.state, claude)
	for k, v := range env {
		fmt.Fprintf(&b, "    %s: %q\n", k, v)
	}
	fmt.Fprintf(&b, "run:\n  rate_limit_backoff: 1s\nsurfaces:\n  terminal:\n    enabled: true\n")
	e.base = b.String()
	e.writeConfig("")
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o700); err != nil {
		t.Fatal(err)
	}
	return e
}

// writeConfig writes the config file: the common part, then more (YAML
// indented as under "surfaces:", or top-level keys after a blank line).
func (e *e2e) writeConfig(more string) {
	e.t.Helper()
	if err := os.WriteFile(e.config, []byte(e.base+more), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// run runs the orchestrator in-process with stdin and returns its exit code
// and output.
func (e *e2e) run(stdin string, args ...string) (int, string, string) {
	e.t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Dir: filepath.Join(e.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := m.Exec(ctx, append([]string{"--config", e.config}, args...))
	e.t.Logf("orchestrator %s → exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// child starts the orchestrator as a separate process (this test binary).
func (e *e2e) child(stdin string, failpoint string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"--config", e.config}, args...)...)
	cmd.Dir = filepath.Join(e.dir, "work")
	cmd.Env = append(os.Environ(), envChild+"=1", envFailpoint+"="+failpoint)
	cmd.Stdin = strings.NewReader(stdin)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	e.t.Cleanup(func() {
		// A test that failed half-way leaves no orchestrator behind.
		if cmd.Process != nil && cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if e.t.Failed() {
			e.t.Logf("child %s output:\n%s", strings.Join(args, " "), out.String())
		}
	})
	return cmd
}

func (e *e2e) store() *store.Store {
	e.t.Helper()
	st, err := store.Open(context.Background(), e.state)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

func (e *e2e) onlyRun() store.Run {
	e.t.Helper()
	runs, err := e.store().ListRuns(context.Background(), store.RunFilter{})
	if err != nil || len(runs) != 1 {
		e.t.Fatalf("runs = %+v, %v; want exactly one", runs, err)
	}
	return runs[0]
}

// answerRequests counts the requests whose last user message carried the
// answers: the model must get them exactly once.
func (e *e2e) answerRequests() int {
	n := 0
	for _, r := range e.fake.Requests() {
		if strings.Contains(r.LastUserText, answerRule) {
			n++
		}
	}
	return n
}

func TestRunAsksOnTerminalAndResumes(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	code, out, _ := e.run("2\n", "run", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	for _, want := range []string{"Which auth method?", "1. OAuth2", "2. JWT", "done", "Implemented with JWT."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	reqs := e.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("fake got %d requests, want 2", len(reqs))
	}
	// The resumed request is the same conversation: it carries the first
	// turn's assistant text, and the chosen label in the answer.
	second := reqs[1]
	var sawFirstTurn bool
	for _, m := range second.Messages {
		if m.Role == "assistant" && strings.Contains(m.Text(), "I need a decision.") {
			sawFirstTurn = true
		}
	}
	if !sawFirstTurn {
		t.Error("the resumed request does not carry the first turn's assistant text")
	}
	if !strings.Contains(second.LastUserText, "JWT") {
		t.Errorf("the resumed request's prompt lacks the chosen label:\n%s", second.LastUserText)
	}
	// The question protocol is in the system prompt of both calls.
	for i, r := range reqs {
		if !strings.Contains(r.System, "<!--QUESTION:") {
			t.Errorf("request %d: system prompt lacks the question protocol", i+1)
		}
	}
	run := e.onlyRun()
	if run.Status != store.RunDone || run.FinalText != "Implemented with JWT." {
		t.Fatalf("run = %s %q", run.Status, run.FinalText)
	}
}

func TestTerminalEOFThenAnswerAndResume(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	code, out, _ := e.run("", "run", "--prompt", "Implement spec X")
	if code != exitWaiting {
		t.Fatalf("exit %d, want %d (waiting)", code, exitWaiting)
	}
	if !strings.Contains(out, "orchestrator answer") {
		t.Errorf("output does not say how to answer later:\n%s", out)
	}
	code, out, _ = e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	pending := pendingQuestions(rep.QuestionSets)
	if len(pending) != 1 || pending[0].q.Text != "Which auth method?" || len(rep.Runs) != 1 || rep.Runs[0].Status != "waiting" {
		t.Fatalf("status = %+v", rep)
	}
	q := struct{ ID, RunID string }{pending[0].q.ID, pending[0].set.RunID}
	if code, _, errs := e.run("", "answer", q.ID, "7"); code != exitUsage || !strings.Contains(errs, "OAuth2") {
		t.Fatalf("invalid answer: exit %d, stderr %q; want 2 and the valid choices", code, errs)
	}
	if code, _, _ := e.run("", "answer", q.ID, "2"); code != 0 {
		t.Fatalf("answer exit %d", code)
	}
	if code, _, errs := e.run("", "answer", q.ID, "1"); code == 0 || !strings.Contains(errs, "already") {
		t.Fatalf("second answer: exit %d, stderr %q; want an error saying it was answered", code, errs)
	}
	code, out, _ = e.run("", "resume", q.RunID)
	if code != 0 || !strings.Contains(out, "Implemented with JWT.") {
		t.Fatalf("resume exit %d", code)
	}
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("answers sent %d times, want 1", n)
	}
}

func TestMalformedMarkerIsCorrected(t *testing.T) {
	t.Parallel()
	bad := `<!--QUESTION:{"questions":[{"question":"","options":[{"label":"A"}]}]}-->`
	e := newE2E(t, append([]fakeapi.Rule{
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "Deciding.\n" + bad}},
		{When: "QUESTION block was not valid", Reply: fakeapi.Reply{Text: "Sorry.\n" + authMarker}},
	}, standardRules(0)...)...)
	code, _, _ := e.run("1\n", "run", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 3 || !strings.Contains(reqs[1].LastUserText, "QUESTION block was not valid") ||
		!strings.Contains(reqs[1].LastUserText, "question") {
		t.Fatalf("want task, correction, answer; got %d requests", len(reqs))
	}
	if run := e.onlyRun(); run.FinalText != "Implemented with OAuth2." {
		t.Fatalf("final = %q", run.FinalText)
	}
}

func TestMalformedMarkerTwiceFails(t *testing.T) {
	t.Parallel()
	bad := `<!--QUESTION:{"questions":[{"question":"Pick","options":[{"label":"A"},{"label":"a"}]}]}-->`
	e := newE2E(t, fakeapi.Rule{Reply: fakeapi.Reply{Text: "Deciding.\n" + bad}})
	code, _, _ := e.run("1\n", "run", "--prompt", "Implement spec X")
	if code != exitFailed {
		t.Fatalf("exit %d, want 1", code)
	}
	run := e.onlyRun()
	if run.Status != store.RunFailed || !strings.Contains(run.Error, "after 2 correction prompts") || !strings.Contains(run.Error, "label") {
		t.Fatalf("run = %s %q", run.Status, run.Error)
	}
	if n := len(e.fake.Requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (task + 2 corrections)", n)
	}
}

// TestCrashAtEachStep kills the orchestrator with SIGKILL at each step of a
// question round; `resume` must then finish the run with the answer handed
// to the model exactly once.
func TestCrashAtEachStep(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	for _, tc := range []struct {
		point       string
		resumeInput string // what the restarted process reads on the terminal
	}{
		{"question-stored", "2\n"}, // asked again after the restart
		{"answer-stored", ""},
		{"claimed", ""},
	} {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, standardRules(0)...)
			err := e.child("2\n", tc.point, "run", "--prompt", "Implement spec X").Run()
			wantKilled(t, err)
			run := e.onlyRun()
			cmd := e.child(tc.resumeInput, "", "resume", run.ID)
			if err := cmd.Run(); err != nil {
				t.Fatalf("resume: %v", err)
			}
			e.wantDoneOnce(t, "Implemented with JWT.")
		})
	}
	t.Run("turn-started", func(t *testing.T) {
		t.Parallel()
		// The answer's reply streams slowly; the process is killed once the
		// CLI has sent the answer to the model.
		e := newE2E(t, standardRules(time.Second)...)
		cmd := e.child("2\n", "", "run", "--prompt", "Implement spec X")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := e.fake.WaitRequests(ctx, 2); err != nil {
			cmd.Process.Kill()
			t.Fatalf("the answer never reached the model: %v", err)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		wantKilled(t, cmd.Wait())
		run := e.onlyRun()
		if err := e.child("", "", "resume", run.ID).Run(); err != nil {
			t.Fatalf("resume: %v", err)
		}
		// The answer reached the session before the crash: the restart
		// continues the session instead of sending it again.
		e.wantDoneOnce(t, "Finished after the interruption.")
	})
}

func wantKilled(t *testing.T, err error) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("orchestrator: %v, want killed", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("orchestrator ended with %v, want SIGKILL", err)
	}
}

func (e *e2e) wantDoneOnce(t *testing.T, final string) {
	t.Helper()
	run := e.onlyRun()
	if run.Status != store.RunDone || run.FinalText != final {
		t.Fatalf("run = %s %q %q, want done %q", run.Status, run.FinalText, run.Error, final)
	}
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("the answer reached the model %d times, want exactly 1", n)
	}
	sets, err := e.store().QuestionSets(context.Background(), store.SetFilter{RunID: run.ID})
	if err != nil || len(sets) != 1 || sets[0].State != store.SetResumed {
		t.Fatalf("sets = %+v, %v", sets, err)
	}
	if a, ok := sets[0].Response.Answer(sets[0].Set.Questions[0].ID); !ok || len(a.Labels) != 1 || a.Labels[0] != "JWT" {
		t.Fatalf("stored answer = %+v", sets[0].Response)
	}
}

func TestSecondProcessFailsFast(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	// The first process waits on the terminal, whose input never ends.
	_, runID := e.startWaitingRun()
	start := time.Now()
	code, _, errs := e.run("", "resume", runID)
	if code != exitFailed || !strings.Contains(errs, "locked by another process") {
		t.Fatalf("second process: exit %d, stderr %q", code, errs)
	}
	t.Logf("second process refused in %s", time.Since(start))
}

// startWaitingRun starts `run` as a child process whose terminal input never
// ends, and returns it once its question is pending, with the run's ID.
func (e *e2e) startWaitingRun() (*exec.Cmd, string) {
	e.t.Helper()
	cmd := e.child("", "", "run", "--prompt", "Implement spec X")
	pr, pw, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { pw.Close() })
	cmd.Stdin = pr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	st := e.store()
	var runID string
	waitFor(e.t, "the question", func() bool {
		sets, _ := st.QuestionSets(context.Background(), store.SetFilter{State: []store.SetState{store.SetPending}})
		if len(sets) == 1 {
			runID = sets[0].Set.RunID
		}
		return runID != ""
	})
	return cmd, runID
}

// TestCancelStopsAWaitingRun: `cancel RUN` from another process ends a run
// whose question waits on a terminal: the waiting process stops (exit 130),
// the question expires, and nothing reaches the model any more.
func TestCancelStopsAWaitingRun(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	cmd, runID := e.startWaitingRun()
	st := e.store()
	if code, out, _ := e.run("", "cancel", runID); code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel: exit %d", code)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitCancelled {
		t.Fatalf("the waiting run ended with %v, want exit %d", err, exitCancelled)
	}
	run := e.onlyRun()
	sets, _ := st.QuestionSets(context.Background(), store.SetFilter{RunID: run.ID})
	if run.Status != store.RunCancelled || len(sets) != 1 || sets[0].State != store.SetExpired {
		t.Fatalf("run %s, sets %+v", run.Status, sets)
	}
	if code, _, errs := e.run("", "answer", sets[0].Set.Questions[0].ID, "1"); code == 0 || !strings.Contains(errs, "expired") {
		t.Fatalf("answering a cancelled run's question: exit %d, %q", code, errs)
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Fatalf("%d requests; nothing may reach the model after the cancel", n)
	}
}

// TestSpecRemovedMidRunKeepsItsPolicy: a run keeps the spec it started
// with. Its question waits (the terminal's input ended), the spec file is
// then removed, and `resume` still applies the spec's on_timeout: the
// default option answers, as the spec said when the run began.
func TestSpecRemovedMidRunKeepsItsPolicy(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	spec := filepath.Join(e.dir, "work", "task.md")
	body := "---\nname: task\nsurfaces: [terminal]\nquestion_timeout: 1s\non_timeout: {action: default, option: JWT}\n---\nImplement spec X\n"
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := e.run("", "run", spec); code != exitWaiting {
		t.Fatalf("run exit %d, want %d (waiting)", code, exitWaiting)
	}
	run := e.onlyRun()
	if err := os.Remove(spec); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the question timeout
	code, out, _ := e.run("", "resume", run.ID)
	if code != 0 || !strings.Contains(out, "Implemented with JWT.") {
		t.Fatalf("resume exit %d; want the spec's on_timeout default (JWT) applied", code)
	}
	sets, _ := e.store().QuestionSets(context.Background(), store.SetFilter{RunID: run.ID})
	if len(sets) != 1 || sets[0].Response.Surface != "timeout" {
		t.Fatalf("sets = %+v, want the question answered by the timeout policy", sets)
	}
}

// TestCancelMidTurnStopsTheToolCall: `cancel RUN` while the agent runs a
// slow Bash command stops the CLI's process group: the command never
// completes, the turn is recorded cancelled before cancel returns, and the
// run's process ends.
func TestCancelMidTurnStopsTheToolCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	started, finished := filepath.Join(dir, "started"), filepath.Join(dir, "finished")
	e := newE2E(t,
		fakeapi.Rule{When: "Run the slow command", Reply: fakeapi.Reply{Text: "Running it.", ToolUse: &fakeapi.ToolUse{
			Name: "Bash", Input: map[string]any{
				"command":     fmt.Sprintf("touch %q && sleep 4 && touch %q", started, finished),
				"description": "A slow command",
			}}}},
		fakeapi.Rule{Reply: fakeapi.Reply{Text: "The command finished."}},
	)
	spec := filepath.Join(e.dir, "work", "slow.md")
	if err := os.WriteFile(spec, []byte("---\nname: slow\nallowed_tools: [Bash]\n---\nRun the slow command\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := e.child("", "", "run", spec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slow command to start", func() bool { _, err := os.Stat(started); return err == nil })
	run := e.onlyRun()
	if code, out, _ := e.run("", "cancel", run.ID); code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel: exit %d", code)
	}
	turns, err := e.store().Turns(context.Background(), run.ID)
	if err != nil || len(turns) != 1 || !turns[0].Finished || turns[0].Result.Category != "cancelled" {
		t.Fatalf("turns when cancel returned = %+v, %v; want the one turn finished as cancelled", turns, err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitCancelled {
		t.Errorf("the run's process ended with %v, want exit %d", err, exitCancelled)
	}
	time.Sleep(5 * time.Second) // past the command's own end
	if _, err := os.Stat(finished); err == nil {
		t.Fatal("the Bash command completed after the run was cancelled")
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Errorf("%d requests; the tool's result must never reach the model", n)
	}
}

// TestOversizeQuestionIsCorrected: a 10 MB QUESTION block is an invalid
// block: the model gets the correction prompt naming the limit, nobody is
// asked the huge question, and the corrected question is asked.
func TestOversizeQuestionIsCorrected(t *testing.T) {
	t.Parallel()
	huge := `<!--QUESTION:{"questions":[{"question":"` + strings.Repeat("Why? ", 2<<20) + `"}]}-->`
	e := newE2E(t, append([]fakeapi.Rule{
		{When: "Implement spec X", Reply: fakeapi.Reply{Text: "Deciding.\n" + huge}},
		{When: "QUESTION block was not valid", Reply: fakeapi.Reply{Text: "Sorry.\n" + authMarker}},
	}, standardRules(0)...)...)
	code, out, _ := e.run("1\n", "run", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 3 || !strings.Contains(reqs[1].LastUserText, "QUESTION block was not valid") ||
		!strings.Contains(reqs[1].LastUserText, fmt.Sprint(questions.MaxSetBytes)) {
		t.Fatalf("want task, correction naming the limit, answer; got %d requests", len(reqs))
	}
	if strings.Contains(out, "Why? Why? Why? Why? Why? Why? Why? Why? Why? Why? Why? Why?") {
		t.Errorf("the oversize question was shown (%d bytes of output)", len(out))
	}
	if run := e.onlyRun(); run.FinalText != "Implemented with OAuth2." {
		t.Fatalf("final = %q", run.FinalText)
	}
}

// TestAnswerOverTheCapIsRefused: `answer` with more than
// run.answer_max_bytes exits 2 naming the limit and records nothing (it is
// never silently cut).
func TestAnswerOverTheCapIsRefused(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	if code, _, _ := e.run("", "run", "--prompt", "Implement spec X"); code != exitWaiting {
		t.Fatalf("exit %d, want %d (waiting)", code, exitWaiting)
	}
	qid := pendingOf(t, e)
	code, _, errs := e.run("", "answer", qid, "other: "+strings.Repeat("x", 9000))
	if code != exitUsage || !strings.Contains(errs, "8192") || !strings.Contains(errs, "answer_max_bytes") {
		t.Fatalf("answer over the cap: exit %d, stderr %q; want 2 naming the limit", code, errs)
	}
	if got := pendingOf(t, e); got != qid {
		t.Fatalf("the question is no longer pending")
	}
}
