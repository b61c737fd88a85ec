package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/web"
)

func TestWebTokenPrintsATokenAndItsHash(t *testing.T) {
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := m.Exec(context.Background(), []string{"web", "token", "alice"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	tok := regexp.MustCompile(`\n  (orw_[A-Za-z0-9_-]{43})\n`).FindStringSubmatch(out.String())
	if tok == nil {
		t.Fatalf("no token in:\n%s", out.String())
	}
	if want := fmt.Sprintf("  - {name: \"alice\", token_sha256: %s}\n", web.HashToken(tok[1])); !strings.Contains(out.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	m.Exec(context.Background(), []string{"web", "token", "alice"})
	if strings.Contains(out.String(), tok[1]) {
		t.Fatal("the same token twice")
	}
	if code := m.Exec(context.Background(), []string{"web", "token", "a\"b"}); code != exitUsage {
		t.Fatalf("a name with a quote: exit %d, want %d", code, exitUsage)
	}
}

// TestServeWithoutWebServesNoInbox: serve.web is off by default, and then
// nothing but /healthz, /metrics and the webhooks is served.
func TestServeWithoutWebServesNoInbox(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "specs"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "o.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("state_dir: %q\nspecs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n",
		filepath.Join(dir, "state"), filepath.Join(dir, "specs"))), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	addr := make(chan string, 1)
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Dir: dir,
		LookupEnv: func(string) (string, bool) { return "", false }, serveReady: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- m.Exec(ctx, []string{"--config", cfg, "serve"}) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case c := <-code:
		t.Fatalf("serve exited %d:\n%s", c, out.String())
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	for _, path := range []string{"/", "/signin", "/api/pending", "/runs"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s with serve.web off: %d, want 404", path, resp.StatusCode)
		}
	}
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("serve exited %d", c)
	}
}

func TestGitHubWebRootFromTheAPIRoot(t *testing.T) {
	for api, want := range map[string]string{
		"":                                   "https://github.com",
		"https://api.github.com/":            "https://github.com",
		"https://ghe.example.com/api/v3/":    "https://ghe.example.com",
		"http://127.0.0.1:8080/":             "http://127.0.0.1:8080",
		"https://ghe.example.com/api/v3?x#y": "https://ghe.example.com",
	} {
		if got := githubWebRoot(api); got != want {
			t.Errorf("githubWebRoot(%q) = %q, want %q", api, got, want)
		}
	}
}
