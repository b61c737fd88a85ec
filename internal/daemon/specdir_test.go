package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write then rename, as editors save: the rescan never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestSpecsFolderFollowedWhileServing starts a daemon without a specs
// folder, then: the folder appears with a spec that ticks every second; the
// spec is edited to be invalid (reported in the log, /healthz and
// orchestrator_spec_problems, and its last good version keeps ticking);
// fixed with a new body (the next run has it); removed (no more runs).
func TestSpecsFolderFollowedWhileServing(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "specs")
	f := newFakeRuns(st, store.RunRunning)
	logs := newLogRecorder()
	texts := make(chan string, 100)
	d, err := New(Config{
		SpecsDir:    dir,
		RescanEvery: 50 * time.Millisecond,
		CheckSpec: func(sp specs.Spec) error {
			if sp.Name == "refused" {
				return errors.New("refused by the configuration")
			}
			return nil
		},
		Runs:  f,
		Store: st,
		NewRun: func(sp specs.Spec, text []byte) (runner.NewRun, error) {
			texts <- string(text)
			return runner.NewRun{Prompt: sp.Body}, nil
		},
		Listen: "127.0.0.1:0",
		Logger: slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)
	defer s.stop(t)
	logs.waitFor(t, "no specs folder: serving questions", 1)
	if code, h := health(t, d); code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("healthz without a specs folder = %d %+v", code, h)
	}

	drive := func(want string) {
		t.Helper()
		c := f.next(t)
		run, err := st.Run(context.Background(), c.runID)
		if err != nil {
			t.Fatal(err)
		}
		c.finish <- store.RunDone
		<-c.returned
		if run.Prompt != want || run.Spec != "nightly" {
			t.Fatalf("run %s has spec %q and prompt %q, want nightly and %q", run.ID, run.Spec, run.Prompt, want)
		}
	}

	good := "---\nname: nightly\nschedule: \"@every 1s\"\n---\nv1\n"
	writeFile(t, filepath.Join(dir, "nightly.md"), good)
	logs.waitFor(t, "spec added", 1)
	drive("v1")
	if text := <-texts; text != good {
		t.Errorf("NewRun got the text %q, want the file's", text)
	}

	// Edited to be invalid: reported, and the last good version ticks on.
	writeFile(t, filepath.Join(dir, "nightly.md"), "---\nname: nightly\nschedul: \"@every 1s\"\n---\nv2\n")
	logs.waitFor(t, "spec file does not validate: its last good version stays scheduled", 1)
	code, h := health(t, d)
	if code != http.StatusOK || h.Status != "degraded" || len(h.SpecProblems) != 1 {
		t.Fatalf("healthz with an invalid spec = %d %+v", code, h)
	}
	if p := h.SpecProblems[0]; !strings.HasSuffix(p.File, "nightly.md") || !p.Kept || !strings.Contains(p.Error, "nightly.md:3: schedul") {
		t.Errorf("spec problem = %+v", p)
	}
	if v := value(scrape(t, d), "orchestrator_spec_problems"); v != 1 {
		t.Errorf("orchestrator_spec_problems = %v, want 1", v)
	}
	drive("v1")

	// A new file the configuration refuses: reported, not scheduled.
	writeFile(t, filepath.Join(dir, "refused.md"), "---\nschedule: \"@every 1s\"\n---\nR\n")
	logs.waitFor(t, "spec file does not validate: it is not scheduled", 1)
	if _, h := health(t, d); len(h.SpecProblems) != 2 || h.SpecProblems[1].Kept {
		t.Errorf("spec problems = %+v", h.SpecProblems)
	}
	os.Remove(filepath.Join(dir, "refused.md"))

	// Fixed, with a new body: the next run has it.
	writeFile(t, filepath.Join(dir, "nightly.md"), "---\nname: nightly\nschedule: \"@every 1s\"\n---\nv3\n")
	logs.waitFor(t, "spec file valid again", 1)
	for {
		c := f.next(t)
		run, _ := st.Run(context.Background(), c.runID)
		c.finish <- store.RunDone
		<-c.returned
		if run.Prompt == "v3" {
			break
		}
		if run.Prompt != "v1" {
			t.Fatalf("run with prompt %q", run.Prompt)
		}
	}
	if _, h := health(t, d); h.Status != "ok" || len(h.SpecProblems) != 0 {
		t.Errorf("healthz once fixed = %+v", h)
	}

	// Removed: no more runs (one already due may still start).
	os.Remove(filepath.Join(dir, "nightly.md"))
	logs.waitFor(t, "spec file removed", 1)
	deadline := time.After(2500 * time.Millisecond)
	late := 0
	for {
		select {
		case c := <-f.drives:
			c.finish <- store.RunDone
			if late++; late > 1 {
				t.Fatalf("%d runs after the spec was removed:\n%s", late, logs.dump())
			}
			continue
		case <-deadline:
		}
		break
	}
	if n := d.sched.Len(); n != 0 {
		t.Errorf("%d specs scheduled after removal", n)
	}
}

// TestSpecsFolderInvalidAtStart: at start a spec that does not validate is
// an error naming its file and line, as validate reports it.
func TestSpecsFolderInvalidAtStart(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.md"), "---\nschedul: \"@daily\"\n---\nT\n")
	_, err := New(Config{SpecsDir: dir, Runs: newFakeRuns(st, ""), Store: st, NewRun: specRun})
	if err == nil || !strings.Contains(err.Error(), "a.md:2: schedul") {
		t.Fatalf("New = %v, want the file's problem", err)
	}
}

// TestMetricsPerSpec: runs by outcome and cost are counted per spec from
// the runner's events; the last success and the pending questions per spec
// come from the store (any process, across restarts); a run of a prompt is
// under spec="".
func TestMetricsPerSpec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	newWaitingSpecRun(t, st, "w1", "nightly", "qa", "qb")
	newWaitingSpecRun(t, st, "w2", "", "qc")
	createRun(t, st, "d1", "nightly", store.RunDone)
	createRun(t, st, "f1", "weekly", store.RunFailed)
	d1, err := st.Run(ctx, "d1")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(st)
	// CostUSD is the session's total so far: the metric counts each turn's
	// own cost (TurnCostUSD), never the earlier turns again.
	m.Observe(runner.Event{Kind: runner.EventTurnFinished, RunID: "w1", Outcome: &executor.Outcome{CostUSD: 0.5, TurnCostUSD: 0.5}})
	m.Observe(runner.Event{Kind: runner.EventTurnFinished, RunID: "w1", Outcome: &executor.Outcome{CostUSD: 0.75, TurnCostUSD: 0.25}})
	m.Observe(runner.Event{Kind: runner.EventTurnFinished, RunID: "w2", Outcome: &executor.Outcome{CostUSD: 1, TurnCostUSD: 1}})
	m.Observe(runner.Event{Kind: runner.EventRunEnded, RunID: "d1", Run: &d1})
	m.Observe(runner.Event{Kind: runner.EventRunEnded, RunID: "f1", Run: &store.Run{ID: "f1", Spec: "weekly", Status: store.RunFailed}})
	m.Observe(runner.Event{Kind: runner.EventRunEnded, RunID: "p1", Run: &store.Run{ID: "p1", Status: store.RunCancelled}})

	gathered, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, f := range gathered {
		fams[f.GetName()] = f
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"orchestrator_spec_runs_total", []string{"spec", "nightly", "outcome", "done"}, 1},
		{"orchestrator_spec_runs_total", []string{"spec", "weekly", "outcome", "failed"}, 1},
		{"orchestrator_spec_runs_total", []string{"spec", "", "outcome", "cancelled"}, 1},
		{"orchestrator_spec_cost_usd_total", []string{"spec", "nightly"}, 0.75},
		{"orchestrator_spec_cost_usd_total", []string{"spec", ""}, 1},
		{"orchestrator_spec_questions_pending", []string{"spec", "nightly"}, 2},
		{"orchestrator_spec_questions_pending", []string{"spec", ""}, 1},
		{"orchestrator_spec_last_success_timestamp_seconds", []string{"spec", "nightly"}, float64(d1.UpdatedAt.UnixNano()) / 1e9},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, mt := range fams["orchestrator_spec_last_success_timestamp_seconds"].GetMetric() {
		if l := mt.GetLabel(); len(l) != 1 || l[0].GetValue() != "nightly" {
			t.Errorf("last success of %v: only nightly succeeded", l)
		}
	}
}

// newWaitingSpecRun stores a run of spec whose first turn asked a set of
// the given questions.
func newWaitingSpecRun(t *testing.T, st *store.Store, runID, spec string, qids ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateRun(ctx, store.Run{ID: runID, Spec: spec, Prompt: "do it", Surfaces: []string{"terminal"}}); err != nil {
		t.Fatal(err)
	}
	turn, err := st.BeginTurn(ctx, store.Turn{RunID: runID, Kind: store.TurnStart, Prompt: "do it", SessionID: "sess-1"})
	if err != nil {
		t.Fatal(err)
	}
	set := questions.Set{ID: runID + "-s1", RunID: runID, Turn: turn.Seq}
	for _, id := range qids {
		set.Questions = append(set.Questions, questions.Question{ID: id, Text: "Which " + id + "?",
			Options: []questions.Option{{Label: "A"}, {Label: "B"}}})
	}
	if err := st.FinishTurn(ctx, runID, turn.Seq, store.TurnResult{Status: "success", SessionID: "sess-1"}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
}

// TestSpecsFolderNameClash: a file edited to take the name of an earlier
// file keeps its last good version and is reported; renamed back, the
// problem is gone.
func TestSpecsFolderNameClash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.md"), "---\nname: alpha\n---\nA\n")
	writeFile(t, filepath.Join(dir, "b.md"), "---\nname: beta\n---\nB\n")
	w := newSpecDir(dir, nil, slog.New(slog.DiscardHandler))
	names := func(list []loadedSpec) string {
		var out []string
		for _, l := range list {
			out = append(out, l.spec.Name+"="+l.spec.Body)
		}
		return strings.Join(out, ",")
	}
	if list, changed := w.scan(); !changed || names(list) != "alpha=A,beta=B" || w.err() != nil {
		t.Fatalf("first scan = %s, %v, %v", names(list), changed, w.err())
	}
	writeFile(t, filepath.Join(dir, "b.md"), "---\nname: alpha\n---\nB2\n")
	list, changed := w.scan()
	if changed || names(list) != "alpha=A,beta=B" {
		t.Fatalf("scan with a clash = %s, changed %v; want the last good versions", names(list), changed)
	}
	if p := w.problems(); len(p) != 1 || !strings.Contains(p[0].Error, `b.md:2: name: spec name "alpha" is already used by`) || !p[0].Kept {
		t.Fatalf("problems = %+v", p)
	}
	writeFile(t, filepath.Join(dir, "b.md"), "---\nname: gamma\n---\nB3\n")
	if list, changed := w.scan(); !changed || names(list) != "alpha=A,gamma=B3" || len(w.problems()) != 0 || w.err() != nil {
		t.Fatalf("scan once renamed = %s, %v, %+v", names(list), changed, w.problems())
	}
}
