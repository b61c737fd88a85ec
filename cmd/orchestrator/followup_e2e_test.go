package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/delivery"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// feedbackRule matches the prompt that carries a follow-up (runner's
// followUpPrompt).
const feedbackRule = "BEGIN FEEDBACK"

// followUpRules: deliveryRules, and feedback makes the model write
// auth_test.txt with Bash (its reply streamed slowly when delay is set),
// then end with "Added a test."; a "continue" after an interruption
// writes it too.
func followUpRules(delay time.Duration) []fakeapi.Rule {
	writeTest := fakeapi.Reply{Text: "Adding a test.", ChunkDelay: delay, Chunks: 4, ToolUse: &fakeapi.ToolUse{Name: "Bash", Input: map[string]any{
		"command": "echo ok > auth_test.txt && echo wrote-test-file", "description": "Write auth_test.txt"}}}
	return append(deliveryRules(),
		fakeapi.Rule{When: feedbackRule, Reply: writeTest},
		fakeapi.Rule{When: "from where you left off", Reply: writeTest},
		fakeapi.Rule{When: "wrote-test-file", Reply: fakeapi.Reply{Text: "Added a test."}},
	)
}

// feedbackRequests counts the requests whose last user message carried
// the feedback: the model must get it exactly once.
func (e *e2e) feedbackRequests() []fakeapi.Request {
	var out []fakeapi.Request
	for _, r := range e.fake.Requests() {
		if strings.Contains(r.LastUserText, feedbackRule) {
			out = append(out, r)
		}
	}
	return out
}

// wantFollowedUp: the run is done again; its branch on origin has a
// second commit with the model's test on top of the first; one pull
// request, whose body's decision log lists the feedback.
func (g *gitE2E) wantFollowedUp(t *testing.T, runID, feedback string) {
	t.Helper()
	st := g.store()
	run, err := st.Run(context.Background(), runID)
	if err != nil || run.Status != store.RunDone || run.FinalText != "Added a test." {
		t.Fatalf("run = %s %q %q, %v", run.Status, run.FinalText, run.Error, err)
	}
	dl, _, _ := st.Delivery(context.Background(), runID)
	if got := gitCmd(t, g.origin, "show", dl.Branch+":auth_test.txt"); got != "ok" {
		t.Errorf("auth_test.txt on origin's %s = %q", dl.Branch, got)
	}
	if got := gitCmd(t, g.origin, "show", dl.Branch+":auth.txt"); got != "JWT" {
		t.Errorf("auth.txt on origin's %s = %q", dl.Branch, got)
	}
	if n := gitCmd(t, g.origin, "rev-list", "--count", "main.."+dl.Branch); n != "2" {
		t.Errorf("%s commits on the branch over main, want 2 (the first delivery's, then the follow-up's)", n)
	}
	var mine int
	for _, p := range g.gh.Pulls(deliveryRepo) {
		if p.Head == dl.Branch {
			mine++
			for _, want := range []string{delivery.FollowUpQuestion, feedback, "Added a test."} {
				if !strings.Contains(p.Body, want) {
					t.Errorf("PR body lacks %q:\n%s", want, p.Body)
				}
			}
		}
	}
	if mine != 1 {
		t.Errorf("%d pull requests for %s, want the one", mine, dl.Branch)
	}
	fus, _ := st.FollowUps(context.Background(), runID)
	if len(fus) != 1 || fus[0].Turn == 0 {
		t.Errorf("follow-ups = %+v, want one handed over", fus)
	}
}

// TestFollowUpAddsACommitToTheSamePR: `followup RUN TEXT` on a delivered
// run resumes the same CLI session (the request carries the first turns'
// history and the feedback), the worktree is added again from the branch,
// the new work is a second commit on the same branch and pull request,
// whose decision log shows the feedback; the same key again does nothing.
func TestFollowUpAddsACommitToTheSamePR(t *testing.T) {
	t.Parallel()
	g := newGitE2EWith(t, followUpRules(0)...)
	spec := g.presetSpec("deps", "Implement spec X", "")
	if code, _, _ := g.run("", "run", spec); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	run := g.onlyRun()
	g.wantDelivered(t, run)
	const feedback = "please also add a test"
	if code, _, _ := g.run("", "followup", "--key", "k1", run.ID, feedback); code != 0 {
		t.Fatalf("followup: exit %d", code)
	}
	g.wantFollowedUp(t, run.ID, feedback)
	fed := g.feedbackRequests()
	if len(fed) != 1 {
		t.Fatalf("the feedback reached the model %d times, want 1", len(fed))
	}
	var history strings.Builder
	for _, m := range fed[0].Messages {
		for _, b := range m.Content {
			history.WriteString(b.Text)
		}
	}
	if h := history.String(); !strings.Contains(h, "Implement spec X") || !strings.Contains(h, "Writing the auth setting.") {
		t.Errorf("the feedback's request lacks the first turns' history:\n%s", h)
	}
	n := len(g.fake.Requests())
	code, out, _ := g.run("", "followup", "--key", "k1", run.ID, feedback)
	if code != 0 || !strings.Contains(out, "already given") || len(g.fake.Requests()) != n {
		t.Fatalf("the same feedback again: exit %d, %q, %d new requests", code, out, len(g.fake.Requests())-n)
	}
	_, out, _ = g.run("", "show", run.ID)
	if !strings.Contains(out, "follow-ups:") || !strings.Contains(out, feedback) {
		t.Errorf("show lacks the follow-up:\n%s", out)
	}
}

// TestFollowUpKilledMidTurnReachesTheModelOnce: the process is killed
// (SIGKILL) once the feedback reached the model; resume continues the
// session instead of sending it again, and delivers the work.
func TestFollowUpKilledMidTurnReachesTheModelOnce(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	g := newGitE2EWith(t, followUpRules(time.Second)...)
	spec := g.presetSpec("deps", "Implement spec X", "")
	if code, _, _ := g.run("", "run", spec); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	run := g.onlyRun()
	before := len(g.fake.Requests())
	cmd := g.child("", "", "followup", run.ID, "please also add a test")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := g.fake.WaitRequests(ctx, before+1); err != nil {
		cmd.Process.Kill()
		t.Fatalf("the feedback never reached the model: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	wantKilled(t, cmd.Wait())
	if err := g.child("", "", "resume", run.ID).Run(); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if n := len(g.feedbackRequests()); n != 1 {
		t.Fatalf("the feedback reached the model %d times, want exactly 1", n)
	}
	g.wantFollowedUp(t, run.ID, "please also add a test")
}

// TestFollowUpKilledAfterTheClaim: the process is killed (SIGKILL) once the
// follow-up turn claimed the feedback, before the CLI started; resume
// finds the prompt never reached the session, gives the feedback back and
// sends it, once.
func TestFollowUpKilledAfterTheClaim(t *testing.T) {
	clitest.Claude(t)
	t.Parallel()
	g := newGitE2EWith(t, followUpRules(0)...)
	spec := g.presetSpec("deps", "Implement spec X", "")
	if code, _, _ := g.run("", "run", spec); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	run := g.onlyRun()
	wantKilled(t, g.child("", "followup-claimed", "followup", run.ID, "please also add a test").Run())
	if n := len(g.feedbackRequests()); n != 0 {
		t.Fatalf("the feedback reached the model %d times before the kill, want 0", n)
	}
	if err := g.child("", "", "resume", run.ID).Run(); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if n := len(g.feedbackRequests()); n != 1 {
		t.Fatalf("the feedback reached the model %d times, want exactly 1", n)
	}
	g.wantFollowedUp(t, run.ID, "please also add a test")
}
