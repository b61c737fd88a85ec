package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeScheduledSpecGitHubWins: `serve` runs a scheduled spec that asks
// on GitHub and the terminal at once; the terminal, whose output is serve's
// log, never prompts: it logs the question with the command that answers
// it. The GitHub answer wins, the log says who answered, and the run
// finishes. /healthz and /metrics are served meanwhile.
func TestServeScheduledSpecGitHubWins(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	gh := githubtest.NewServer(t)
	gh.SetPermission("alice", "admin")
	const repo = "acme/app"
	specDir := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := "---\nname: nightly\nschedule: \"@every 1s\"\nsurfaces: [github, terminal]\n---\nImplement spec X\n"
	if err := os.WriteFile(filepath.Join(specDir, "nightly.md"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeConfig(fmt.Sprintf("  github:\n    enabled: true\n    base_url: %q\n    token: test-token\n    repo: %s\n    poll_interval: 100ms\n"+
		"specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n", gh.URL()+"/", repo, specDir))

	stdin, stdinW := io.Pipe() // the terminal: nobody types
	defer stdinW.Close()
	var out lockedBuffer
	addr := make(chan string, 1)
	m := &Main{Stdin: stdin, Stdout: &out, Stderr: &out, Dir: filepath.Join(e.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }, serveReady: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- m.Exec(ctx, []string{"--config", e.config, "serve"}) }()
	defer func() {
		if t.Failed() {
			t.Logf("serve output:\n%s", out.String())
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}

	q := gh.WaitQuestion(t, repo, 1, 2*time.Minute)
	waitFor(t, "the question in the log", func() bool {
		s := out.String()
		return strings.Contains(s, "question waiting") && strings.Contains(s, "orchestrator answer ")
	})
	if s := out.String(); strings.Contains(s, "Which auth method?") || strings.Contains(s, "orchestrator resume") {
		t.Errorf("serve's terminal prompted into its log:\n%s", s)
	}
	gh.AddComment(repo, q.Issue, "alice", "JWT")
	waitFor(t, "the run to finish", func() bool {
		st := e.store()
		runs, _ := st.ListRuns(context.Background(), store.RunFilter{Status: []store.RunStatus{store.RunDone}})
		return len(runs) >= 1
	})
	waitFor(t, "the log to say who answered", func() bool {
		s := out.String()
		return strings.Contains(s, "question answered") && strings.Contains(s, "alice")
	})
	if n := e.answerRequests(); n != 1 {
		t.Fatalf("answers sent %d times", n)
	}
	// Only one session ran while the question waited: every tick meanwhile
	// was skipped.
	if n := len(gh.Questions(repo)); n > 2 {
		t.Fatalf("%d questions posted; the spec's ticks must be skipped while its run waits", n)
	}
	for path, want := range map[string]string{
		"/healthz": `"status":"ok"`,
		"/metrics": `orchestrator_runs_total{outcome="done"}`,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("serve exited %d after shutdown, want 0", c)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
