package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
)

// TestWebStartRunIsTakenByServe: POST /api/runs on a running serve queues
// an ordinary run that serve takes and drives with the real CLI to its
// end: a spec of specs.dir (role run) and a prompt (role prompt). The same
// Idempotency-Key twice gives one run; without a token 401; the answer
// role 403; a spec named by a path is no spec.
func TestWebStartRunIsTakenByServe(t *testing.T) {
	t.Parallel()
	e := newE2E(t,
		fakeapi.Rule{When: "Say hello from the web spec", Reply: fakeapi.Reply{Text: "Hello from the spec."}},
		fakeapi.Rule{When: "Say hello from a web prompt", Reply: fakeapi.Reply{Text: "Hello from the prompt."}},
	)
	specDir := filepath.Join(e.dir, "specs")
	if err := os.MkdirAll(specDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(specDir, "hello.md"), []byte("---\nname: hello\nsurfaces: [terminal]\n---\nSay hello from the web spec\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	alice, aliceSum := web.NewToken()
	bob, bobSum := web.NewToken()
	carol, carolSum := web.NewToken()
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  web:\n    enabled: true\n    users:\n"+
		"      - {name: alice, token_sha256: %s, role: run}\n      - {name: bob, token_sha256: %s}\n      - {name: carol, token_sha256: %s, role: prompt}\n",
		specDir, aliceSum, bobSum, carolSum))

	base := startServe(t, e).base // specsdir_e2e_test.go; its terminal: nobody types

	post := func(token, key, body string) (int, http.Header, string, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/api/runs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var rep struct {
			Run struct {
				ID string `json:"id"`
			} `json:"run"`
		}
		json.Unmarshal(b, &rep)
		return resp.StatusCode, resp.Header, rep.Run.ID, string(b)
	}

	if code, _, _, body := post("", "k1", `{"spec":"hello"}`); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s", code, body)
	}
	if code, _, _, body := post(bob, "k1", `{"spec":"hello"}`); code != http.StatusForbidden {
		t.Errorf("bob, role answer: %d %s", code, body)
	}
	if code, _, _, body := post(alice, "k0", `{"spec":"`+filepath.Join(specDir, "hello.md")+`"}`); code != http.StatusUnprocessableEntity {
		t.Errorf("a spec by its path: %d %s, want 422", code, body)
	}
	c1, _, id1, body := post(alice, "retry-1", `{"spec":"hello"}`)
	c2, h2, id2, _ := post(alice, "retry-1", `{"spec":"hello"}`)
	if c1 != http.StatusCreated || id1 == "" || c2 != http.StatusOK || id2 != id1 || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("POST twice with one key: %d %s, then %d %s; want 201 then 200 with the same run\n%s", c1, id1, c2, id2, body)
	}
	if code, _, _, body := post(alice, "retry-1", `{"spec":"other"}`); code != http.StatusUnprocessableEntity {
		t.Errorf("the key with another body: %d %s, want 422", code, body)
	}
	c3, _, id3, body := post(carol, "carol-1", `{"prompt":"Say hello from a web prompt"}`)
	if c3 != http.StatusCreated || id3 == "" {
		t.Fatalf("carol's prompt: %d %s", c3, body)
	}

	st := e.store()
	for _, id := range []string{id1, id3} {
		waitFor(t, "run "+id+" done", func() bool {
			r, err := st.Run(context.Background(), id)
			return err == nil && r.Status == store.RunDone
		})
	}
	r1, _ := st.Run(context.Background(), id1)
	r3, _ := st.Run(context.Background(), id3)
	if r1.Spec != "hello" || !strings.Contains(r1.FinalText, "Hello from the spec.") || !strings.Contains(r3.FinalText, "Hello from the prompt.") {
		t.Errorf("runs: %s %q %q; %q", r1.ID, r1.Spec, r1.FinalText, r3.FinalText)
	}
	runs, err := st.ListRuns(context.Background(), store.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs in the store (%v), want 2", len(runs), err)
	}
}
