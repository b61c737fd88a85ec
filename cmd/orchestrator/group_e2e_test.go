package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// groupRules are standardRules plus a run that asks another question.
func groupRules() []fakeapi.Rule {
	return append(standardRules(0), fakeapi.Rule{When: "Implement spec Y", Reply: fakeapi.Reply{Text: "One more thing.\n" +
		`<!--QUESTION:{"questions":[{"question":"Which database?","options":[{"label":"SQLite"},{"label":"PostgreSQL"}]}]}-->`}})
}

// groupSpecs writes the specs nightly-a and nightly-b (the same question)
// and other (another question) into dir.
func groupSpecs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, prompt := range map[string]string{"nightly-a": "Implement spec X", "nightly-b": "Implement spec X", "other": "Implement spec Y"} {
		body := fmt.Sprintf("---\nname: %s\nsurfaces: [terminal]\n---\n%s\n", name, prompt)
		if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// sharedLine is show's line about a shared decision covering run other.
func sharedLine(other, spec string) *regexp.Regexp {
	return regexp.MustCompile(`shared decision g[0-9a-f]{11} by \S.* on cli, also answered in run ` + regexp.QuoteMeta(other) + ` of spec ` + regexp.QuoteMeta(spec))
}

// TestAnswerAllResumesEveryRunOnce: with the real CLI, two runs of two
// specs wait on the same question (a third on another). `answer QID 2
// --all` answers both in one go, not the third; each run resumes exactly
// once with the answer, and both decision logs (show, show --json) name
// the shared decision and the other run it covered.
func TestAnswerAllResumesEveryRunOnce(t *testing.T) {
	t.Parallel()
	e := newE2E(t, groupRules()...)
	specs := filepath.Join(e.dir, "specs")
	groupSpecs(t, specs)
	e.writeConfig(fmt.Sprintf("\nspecs:\n  dir: %q\n", specs))
	outs := map[string]string{}
	for _, name := range []string{"nightly-a", "nightly-b", "other"} {
		code, out, _ := e.run("", "run", name)
		if code != exitWaiting {
			t.Fatalf("run %s: exit %d, want %d (waiting)", name, code, exitWaiting)
		}
		outs[name] = out
	}
	a, b, other := e.onlyRunOf("nightly-a"), e.onlyRunOf("nightly-b"), e.onlyRunOf("other")
	// The terminal of the second run says the question waits in the first.
	if want := "This question also waits in 1 other run: nightly-a (run " + a.ID + ")."; !strings.Contains(outs["nightly-b"], want) ||
		!strings.Contains(outs["nightly-b"], "ANSWER --all") {
		t.Errorf("the second run's terminal lacks %q:\n%s", want, outs["nightly-b"])
	}
	if strings.Contains(outs["other"], "also waits") {
		t.Errorf("the run asking another question says it waits elsewhere:\n%s", outs["other"])
	}
	ctx := context.Background()
	st := e.store()
	sets, err := st.OpenSets(ctx, a.ID)
	if err != nil || len(sets) != 1 {
		t.Fatalf("open sets of %s: %+v, %v", a.ID, sets, err)
	}
	qid := sets[0].Set.Questions[0].ID

	code, out, _ := e.run("", "answer", qid, "2", "--all")
	if code != 0 {
		t.Fatalf("answer --all: exit %d", code)
	}
	for _, want := range []string{"answered: question set " + sets[0].Set.ID + " of run " + a.ID + " (spec nightly-a)",
		"of run " + b.ID + " (spec nightly-b)", "answered 2 run(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("answer --all says\n%s\nwant %q", out, want)
		}
	}
	if strings.Contains(out, other.ID) {
		t.Errorf("answer --all touched the run asking another question:\n%s", out)
	}
	for _, r := range []store.Run{a, b} {
		code, out, _ := e.run("", "resume", r.ID)
		if code != 0 || !strings.Contains(out, "Implemented with JWT.") {
			t.Fatalf("resume %s: exit %d", r.ID, code)
		}
	}
	if n := e.answerRequests(); n != 2 {
		t.Fatalf("the answer reached the model %d times, want 2 (once per run)", n)
	}
	// A second resume carries nothing more.
	for _, r := range []store.Run{a, b} {
		e.run("", "resume", r.ID)
	}
	if n := e.answerRequests(); n != 2 {
		t.Fatalf("after resuming again the answer reached the model %d times, want 2", n)
	}
	if r, err := st.Run(ctx, other.ID); err != nil || r.Status != store.RunWaiting {
		t.Errorf("the other run: %s, %v; want it still waiting", r.Status, err)
	}
	for _, c := range []struct {
		run, other store.Run
	}{{a, b}, {b, a}} {
		code, out, _ := e.run("", "show", c.run.ID)
		if code != 0 || !sharedLine(c.other.ID, c.other.Spec).MatchString(out) {
			t.Errorf("show %s (exit %d) does not name the shared decision covering %s:\n%s", c.run.ID, code, c.other.ID, out)
		}
		code, out, _ = e.run("", "show", c.run.ID, "--json")
		var show showOutput
		if code != 0 || json.Unmarshal([]byte(out), &show) != nil || len(show.Decisions) != 1 || len(show.Decisions[0].Shared) != 1 ||
			len(show.Decisions[0].Shared[0].Runs) != 1 || show.Decisions[0].Shared[0].Runs[0].RunID != c.other.ID {
			t.Errorf("show %s --json: exit %d, decisions %+v", c.run.ID, code, show.Decisions)
		}
	}
}

// TestClusterAnswerAllOnPostgres: two serve instances on one PostgreSQL
// database take two queued runs of two specs that ask the same question.
// `answer QID 2 --all` from a third process answers both; each run resumes
// exactly once, on some instance, and both decision logs name the shared
// decision.
func TestClusterAnswerAllOnPostgres(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "", groupRules()...)
	groupSpecs(t, c.specs)
	for _, in := range c.nodes {
		c.start(in)
	}
	ids := map[string]string{}
	for _, name := range []string{"nightly-a", "nightly-b", "other"} {
		ids[name] = strings.TrimSpace(c.command("submit", name))
	}
	st := c.store()
	ctx := context.Background()
	var first store.SetRecord
	waitFor(t, "the three runs' questions pending", func() bool {
		sets, _ := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
		for _, s := range sets {
			if s.Set.RunID == ids["nightly-a"] {
				first = s
			}
		}
		return len(sets) == 3
	})
	out := c.command("answer", first.Set.Questions[0].ID, "2", "--all")
	if !strings.Contains(out, "answered 2 run(s)") || !strings.Contains(out, ids["nightly-b"]) || strings.Contains(out, ids["other"]) {
		t.Fatalf("answer --all says:\n%s", out)
	}
	for _, name := range []string{"nightly-a", "nightly-b"} {
		waitFor(t, name+" done", func() bool {
			r, err := st.Run(ctx, ids[name])
			return err == nil && r.Status == store.RunDone
		})
	}
	if n := c.e.answerRequests(); n != 2 {
		t.Fatalf("the answer reached the model %d times, want 2 (once per run)", n)
	}
	if r, err := st.Run(ctx, ids["other"]); err != nil || r.Status != store.RunWaiting {
		t.Errorf("the other run: %s, %v; want it still waiting", r.Status, err)
	}
	for run, other := range map[string]string{"nightly-a": "nightly-b", "nightly-b": "nightly-a"} {
		out := c.command("show", ids[run])
		if !sharedLine(ids[other], other).MatchString(out) {
			t.Errorf("show %s does not name the shared decision covering %s:\n%s", ids[run], ids[other], out)
		}
	}
}

// TestAnswerAllApprovals: two runs park on the approval of the same tool
// call (Bash, the same command), with the real CLI. `answer QID "Allow
// once" --all` allows both; each run's resume runs the command exactly
// once (one tool result each), and the hook takes each decision once.
func TestAnswerAllApprovals(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		fakeapi.Rule{When: "make the file", Reply: fakeapi.Reply{Text: "Making it.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": "touch " + madeFile, "description": "Create the marker file"}}}, Times: 2},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}})
	var runs []store.Run
	for i := 0; i < 2; i++ {
		if code, _, _ := e.run("", "run", "--prompt", "make the file", "--surface", "terminal"); code != exitWaiting {
			t.Fatalf("run %d: exit %d, want %d (waiting on the approval)", i, code, exitWaiting)
		}
	}
	ctx := context.Background()
	st := e.store()
	runs, err := st.ListRuns(ctx, store.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	sets, err := st.OpenSets(ctx, runs[0].ID)
	if err != nil || len(sets) != 1 || sets[0].Set.Kind != "approval" {
		t.Fatalf("open sets of %s: %+v, %v; want one approval", runs[0].ID, sets, err)
	}
	code, out, _ := e.run("", "answer", sets[0].Set.Questions[0].ID, "Allow once", "--all")
	if code != 0 || !strings.Contains(out, "answered 2 run(s)") {
		t.Fatalf("answer --all: exit %d\n%s", code, out)
	}
	if e.made() {
		t.Fatal("the command ran before a run resumed")
	}
	for _, r := range runs {
		if code, out, _ := e.run("", "resume", r.ID); code != 0 || !strings.Contains(out, "SAW") {
			t.Fatalf("resume %s: exit %d", r.ID, code)
		}
	}
	if !e.made() || e.toolResults() != 2 {
		t.Errorf("the command ran: %v; tool results %d, want 2 (once per run)", e.made(), e.toolResults())
	}
	for _, r := range runs {
		calls, err := st.ToolCalls(ctx, r.ID)
		if err != nil || len(calls) != 1 || calls[0].Decision != store.DecisionAllow || calls[0].UsedAt.IsZero() {
			t.Errorf("tool calls of %s: %+v, %v; want one allowed and used", r.ID, calls, err)
		}
	}
}
