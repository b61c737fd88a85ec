package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// promptWatch is an output that signals once the terminal asks the approval
// question (its prompt "qXXXX> " after the question).
type promptWatch struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	asked  chan struct{}
	closed bool
}

func (w *promptWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.closed {
		s := w.buf.String()
		if i := strings.Index(s, "Allow Bash to run this?"); i >= 0 && strings.Contains(s[i:], "> ") {
			close(w.asked)
			w.closed = true
		}
	}
	return len(p), nil
}

// BenchmarkApprovalRoundTrip measures an approval's round trip while the CLI
// is held: from the answer typed on the terminal to the decision handed to
// the CLI (decided: the terminal hands the answer to the store, the
// orchestrator's hook — a separate process the CLI waits on — sees the set
// answered and takes the decision), and on to the tool's result reaching
// the (fake) model (tool-result: the CLI runs the command and sends its
// result, which is the CLI's own time).
//
// Target: decided p50 ≤ 50 ms (the time the orchestrator adds).
func BenchmarkApprovalRoundTrip(b *testing.B) {
	var n int
	var mu sync.Mutex
	e := newBenchEnv(b, benchEnvOptions{Extra: "approvals:\n  approval_hold: 10m\n"},
		fakeapi.Rule{Respond: func(r fakeapi.Request) fakeapi.Reply {
			if strings.Contains(r.LastUserText, "make the file") && len(r.ToolResults) == 0 {
				mu.Lock()
				n++
				id := n
				mu.Unlock()
				return fakeapi.Reply{Text: "Making it.", ToolUse: &fakeapi.ToolUse{Name: "Bash",
					Input: map[string]any{"command": fmt.Sprintf("touch made-%d.txt", id), "description": "Create a file"}}}
			}
			return fakeapi.Reply{Text: "Done."}
		}})
	var decided, result []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, r := approvalRoundTrip(b, e, i)
		decided, result = append(decided, d), append(result, r)
	}
	b.StopTimer()
	b.Logf("answer → decision handed to the CLI: %v", decided)
	b.Logf("answer → tool result at the API: %v", result)
	// What the orchestrator adds while the CLI is held is the time from the
	// answer to the decision handed to the CLI; the rest (the CLI runs the
	// command and calls the API) a pre-allowed call spends too.
	cli := make([]time.Duration, len(result))
	for i := range result {
		cli[i] = result[i] - decided[i]
	}
	b.Logf("decision → tool result at the API (the CLI's own part): %v", cli)
	b.ReportMetric(millis(percentile(decided, 50)), "decided-p50-ms")
	b.ReportMetric(millis(percentile(cli, 50)), "cli-part-p50-ms")
	b.ReportMetric(millis(percentile(result, 50)), "tool-result-p50-ms")
	b.ReportMetric(millis(percentile(result, 90)), "tool-result-p90-ms")
}

// approvalRoundTrip runs one approval and returns the times from the answer
// to the hook handing the decision out, and to the tool's result at the API.
func approvalRoundTrip(b *testing.B, e *benchEnv, i int) (time.Duration, time.Duration) {
	inR, inW := io.Pipe()
	out := &promptWatch{asked: make(chan struct{})}
	m := &Main{Stdin: inR, Stdout: out, Stderr: out, Dir: e.work, LookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- m.Exec(ctx, []string{"--config", e.config, "run", "--surface", "terminal", "--prompt", fmt.Sprintf("make the file %d", i)})
	}()
	select {
	case <-out.asked:
	case code := <-done:
		b.Fatalf("run ended (exit %d) before asking:\n%s", code, out.buf.String())
	}
	before := len(e.fake.Requests())
	t0 := time.Now()
	if _, err := io.WriteString(inW, "Allow once\n"); err != nil {
		b.Fatal(err)
	}
	reqs, err := e.fake.WaitRequests(ctx, before+1)
	if err != nil {
		b.Fatal(err)
	}
	var at time.Time
	for _, r := range reqs[before:] {
		if len(r.ToolResults) > 0 {
			at = r.Time
			break
		}
	}
	if code := <-done; code != 0 {
		b.Fatalf("exit %d:\n%s", code, out.buf.String())
	}
	inW.Close()
	if at.IsZero() {
		b.Fatalf("no tool result reached the API:\n%s", out.buf.String())
	}
	// When the hook handed the decision out (TakeToolDecision's used_at).
	st, err := store.Open(context.Background(), e.state)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListRuns(context.Background(), store.RunFilter{})
	if err != nil || len(runs) == 0 {
		b.Fatalf("runs: %v", err)
	}
	var used time.Time
	for _, r := range runs {
		calls, _ := st.ToolCalls(context.Background(), r.ID)
		for _, c := range calls {
			if c.UsedAt.After(t0) {
				used = c.UsedAt
			}
		}
	}
	if used.IsZero() {
		b.Fatal("no decision was handed out:\n" + out.buf.String())
	}
	return used.Sub(t0), at.Sub(t0)
}
