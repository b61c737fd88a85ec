package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// Native asking and approvals with the real CLI (issue 13): the model calls
// Bash or AskUserQuestion through the fake API; the orchestrator's hook
// decides from the store.

const madeFile = "made_by_tool.txt"

// approvalRules: "make the file" calls Bash touch; the tool's result (or
// refusal) is echoed back as the final text.
func approvalRules(cmd string) []fakeapi.Rule {
	return []fakeapi.Rule{
		{When: "make the file", Reply: fakeapi.Reply{Text: "Making it.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": cmd, "description": "Create the marker file"}}}, Times: 1},
		{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}},
	}
}

func (e *e2e) made() bool {
	_, err := os.Stat(filepath.Join(e.dir, "work", madeFile))
	return err == nil
}

// bashRuns counts the tool results the fake API got for the Bash call.
func (e *e2e) toolResults() int {
	n := 0
	for _, r := range e.fake.Requests() {
		n += len(r.ToolResults)
	}
	return n
}

func TestApprovalAllowOnceOnTerminal(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	e.base = strings.Replace(e.base, "  timeout: 2m\n", "  timeout: 2m\n  allowed_tools: []\n", 1)
	e.writeConfig("")
	code, out, _ := e.run("Allow once\n", "run", "--prompt", "make the file", "--surface", "terminal")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Allow once", "Allow for this run", "Deny", "touch " + madeFile, "Create the marker file"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal does not show %q:\n%s", want, out)
		}
	}
	if !e.made() || e.toolResults() != 1 {
		t.Errorf("the command ran: %v; tool results %d", e.made(), e.toolResults())
	}
	run := e.onlyRun()
	if run.Status != store.RunDone || !strings.Contains(run.FinalText, "SAW") {
		t.Errorf("run %s %q", run.Status, run.FinalText)
	}
}

func TestApprovalDenyWithReasonOnTerminal(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	code, out, _ := e.run("Deny: not on a Friday\n", "run", "--prompt", "make the file", "--surface", "terminal")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if e.made() {
		t.Error("a denied command ran")
	}
	run := e.onlyRun()
	if run.Status != store.RunDone || !strings.Contains(run.FinalText, "not on a Friday") {
		t.Errorf("the model was not told the reason: %s %q", run.Status, run.FinalText)
	}
}

func TestApprovalPolicyDecidesWithoutAsking(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	e.writeConfig("\napprovals:\n  deny: [\"Bash(touch:*)\"]\n")
	code, out, _ := e.run("", "run", "--prompt", "make the file", "--surface", "terminal")
	if code != 0 || e.made() || strings.Contains(out, "Allow once") {
		t.Fatalf("deny by policy: exit %d, made %v:\n%s", code, e.made(), out)
	}
	if run := e.onlyRun(); !strings.Contains(run.FinalText, "Bash(touch:*)") {
		t.Errorf("the model was not told the rule: %q", run.FinalText)
	}
}

func TestApprovalPolicyAllow(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	e.writeConfig("\napprovals:\n  allow: [\"Bash(touch:*)\"]\n")
	code, out, _ := e.run("", "run", "--prompt", "make the file", "--surface", "terminal")
	if code != 0 || !e.made() || strings.Contains(out, "Allow once") {
		t.Fatalf("allow by policy: exit %d, made %v:\n%s", code, e.made(), out)
	}
}

// TestApprovalParkedThenAnsweredThenResumed: the terminal's input is closed
// while the approval waits: the run parks (exit 3, no process), status
// lists the approval, `answer` allows it with no orchestrator running, and
// `resume` runs the command exactly once.
func TestApprovalParkedThenAnsweredThenResumed(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	code, _, _ := e.run("", "run", "--prompt", "make the file", "--surface", "terminal")
	if code != exitWaiting {
		t.Fatalf("exit %d, want %d", code, exitWaiting)
	}
	if e.made() {
		t.Fatal("the command ran before it was approved")
	}
	code, out, _ := e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	pending := pendingQuestions(rep.QuestionSets)
	if len(pending) != 1 || len(rep.Runs) != 1 || rep.Runs[0].Status != "waiting" || !strings.Contains(out, "approval") {
		t.Fatalf("status = %s", out)
	}
	if code, out, _ := e.run("", "status"); code != 0 || !strings.Contains(out, "Approval: Bash touch "+madeFile) {
		t.Errorf("status does not show the approval's call:\n%s", out)
	}
	if code, _, _ := e.run("", "answer", pending[0].q.ID, "Allow once"); code != 0 {
		t.Fatalf("answer exit %d", code)
	}
	code, out, _ = e.run("", "resume", pending[0].set.RunID)
	if code != 0 || !e.made() {
		t.Fatalf("resume exit %d, made %v:\n%s", code, e.made(), out)
	}
	if n := e.toolResults(); n != 1 {
		t.Errorf("the command's result reached the model %d times, want 1", n)
	}
	if code, _, _ := e.run("", "resume", pending[0].set.RunID); code == 0 && e.toolResults() != 1 {
		t.Errorf("a second resume ran it again")
	}
}

func TestAskUserQuestionOnTerminal(t *testing.T) {
	t.Parallel()
	ask := map[string]any{"questions": []any{
		map[string]any{"question": "Which auth method?", "header": "Auth", "multiSelect": false,
			"options": []any{map[string]any{"label": "OAuth2", "description": "o"}, map[string]any{"label": "JWT", "description": "j"}}},
		map[string]any{"question": "Which stores?", "header": "Store", "multiSelect": true,
			"options": []any{map[string]any{"label": "SQL", "description": "s"}, map[string]any{"label": "Redis", "description": "r"}}},
	}}
	e := newE2E(t,
		fakeapi.Rule{When: "ask me", Reply: fakeapi.Reply{ToolUse: &fakeapi.ToolUse{Name: "AskUserQuestion", Input: ask}}, Times: 1},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}},
	)
	code, out, _ := e.run("other: mTLS\n1,2\n", "run", "--prompt", "ask me", "--surface", "terminal")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	run := e.onlyRun()
	if !strings.Contains(run.FinalText, `"Which auth method?"="mTLS"`) || !strings.Contains(run.FinalText, `"Which stores?"="SQL, Redis"`) {
		t.Errorf("the model did not get the answers as the tool's answer: %q", run.FinalText)
	}
}

// TestApprovalAllowForRun: "Allow for this run" runs the call, and a second
// identical call in the same run is not asked again.
func TestApprovalAllowForRun(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	touch := &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "touch " + madeFile, "description": "Create the marker file"}}
	e := newE2E(t, fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 2 {
			return fakeapi.Reply{Text: "Making it.", ToolUse: touch}
		}
		return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
	}})
	code, out, _ := e.run("Allow for this run\n", "run", "--prompt", "make the file", "--surface", "terminal")
	if code != 0 || !e.made() {
		t.Fatalf("exit %d made %v:\n%s", code, e.made(), out)
	}
	if n := strings.Count(out, "Allow Bash to run this?"); n != 1 {
		t.Errorf("asked %d times, want once", n)
	}
	sets, err := e.store().QuestionSets(context.Background(), store.SetFilter{})
	if err != nil || len(sets) != 1 {
		t.Errorf("sets %d %v", len(sets), err)
	}
	if n := e.toolResults(); n < 2 {
		t.Errorf("the second call did not run: %d tool results", n)
	}
}

// TestApprovalAnsweredByPreset: a spec's answers: apply to approvals (the
// question's header is "Approval").
func TestApprovalAnsweredByPreset(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	spec := filepath.Join(e.dir, "make.md")
	body := fmt.Sprintf("---\nname: make\nworkdir: %q\nsurfaces: [terminal]\nanswers:\n  Approval: Allow once\n---\nmake the file\n", filepath.Join(e.dir, "work"))
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := e.run("", "run", spec)
	if code != 0 || !e.made() {
		t.Fatalf("exit %d made %v:\n%s", code, e.made(), out)
	}
}

// TestAskUserQuestionOnGitHub: the model's AskUserQuestion is asked in an
// issue comment; one reply answers its single-select question with "other:"
// free text and its multi-select question with two options, and the model
// gets them as the tool's answer.
func TestAskUserQuestionOnGitHub(t *testing.T) {
	t.Parallel()
	ask := map[string]any{"questions": []any{
		map[string]any{"question": "Which auth method?", "header": "Auth", "multiSelect": false,
			"options": []any{map[string]any{"label": "OAuth2", "description": "o"}, map[string]any{"label": "JWT", "description": "j"}}},
		map[string]any{"question": "Which stores?", "header": "Store", "multiSelect": true,
			"options": []any{map[string]any{"label": "SQL", "description": "s"}, map[string]any{"label": "Redis", "description": "r"}}},
	}}
	e := newE2E(t,
		fakeapi.Rule{When: "ask me", Reply: fakeapi.Reply{ToolUse: &fakeapi.ToolUse{Name: "AskUserQuestion", Input: ask}}, Times: 1},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}},
	)
	gh := githubtest.NewServer(t)
	gh.RequireToken("test-token")
	gh.SetPermission("alice", "write")
	const repo = "acme/app"
	issue := gh.CreateIssue(repo, "Nightly tasks")
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    issue: %d\n    poll_interval: 100ms\n",
		gh.URL()+"/", repo, issue))
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.run("", "run", "--surface", "github", "--prompt", "ask me")
		done <- code
	}()
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	if !strings.Contains(q.Body, "Which auth method?") {
		t.Errorf("question comment:\n%s", q.Body)
	}
	gh.AddComment(repo, issue, "alice", "Auth: other: mTLS\nStore: 1,2")
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not finish")
	}
	if run := e.onlyRun(); !strings.Contains(run.FinalText, `"Which auth method?"="mTLS"`) || !strings.Contains(run.FinalText, `"Which stores?"="SQL, Redis"`) {
		t.Errorf("final %q", run.FinalText)
	}
}

// TestApprovalCrashAtEachStep: the orchestrator is killed (SIGKILL) at each
// step of a parked approval's answer; a restart runs the command exactly
// once.
func TestApprovalCrashAtEachStep(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	for _, point := range []string{"answer-stored", "claimed", "turn-started"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, approvalRules("touch "+madeFile)...)
			// Parked: no terminal input.
			if code, _, _ := e.run("", "run", "--prompt", "make the file", "--surface", "terminal"); code != exitWaiting {
				t.Fatalf("exit %d", code)
			}
			run := e.onlyRun()
			// The answer is given on the terminal of a resume that dies.
			err := e.child("Allow once\n", point, "resume", run.ID).Run()
			wantKilled(t, err)
			if err := e.child("", "", "resume", run.ID).Run(); err != nil {
				t.Fatalf("resume: %v", err)
			}
			if run := e.onlyRun(); run.Status != store.RunDone || !e.made() {
				t.Fatalf("run %s made %v", run.Status, e.made())
			}
			if n := e.toolResults(); n != 1 {
				t.Errorf("the command's result reached the model %d times, want 1", n)
			}
		})
	}
}

// TestApprovalTwoCallsInOneTurn: the model calls two tools at once and the
// run parks. The CLI keeps only the last deferred call (measured; the first
// is dropped from the session and never runs): the dropped call's question
// expires with the reason, the kept one is asked, and once allowed it runs
// exactly once.
func TestApprovalTwoCallsInOneTurn(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		fakeapi.Rule{When: "make the files", Reply: fakeapi.Reply{Text: "Making them.",
			ToolUse:      &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{"command": "touch a.txt", "description": "a"}},
			MoreToolUses: []fakeapi.ToolUse{{Name: "Bash", Input: map[string]any{"command": "touch b.txt", "description": "b"}}}}, Times: 1},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}},
	)
	if code, _, _ := e.run("", "run", "--prompt", "make the files", "--surface", "terminal"); code != exitWaiting {
		t.Fatalf("exit %d", code)
	}
	st := e.store()
	run := e.onlyRun()
	sets, err := st.QuestionSets(context.Background(), store.SetFilter{RunID: run.ID})
	if err != nil || len(sets) != 2 {
		t.Fatalf("sets %d %v", len(sets), err)
	}
	var pending []store.SetRecord
	dropped := ""
	for _, s := range sets {
		switch s.State {
		case store.SetPending:
			pending = append(pending, s)
		case store.SetExpired:
			c, err := st.ToolCall(context.Background(), s.Set.Tool.ToolUseID)
			if err != nil || c.Decision != store.DecisionDeny || !strings.Contains(c.Reason, "dropped") {
				t.Errorf("the dropped call: %+v %v", c, err)
			}
			var in struct{ Command string }
			_ = json.Unmarshal(c.Input, &in)
			dropped = strings.TrimPrefix(in.Command, "touch ")
		default:
			t.Errorf("set %s is %s", s.Set.ID, s.State)
		}
	}
	if len(pending) != 1 {
		t.Fatalf("%d pending approvals, want the one the CLI kept", len(pending))
	}
	if code, _, _ := e.run("", "answer", pending[0].Set.Questions[0].ID, "Allow once"); code != 0 {
		t.Fatalf("answer exit %d", code)
	}
	if code, _, _ := e.run("", "resume", run.ID); code != 0 {
		t.Fatalf("resume exit %d", code)
	}
	kept := pending[0].Set.Tool
	var in struct{ Command string }
	_ = json.Unmarshal(kept.Input, &in)
	file := strings.TrimPrefix(in.Command, "touch ")
	if _, err := os.Stat(filepath.Join(e.dir, "work", file)); err != nil {
		t.Errorf("the allowed call (%s) did not run", in.Command)
	}
	if n := e.toolResults(); n != 1 {
		t.Errorf("%d tool results reached the model, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "work", dropped)); dropped == "" || err == nil {
		t.Errorf("the dropped call (%q) ran", dropped)
	}
	if run := e.onlyRun(); run.Status != store.RunDone {
		t.Errorf("run %s", run.Status)
	}
}

// TestApprovalOnGitHubParkedPastHold: an approval is asked in an issue
// comment with the command in a code block; nobody answers within
// approval_hold (1s), so the turn parks (the CLI exits, the run waits); a
// reply "Allow once" then resumes the session and the command runs once.
func TestApprovalOnGitHubParkedPastHold(t *testing.T) {
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	gh := githubtest.NewServer(t)
	gh.RequireToken("test-token")
	gh.SetPermission("alice", "write")
	const repo = "acme/app"
	issue := gh.CreateIssue(repo, "Nightly tasks")
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    issue: %d\n    poll_interval: 100ms\n\napprovals:\n  approval_hold: 1s\n",
		gh.URL()+"/", repo, issue))
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.run("", "run", "--surface", "github", "--prompt", "make the file")
		done <- code
	}()
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	for _, want := range []string{"```sh\ntouch " + madeFile + "\n```", "Allow once", "Allow for this run", "Deny"} {
		if !strings.Contains(q.Body, want) {
			t.Errorf("the approval comment lacks %q:\n%s", want, q.Body)
		}
	}
	st := e.store()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		runs, _ := st.ListRuns(context.Background(), store.RunFilter{})
		if len(runs) == 1 && runs[0].Status == store.RunWaiting {
			calls, _ := st.ToolCalls(context.Background(), runs[0].ID)
			if len(calls) == 1 && calls[0].Deferred {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the approval was never parked")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e.made() {
		t.Fatal("the command ran before it was approved")
	}
	gh.AddComment(repo, issue, "alice", "Allow once")
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not finish")
	}
	if !e.made() || e.toolResults() != 1 {
		t.Errorf("made %v, tool results %d", e.made(), e.toolResults())
	}
}

// TestApprovalCLIPermissionRequest: a call the policy leaves to the CLI
// (Read) that the CLI itself asks permission for (a file outside the
// project) comes as a can_use_tool request and is asked of a person live.
func TestApprovalCLIPermissionRequest(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{"Allow once", "Deny: private"} {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			outside := filepath.Join(t.TempDir(), "notes.txt")
			if err := os.WriteFile(outside, []byte("outside-content"), 0o600); err != nil {
				t.Fatal(err)
			}
			e := newE2E(t,
				fakeapi.Rule{When: "read it", Reply: fakeapi.Reply{Text: "Reading.", ToolUse: &fakeapi.ToolUse{Name: "Read",
					Input: map[string]any{"file_path": outside}}}, Times: 1},
				fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
					return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
				}},
			)
			code, out, _ := e.run(answer+"\n", "run", "--prompt", "read it", "--surface", "terminal")
			if code != 0 || !strings.Contains(out, "Allow Read to run this?") {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			final := e.onlyRun().FinalText
			if allowed := answer == "Allow once"; strings.Contains(final, "outside-content") != allowed {
				t.Errorf("answer %q: the model saw %q", answer, final)
			}
			if answer != "Allow once" && !strings.Contains(final, "private") {
				t.Errorf("the model was not told the reason: %q", final)
			}
		})
	}
}

// TestApprovalSlowerThanIdleTimeout: idle_timeout means what it says (it is
// not raised to the approval's hold), and a person who takes longer than it
// to allow a call does not get the turn killed: the runner holds the CLI's
// idle clock while it asks. The command runs once.
func TestApprovalSlowerThanIdleTimeout(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t, approvalRules("touch "+madeFile)...)
	// idle_timeout leaves the CLI time to start on a loaded machine; the
	// person takes more than twice as long.
	e.base = strings.Replace(e.base, "  timeout: 2m\n", "  timeout: 2m\n  idle_timeout: 8s\n  allowed_tools: []\n", 1)
	e.writeConfig("\napprovals:\n  approval_hold: 2m\n")
	cmd := e.child("", "", "run", "--prompt", "make the file", "--surface", "terminal")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.Close() })
	cmd.Stdin = pr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st := e.store()
	waitFor(t, "the approval", func() bool {
		sets, _ := st.QuestionSets(context.Background(), store.SetFilter{State: []store.SetState{store.SetPending}})
		return len(sets) == 1
	})
	time.Sleep(20 * time.Second) // the person reads the call: longer than idle_timeout
	if _, err := pw.Write([]byte("Allow once\n")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !e.made() || e.toolResults() != 1 {
		t.Errorf("made %v, tool results %d; want the command run once", e.made(), e.toolResults())
	}
	if run := e.onlyRun(); run.Status != store.RunDone {
		t.Errorf("run %s: %s", run.Status, run.Error)
	}
}

// TestIdleTimeoutNotRaisedByApprovals: with approvals on, a CLI silent for
// longer than idle_timeout while nobody is asked (a tool call the policy
// allows that runs long) is stopped at idle_timeout, not at the approval
// hold plus a minute.
func TestIdleTimeoutNotRaisedByApprovals(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	e := newE2E(t, approvalRules("timeout 90 tail -f /dev/null")...)
	e.base = strings.Replace(e.base, "  timeout: 2m\n", "  timeout: 2m\n  idle_timeout: 8s\n  allowed_tools: []\n", 1)
	e.writeConfig("\napprovals:\n  approval_hold: 2m\n  allow: [Bash]\n")
	code, _, _ := e.run("", "run", "--prompt", "make the file", "--surface", "terminal")
	if code == 0 {
		t.Fatal("the run succeeded: the 90 s silence was not stopped by idle_timeout: 8s")
	}
	run := e.onlyRun()
	if !strings.Contains(run.Error, "no output from the agent CLI for 8s") {
		t.Errorf("run %s: error %q, want the idle timeout", run.Status, run.Error)
	}
}
