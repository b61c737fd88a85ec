package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestStatusListsTheNewestWithAndNMore: with 25 runs waiting, status
// counts them all but lists the newest 20 runs and question sets, and says
// how many more there are and how to see them; --limit, --spec, --kind,
// --waiting and --all change what is listed, --json has the counts and
// the more; a bad --limit or --kind is a usage error naming the flag.
func TestStatusListsTheNewestWithAndNMore(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	state := filepath.Join(tm.Dir, "state")
	tm.write(t, DefaultConfigFile, fmt.Sprintf("state_dir: %q\n", state))
	st := openTestStore(t, state)
	if err := st.SeedWaitingRuns(context.Background(), store.Seed{Prefix: "w", Runs: 25, Specs: []string{"nightly", "weekly"}}); err != nil {
		t.Fatal(err)
	}
	status := func(args ...string) (int, string, string) {
		t.Helper()
		tm.stdout.Reset()
		tm.stderr.Reset()
		code := tm.exec(append([]string{"status"}, args...)...)
		return code, tm.stdout.String(), tm.stderr.String()
	}
	report := func(args ...string) statusReport {
		t.Helper()
		code, out, errs := status(append([]string{"--json"}, args...)...)
		if code != 0 {
			t.Fatalf("status --json %v: exit %d: %s", args, code, errs)
		}
		var rep statusReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}

	code, out, _ := status()
	if code != 0 || !strings.Contains(out, "Runs: 25 waiting; question sets waiting for an answer: 25") ||
		!strings.Contains(out, "… and 5 more runs (orchestrator status --all, or --spec S, or --limit N)") ||
		!strings.Contains(out, "… and 5 more waiting question sets (orchestrator status --waiting --all, or --spec S)") ||
		!strings.Contains(out, "qw000024") || strings.Contains(out, "qw000004") || strings.Count(out, "Which database") != 20 {
		t.Errorf("status: exit %d:\n%s", code, out)
	}
	rep := report()
	if rep.Counts.Runs["waiting"] != 25 || rep.Counts.QuestionSets != 25 || len(rep.Runs) != 20 || len(rep.QuestionSets) != 20 ||
		rep.More.Runs != 5 || rep.More.QuestionSets != 5 || rep.QuestionSets[0].ID != "w000024-s1" || rep.Runs[0].ID != "w000024" {
		t.Errorf("status --json: counts %+v, more %+v, %d runs, %d sets", rep.Counts, rep.More, len(rep.Runs), len(rep.QuestionSets))
	}
	if rep := report("--limit", "3", "--spec", "weekly"); rep.Counts.QuestionSets != 12 || len(rep.QuestionSets) != 3 || rep.More.QuestionSets != 9 ||
		rep.More.Runs != 9 || rep.QuestionSets[0].ID != "w000023-s1" || rep.Counts.Runs["waiting"] != 12 {
		t.Errorf("status --limit 3 --spec weekly: counts %+v, more %+v, sets %d", rep.Counts, rep.More, len(rep.QuestionSets))
	}
	if rep := report("--waiting", "--all"); len(rep.QuestionSets) != 25 || rep.More.QuestionSets != 0 || len(rep.Runs) != 0 {
		t.Errorf("status --waiting --all: %d sets, more %+v, %d runs", len(rep.QuestionSets), rep.More, len(rep.Runs))
	}
	if rep := report("--all"); len(rep.Runs) != 25 || len(rep.QuestionSets) != 25 || rep.More != (statusMore{}) {
		t.Errorf("status --all: %d runs, %d sets, more %+v", len(rep.Runs), len(rep.QuestionSets), rep.More)
	}
	if rep := report("--kind", "approval"); rep.Counts.QuestionSets != 0 || len(rep.QuestionSets) != 0 || rep.Counts.Runs["waiting"] != 25 {
		t.Errorf("status --kind approval: counts %+v, %d sets", rep.Counts, len(rep.QuestionSets))
	}
	code, out, _ = status("--waiting", "--limit", "2")
	if code != 0 || strings.Count(out, "Which database") != 2 || strings.Contains(out, "RUN\tSTATUS") || strings.Contains(out, "serve:") ||
		!strings.Contains(out, "… and 23 more waiting question sets") {
		t.Errorf("status --waiting --limit 2: exit %d:\n%s", code, out)
	}
	if code, out, _ = status("--waiting", "--kind", "limit"); code != 0 || !strings.Contains(out, "No questions waiting for an answer.") {
		t.Errorf("status --waiting --kind limit: exit %d:\n%s", code, out)
	}
	for _, bad := range [][]string{{"--limit", "-1"}, {"--kind", "nope"}} {
		if code, _, errs := status(bad...); code != exitUsage || !strings.Contains(errs, bad[0]) {
			t.Errorf("status %v: exit %d, %q; want a usage error naming %s", bad, code, errs, bad[0])
		}
	}
}
