package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// TestServeCostsEachTurnOnce: a run of two turns (a question answered in
// advance, then the answer turn, which resumes the session: the CLI's
// total_cost_usd counts the first turn again) under `serve`: /metrics'
// cost, `show`'s cost and the session's last total_cost_usd are equal.
func TestServeCostsEachTurnOnce(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	spec := filepath.Join(e.dir, "work", "twice.md")
	if err := os.WriteFile(spec, []byte("---\nname: twice\nsurfaces: [terminal]\nanswers:\n  Auth: JWT\n---\nImplement spec X\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeConfig("serve:\n  listen: 127.0.0.1:0\n")
	code, out, _ := e.run("", "submit", spec)
	if code != 0 {
		t.Fatalf("submit exit %d", code)
	}
	id := strings.TrimSpace(out)

	stdin, stdinW := io.Pipe()
	defer stdinW.Close()
	var log lockedBuffer
	addr := make(chan string, 1)
	m := &Main{Stdin: stdin, Stdout: &log, Stderr: &log, Dir: filepath.Join(e.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }, serveReady: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan int, 1)
	go func() { exited <- m.Exec(ctx, []string{"--config", e.config, "serve"}) }()
	defer func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("serve output:\n%s", log.String())
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	st := e.store()
	waitFor(t, "the run to finish", func() bool {
		run, err := st.Run(context.Background(), id)
		return err == nil && run.Status.Final()
	})
	run, _ := st.Run(context.Background(), id)
	turns, err := st.Turns(context.Background(), id)
	if run.Status != store.RunDone || err != nil || len(turns) != 2 {
		t.Fatalf("run %s %q with %d turns (%v); want done after two", run.Status, run.Error, len(turns), err)
	}
	last := lastTotalCost(t, turns[1].TranscriptPath)
	if first := lastTotalCost(t, turns[0].TranscriptPath); !(first > 0 && last > first) {
		t.Fatalf("the session's totals: $%v then $%v; want the second to count the first again", first, last)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metric := -1.0
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "orchestrator_agent_cost_usd_total "); ok {
			metric, _ = strconv.ParseFloat(v, 64)
		}
	}
	code, out, _ = e.run("", "show", "--json", id)
	var shown showOutput
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil {
		t.Fatalf("show exit %d: %s", code, out)
	}
	turnSum := 0.0
	for _, tu := range shown.Timeline {
		if tu.Outcome != nil {
			turnSum += tu.Outcome.CostUSD
		}
	}
	for what, v := range map[string]float64{"/metrics": metric, "show's run cost": shown.Run.CostUSD, "show's turns": turnSum, "the store's run cost": run.CostUSD} {
		if math.Abs(v-last) > 1e-9 {
			t.Errorf("%s: $%v; want the session's last total_cost_usd $%v", what, v, last)
		}
	}
}

// lastTotalCost is the total_cost_usd of the last result line of a turn's
// transcript.
func lastTotalCost(t *testing.T, path string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total := -1.0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Type  string   `json:"type"`
			Total *float64 `json:"total_cost_usd"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Type == "result" && line.Total != nil {
			total = *line.Total
		}
	}
	if total < 0 {
		t.Fatalf("no result with total_cost_usd in %s", path)
	}
	return total
}
