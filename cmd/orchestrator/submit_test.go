package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestSubmitQueuesARun: submit stores the run queued, prints its ID and
// runs nothing; status lists it queued; a bad call says what is wrong.
func TestSubmitQueuesARun(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	code, out, _ := e.run("", "submit", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("submit exit %d", code)
	}
	id := strings.TrimSpace(out)
	run, err := e.store().Run(context.Background(), id)
	if err != nil || run.Status != store.RunQueued || run.Prompt != "Implement spec X" {
		t.Fatalf("run %q: %+v, %v; want it queued", id, run, err)
	}
	if run.Host != "" {
		t.Errorf("a run queued on SQLite has host %q, want none", run.Host)
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Errorf("submit ran the agent: %d requests", n)
	}
	code, out, _ = e.run("", "status", "--json")
	var rep statusReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Runs) != 1 || rep.Runs[0].Status != "queued" {
		t.Fatalf("status exit %d: %s", code, out)
	}
	if code, _, errOut := e.run("", "submit"); code != exitUsage || !strings.Contains(errOut, "give a spec file or --prompt") {
		t.Errorf("submit with nothing: exit %d, %q", code, errOut)
	}
}
