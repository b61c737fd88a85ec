package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Remembered decisions with the real CLI (issue 28): an answer kept with
// `answer --remember spec:7d` answers the spec's next run at once, asking
// nobody; `rules revoke` ends it; an expired rule answers nothing; an
// approval kept as a grant never allows what the policy denies.

var ruleIDRE = regexp.MustCompile(`remembered as rule (r[0-9a-f]+)`)

// specFile writes a spec in the test's directory and returns its path.
func (e *e2e) specFile(name, body string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name+".md")
	text := fmt.Sprintf("---\nname: %s\nworkdir: %q\nsurfaces: [terminal]\n---\n%s\n", name, filepath.Join(e.dir, "work"), body)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// newestRun returns the spec's newest run.
func (e *e2e) newestRun(spec string) store.Run {
	e.t.Helper()
	runs, err := e.store().ListRuns(context.Background(), store.RunFilter{Spec: spec})
	if err != nil || len(runs) == 0 {
		e.t.Fatalf("runs of %s: %+v, %v", spec, runs, err)
	}
	newest := runs[0]
	for _, r := range runs {
		if r.CreatedAt.After(newest.CreatedAt) {
			newest = r
		}
	}
	return newest
}

func (e *e2e) setsOf(runID string) []store.SetRecord {
	e.t.Helper()
	sets, err := e.store().QuestionSets(context.Background(), store.SetFilter{RunID: runID})
	if err != nil {
		e.t.Fatal(err)
	}
	return sets
}

// expireRule moves a rule's expiry into the past, as time would.
func (e *e2e) expireRule(id string) {
	e.t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(e.state, store.FileName))
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	if res, err := db.Exec(`UPDATE rules SET expires_at = 1 WHERE id = ?`, id); err != nil {
		e.t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		e.t.Fatalf("no rule %s to expire", id)
	}
}

// rememberedAnswer runs the spec, which parks on its question, answers it
// with 2 (JWT) kept as a rule for the spec, resumes it, and returns the
// rule's ID.
func (e *e2e) rememberedAnswer(t *testing.T, spec string) string {
	t.Helper()
	if code, _, _ := e.run("", "run", spec); code != exitWaiting {
		t.Fatalf("the first run: exit %d, want %d (waiting)", code, exitWaiting)
	}
	run := e.newestRun("nightly")
	sets := e.setsOf(run.ID)
	if len(sets) != 1 || sets[0].State != store.SetPending {
		t.Fatalf("sets = %+v", sets)
	}
	code, out, _ := e.run("", "answer", sets[0].Set.Questions[0].ID, "2", "--remember", "spec:7d")
	m := ruleIDRE.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("answer --remember: exit %d:\n%s", code, out)
	}
	if code, _, _ := e.run("", "resume", run.ID); code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	return m[1]
}

func TestRememberedAnswerE2E(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	spec := e.specFile("nightly", "Implement spec X")
	rule := e.rememberedAnswer(t, spec)
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("the first run's answer reached the model %d times", n)
	}
	first := e.newestRun("nightly")

	// The next run asks nothing: the terminal's input is closed, so a
	// question would park it (exit 3).
	code, out, _ := e.run("", "run", spec)
	if code != 0 || strings.Contains(out, "Which auth method?") || !strings.Contains(out, "answered by rule "+rule) {
		t.Fatalf("the second run asked: exit %d:\n%s", code, out)
	}
	second := e.newestRun("nightly")
	if second.ID == first.ID || second.Status != store.RunDone || !strings.Contains(second.FinalText, "Implemented with JWT") {
		t.Fatalf("second run %s %s %q", second.ID, second.Status, second.FinalText)
	}
	if n := e.answerRequests(); n != 2 {
		t.Errorf("the remembered answer reached the model %d times, want once", n-1)
	}
	sets := e.setsOf(second.ID)
	provenance := "rule " + rule + ", made by " + whoami() + " on "
	if len(sets) != 1 || sets[0].Response.Surface != store.RuleSurface || !strings.HasPrefix(sets[0].Response.By, provenance) ||
		!strings.Contains(sets[0].Response.By, "from run "+first.ID+", expires ") {
		t.Fatalf("the set was not answered by the rule: %+v", sets)
	}
	code, out, _ = e.run("", "show", second.ID)
	if code != 0 || !strings.Contains(out, "answered by "+provenance) {
		t.Errorf("show does not name the rule:\n%s", out)
	}
	code, out, _ = e.run("", "rules", "list", "--json")
	var rep rulesReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Rules) != 1 || rep.Rules[0].ID != rule || rep.Rules[0].Uses != 1 ||
		rep.Rules[0].Scope != "spec" || rep.Rules[0].ScopeValue != "nightly" || !rep.Rules[0].Active || rep.V != 1 {
		t.Errorf("rules list --json:\n%s", out)
	}
	if code, out, _ := e.run("", "rules", "show", rule); code != 0 || !strings.Contains(out, second.ID) {
		t.Errorf("rules show does not list the use:\n%s", out)
	}

	// Revoked, the rule answers nothing: the third run asks again.
	if code, _, _ := e.run("", "rules", "revoke", rule); code != 0 {
		t.Fatalf("revoke: exit %d", code)
	}
	if code, _, _ := e.run("", "run", spec); code != exitWaiting {
		t.Fatalf("the run after the revoke: exit %d, want %d (asked again)", code, exitWaiting)
	}
	third := e.newestRun("nightly")
	if sets := e.setsOf(third.ID); len(sets) != 1 || sets[0].State != store.SetPending {
		t.Fatalf("the run after the revoke: %+v", sets)
	}

	// A rule past its expiry answers nothing either.
	code, out, _ = e.run("", "answer", e.setsOf(third.ID)[0].Set.Questions[0].ID, "1", "--remember", "spec:7d")
	m := ruleIDRE.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("answer --remember: exit %d:\n%s", code, out)
	}
	if code, _, _ := e.run("", "resume", third.ID); code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	e.expireRule(m[1])
	if code, _, _ := e.run("", "run", spec); code != exitWaiting {
		t.Fatalf("the run after the expiry: exit %d, want %d (asked again)", code, exitWaiting)
	}
	if n := e.answerRequests(); n != 3 {
		t.Errorf("answers reached the model %d times, want 3", n)
	}
}

// grantRules: "make the file" calls Bash touch until the tool's result (or
// refusal) comes back, which is echoed as the final text.
func grantRules() []fakeapi.Rule {
	return []fakeapi.Rule{{Respond: func(r fakeapi.Request) fakeapi.Reply {
		if len(r.ToolResults) > 0 {
			return fakeapi.Reply{Text: "SAW " + strings.Join(r.ToolResults, " | ")}
		}
		if strings.Contains(r.LastUserText, "make the file") {
			return fakeapi.Reply{Text: "Making it.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
				Input: map[string]any{"command": "touch " + madeFile, "description": "Create the marker file"}}}
		}
		return fakeapi.Reply{Text: "Done."}
	}}}
}

func TestRememberedApprovalE2E(t *testing.T) {
	t.Parallel()
	e := newE2E(t, grantRules()...)
	spec := e.specFile("make", "make the file")
	if code, _, _ := e.run("", "run", spec); code != exitWaiting || e.made() {
		t.Fatalf("the first run: exit %d, made %v", code, e.made())
	}
	run := e.newestRun("make")
	sets := e.setsOf(run.ID)
	if len(sets) != 1 {
		t.Fatalf("sets = %+v", sets)
	}
	qid := sets[0].Set.Questions[0].ID
	if code, _, _ := e.run("", "answer", qid, "Allow once", "--remember", "spec:7d", "--rule", "Bash(rm:*)"); code == 0 {
		t.Error("a grant that does not allow the call was kept")
	}
	if sets := e.setsOf(run.ID); sets[0].State != store.SetPending {
		t.Fatalf("a refused --rule answered the approval: %+v", sets[0])
	}
	code, out, _ := e.run("", "answer", qid, "Allow once", "--remember", "spec:7d", "--rule", "Bash(touch:*)")
	m := ruleIDRE.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "Bash(touch:*)") {
		t.Fatalf("answer --remember --rule: exit %d:\n%s", code, out)
	}
	rule := m[1]
	st := e.store()
	if code, _, _ := e.run("", "resume", run.ID); code != 0 || !e.made() {
		t.Fatalf("resume: exit %d, made %v", code, e.made())
	}
	if err := os.Remove(filepath.Join(e.dir, "work", madeFile)); err != nil {
		t.Fatal(err)
	}

	// The grant allows the next run's call at once.
	code, out, _ = e.run("", "run", spec)
	if code != 0 || !e.made() || strings.Contains(out, "Allow once") {
		t.Fatalf("the second run: exit %d, made %v:\n%s", code, e.made(), out)
	}
	second := e.newestRun("make")
	calls, err := st.ToolCalls(context.Background(), second.ID)
	if err != nil || len(calls) != 1 || !strings.Contains(calls[0].DecidedBy, "rule "+rule) {
		t.Fatalf("tool calls = %+v, %v", calls, err)
	}
	if err := os.Remove(filepath.Join(e.dir, "work", madeFile)); err != nil {
		t.Fatal(err)
	}

	// Never past the policy: with touch denied the call is refused.
	e.writeConfig("\napprovals:\n  deny: [\"Bash(touch:*)\"]\n")
	code, out, _ = e.run("", "run", spec)
	if code != 0 || e.made() {
		t.Fatalf("the denied run: exit %d, made %v:\n%s", code, e.made(), out)
	}
	if uses, err := st.RuleUses(context.Background(), rule, ""); err != nil || len(uses) != 1 {
		t.Errorf("uses = %+v, %v", uses, err)
	}
}

// TestClusterRememberedAnswer: the same on PostgreSQL, two instances
// serving: an answer kept from a third process answers the spec's next
// run (on whichever instance takes it) without a question, the model gets
// it once; revoked, the next run asks again.
func TestClusterRememberedAnswer(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "", standardRules(0)...)
	c.writeSpec("nightly", "---\nname: nightly\nsurfaces: [terminal]\n---\nImplement spec X\n")
	for _, in := range c.nodes {
		c.start(in)
	}
	st := c.store()
	ctx := context.Background()
	pending := func(runID string) store.SetRecord {
		var set store.SetRecord
		waitFor(t, "run "+runID+"'s question pending", func() bool {
			sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID, State: []store.SetState{store.SetPending}})
			if len(sets) == 1 {
				set = sets[0]
			}
			return len(sets) == 1
		})
		return set
	}
	done := func(runID string) {
		waitFor(t, "run "+runID+" done", func() bool {
			r, err := st.Run(ctx, runID)
			return err == nil && r.Status == store.RunDone
		})
	}
	first := strings.TrimSpace(c.command("submit", "nightly"))
	set := pending(first)
	m := ruleIDRE.FindStringSubmatch(c.command("answer", set.Set.Questions[0].ID, "2", "--remember", "spec:7d"))
	if m == nil {
		t.Fatal("answer --remember kept no rule")
	}
	rule := m[1]
	done(first)

	second := strings.TrimSpace(c.command("submit", "nightly"))
	done(second)
	sets, err := st.QuestionSets(ctx, store.SetFilter{RunID: second})
	if err != nil || len(sets) != 1 || sets[0].Response.Surface != store.RuleSurface || !strings.HasPrefix(sets[0].Response.By, "rule "+rule+", made by ") {
		t.Fatalf("the second run's set: %+v, %v", sets, err)
	}
	if r, _ := st.Run(ctx, second); !strings.Contains(r.FinalText, "Implemented with JWT") {
		t.Errorf("the second run's model did not get the remembered answer: %q", r.FinalText)
	}
	if n := c.e.answerRequests(); n != 2 {
		t.Errorf("answers reached the model %d times, want 2 (one per run)", n)
	}
	if uses, err := st.RuleUses(ctx, rule, ""); err != nil || len(uses) != 1 || uses[0].RunID != second {
		t.Errorf("uses = %+v, %v", uses, err)
	}

	c.command("rules", "revoke", rule)
	third := strings.TrimSpace(c.command("submit", "nightly"))
	pending(third)
}

// TestRememberOnGitHubE2E: "/answer QID 2 --remember spec:7d" in a comment
// answers and keeps the rule (the reply says so); the spec's next run posts
// no question on GitHub and its model gets the remembered answer once.
func TestRememberOnGitHubE2E(t *testing.T) {
	t.Parallel()
	e, gh, repo, issue := githubE2E(t, "")
	spec := filepath.Join(e.dir, "nightly.md")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf("---\nname: nightly\nworkdir: %q\nsurfaces: [github]\n---\nImplement spec X\n", filepath.Join(e.dir, "work"))), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		code, _, _ := e.run("", "run", spec)
		done <- code
	}()
	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	qid := regexp.MustCompile("`/answer (q[0-9a-f]+) ").FindStringSubmatch(q.Body)
	if qid == nil {
		t.Fatalf("no question ID in the question comment:\n%s", q.Body)
	}
	gh.AddComment(repo, issue, "alice", "/answer "+qid[1]+" 2 --remember spec:7d")
	if code := <-done; code != 0 {
		t.Fatalf("the first run: exit %d", code)
	}
	gh.WaitFor(t, 20*time.Second, "the reply naming the rule", func() bool {
		for _, c := range gh.Comments(repo, issue) {
			if strings.Contains(c.Body, "@alice kept as rule r") && strings.Contains(c.Body, "for spec nightly") {
				return true
			}
		}
		return false
	})
	rules, err := e.store().Rules(context.Background(), store.RuleFilter{})
	if err != nil || len(rules) != 1 || rules[0].MadeBy != "@alice" || rules[0].Surface != "github" {
		t.Fatalf("rules = %+v, %v", rules, err)
	}

	code, out, _ := e.run("", "run", spec)
	if code != 0 || !strings.Contains(out, "Implemented with JWT") {
		t.Fatalf("the second run: exit %d:\n%s", code, out)
	}
	if n := len(gh.Questions(repo)); n != 1 {
		t.Errorf("%d questions posted on GitHub, want 1 (the second run asks nothing)", n)
	}
	if n := e.answerRequests(); n != 2 {
		t.Errorf("answers reached the model %d times, want 2", n)
	}
}
