package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// The golden tests of the JSON outputs (docs/json.md): each command's
// output, with IDs, times, durations and paths normalised, must equal
// testdata/json/COMMAND.golden. go test -run JSONGolden -update rewrites
// the files.

var update = flag.Bool("update", false, "rewrite the golden files of the JSON outputs")

// secretEnv is put in agent.env: it must never be printed.
const secretEnv = "ORCHESTRATOR_TEST_API_TOKEN"
const secretValue = "tok-b2f1c0de-never-printed-7e3a"

// newJSONE2E is an e2e whose agent.env holds a secret.
func newJSONE2E(t *testing.T, rules ...fakeapi.Rule) *e2e {
	t.Helper()
	e := newE2E(t, rules...)
	e.base = strings.Replace(e.base, "  env:\n", fmt.Sprintf("  env:\n    %s: %q\n", secretEnv, secretValue), 1)
	e.writeConfig("")
	return e
}

func TestJSONGoldenRun(t *testing.T) {
	t.Parallel()
	e := newJSONE2E(t, standardRules(0)...)
	code, out, errs := e.run("2\n", "run", "--json", "--prompt", "Implement spec X")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	noSecret(t, out+errs)
	golden(t, "run", normaliseNDJSON(t, out))
}

func TestJSONGoldenResumeAndStatus(t *testing.T) {
	t.Parallel()
	e := newJSONE2E(t, standardRules(0)...)
	code, out, _ := e.run("", "run", "--json", "--prompt", "Implement spec X")
	if code != exitWaiting {
		t.Fatalf("exit %d, want %d", code, exitWaiting)
	}
	noSecret(t, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last jsonEvent
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Kind != evRunEnded || last.Run == nil || last.Run.Status != "waiting" || !strings.Contains(last.Error, "waiting") {
		t.Fatalf("last line = %s, want run_ended, waiting, with the error", lines[len(lines)-1])
	}
	code, out, _ = e.run("", "status", "--json")
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	noSecret(t, out)
	golden(t, "status", normaliseJSON(t, out))
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	pending := pendingQuestions(rep.QuestionSets)
	if len(pending) != 1 {
		t.Fatalf("status = %s", out)
	}
	if code, _, _ := e.run("", "answer", pending[0].q.ID, "2"); code != 0 {
		t.Fatalf("answer exit %d", code)
	}
	code, out, _ = e.run("", "resume", "--json", last.RunID)
	if code != 0 {
		t.Fatalf("resume exit %d", code)
	}
	noSecret(t, out)
	golden(t, "resume", normaliseNDJSON(t, out))
}

func TestJSONGoldenRehearse(t *testing.T) {
	t.Parallel()
	e := newJSONE2E(t)
	code, out, errs := e.run("1\n", "rehearse", "--json", "--prompt", "Add a login page")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	noSecret(t, out+errs)
	if strings.Contains(out, "fake-key") || strings.Contains(out, "ANTHROPIC_") {
		t.Errorf("rehearse --json prints the agent's environment:\n%s", out)
	}
	golden(t, "rehearse", normaliseNDJSON(t, out))
}

func TestJSONGoldenInspect(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	transcript, err := filepath.Abs(filepath.Join("..", "..", "executor", "testdata", "claude-code-2.1.330", "turn1.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if code := tm.exec("inspect", "--json", transcript); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, tm.stderr.String())
	}
	var rep inspectReport
	if err := json.Unmarshal(tm.stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Outcome.ExitCode.known || rep.Outcome.DurationMS.known {
		t.Errorf("a transcript's exit code and duration are unknown, got %s", tm.stdout.String())
	}
	golden(t, "inspect", normaliseJSON(t, tm.stdout.String()))
}

// TestJSONRunHasNoAgentEnv: a run's options (agent.env, API keys) are not
// part of any JSON output.
func TestJSONRunHasNoAgentEnv(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(newJSONRun(storeRunWithEnv()))
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, string(b))
}

func noSecret(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, secretValue) || strings.Contains(out, secretEnv) || strings.Contains(out, `"env"`) {
		t.Errorf("the output carries agent.env:\n%s", out)
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "json", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -run %s -update rewrites it):\n%s", name, path, t.Name(), got)
	}
}

// normaliser replaces what changes from one run to the next: IDs (the same
// ID gets the same placeholder), times, durations, paths.
type normaliser struct{ ids map[string]string }

var (
	idKeys   = map[string]bool{"id": true, "run_id": true, "set_id": true, "question_id": true, "session_id": true, "asked_set": true}
	timeKeys = map[string]bool{"time": true, "created_at": true, "updated_at": true, "at": true, "next": true,
		"started_at": true, "finished_at": true, "asked_at": true, "answered_at": true, "start": true}
	varKeys = map[string]bool{"workdir": true, "duration_ms": true, "by": true, "answered_by": true,
		"bytes": true, "transcripts_bytes": true, "worktrees_bytes": true}
)

func (n *normaliser) value(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // placeholders numbered in a stable order
		for _, k := range keys {
			x[k] = n.value(k, x[k])
		}
		return x
	case []any:
		for i, vv := range x {
			x[i] = n.value(key, vv)
		}
		return x
	case string:
		switch {
		case idKeys[key] && x != "":
			if _, ok := n.ids[x]; !ok {
				n.ids[x] = fmt.Sprintf("<id-%d>", len(n.ids)+1)
			}
			return n.ids[x]
		case timeKeys[key]:
			return "<time>"
		case varKeys[key] && key != "duration_ms":
			return "<" + key + ">"
		}
		for id, ph := range n.ids { // IDs inside text ("orchestrator resume RUN")
			x = strings.ReplaceAll(x, id, ph)
		}
		return x
	case json.Number:
		if varKeys[key] {
			return "<" + key + ">"
		}
	}
	return v
}

func (n *normaliser) line(t *testing.T, s string) string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	if m, ok := v.(map[string]any); !ok || m["v"] != json.Number("1") {
		t.Errorf(`no "v": 1 in %s`, s)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(n.value("", v)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// normaliseNDJSON normalises each line; text and cost events, whose number
// depends on how the CLI chunks its output, are counted, not listed.
func normaliseNDJSON(t *testing.T, out string) string {
	t.Helper()
	n := &normaliser{ids: map[string]string{}}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var kind struct{ Kind eventKind }
		if err := json.Unmarshal([]byte(l), &kind); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, l)
		}
		if _, ok := map[eventKind]bool{evRunStarted: true, evRunResumed: true, evTurnStarted: true, evText: true, evToolUse: true, evCost: true,
			evTurnFinished: true, evQuestion: true, evAnswer: true, evReminder: true, evEscalated: true, evRetry: true,
			evCorrection: true, evDone: true, evRunEnded: true}[kind.Kind]; !ok {
			t.Errorf("undeclared event kind %q", kind.Kind)
		}
		b.WriteString(n.line(t, l))
	}
	return b.String()
}

func normaliseJSON(t *testing.T, out string) string {
	t.Helper()
	return (&normaliser{ids: map[string]string{}}).line(t, out)
}

func storeRunWithEnv() store.Run {
	return store.Run{ID: "r1", Title: "t", Status: store.RunRunning,
		Options: json.RawMessage(`{"env":{"` + secretEnv + `":"` + secretValue + `"}}`)}
}

// TestJSONStoredTurn: a stored turn has the turn's shape; what the store
// does not keep is "unknown", never a made-up number.
func TestJSONStoredTurn(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	turn := store.Turn{RunID: "r1", Seq: 2, Kind: store.TurnAnswer, SetID: "s1", StartedAt: start, Finished: true,
		FinishedAt: start.Add(1500 * time.Millisecond),
		Result:     store.TurnResult{Status: "error", Category: "api", Error: "boom \x1b[2J", CostUSD: 0.5, NumTurns: 3}}
	b, err := json.Marshal(newJSONStoredTurn(turn))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":2,"kind":"answer","set_id":"s1","started_at":"2026-11-23T20:00:00Z","finished_at":"2026-11-23T20:00:01.5Z",` +
		`"outcome":{"status":"error","error_category":"api","error":"boom ","num_turns":3,"cost_usd":0.5,"input_tokens":0,` +
		`"output_tokens":0,"exit_code":"unknown","duration_ms":1500,"skipped_lines":{"malformed":0,"oversize":0},"warnings":[]}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
