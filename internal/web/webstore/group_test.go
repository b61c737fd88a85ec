package webstore

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestInboxAnswersTheGroup: three runs of three specs wait on the same
// question. The inbox shows each as waiting in the two others and offers
// to answer them all; POST /api/answer with "all" answers the three at
// once (one shared decision), each by the signed-in person on the web.
func TestInboxAnswersTheGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var sets []questions.Set
	for _, r := range []string{"r1", "r2", "r3"} {
		if _, err := st.CreateRun(ctx, store.Run{ID: r, Spec: "nightly-" + r, Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		turn, err := st.BeginTurn(ctx, store.Turn{RunID: r, Kind: store.TurnStart, Prompt: "p", SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		set := questions.NewSet(r, turn.Seq, []questions.Question{{Text: "Deploy now?", Options: []questions.Option{{Label: "Yes"}, {Label: "No"}}}})
		if err := st.FinishTurn(ctx, r, turn.Seq, store.TurnResult{Status: "success"}, &set, []string{"web"}); err != nil {
			t.Fatal(err)
		}
		sets = append(sets, set)
	}
	b := &Backend{Store: st}
	p, err := b.Pending(ctx)
	if err != nil || len(p) != 3 {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	for _, pe := range p {
		if len(pe.Set.Group) != 2 {
			t.Errorf("set %s of run %s: group %+v, want the two other runs", pe.Set.ID, pe.Set.RunID, pe.Set.Group)
		}
	}
	const token = "orw_test-token-for-the-inbox"
	srv, err := web.New(web.Config{Backend: b, Users: []web.User{{Name: "alice", TokenSHA256: web.HashToken(token)}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	code, page := do("GET", "/", "")
	if code != 200 || !strings.Contains(page, "This question also waits in 2 other runs") || !strings.Contains(page, `name="all" value="1"`) ||
		!strings.Contains(page, `href="/runs/r2"`) {
		t.Fatalf("inbox %d does not offer to answer the group:\n%s", code, page)
	}
	code, body := do("GET", "/api/pending", "")
	if code != 200 || !strings.Contains(body, `"group":[{"set_id":"`) || !strings.Contains(body, `"spec":"nightly-r2"`) {
		t.Errorf("GET /api/pending %d does not list the groups:\n%s", code, body)
	}
	code, body = do("POST", "/api/answer", `{"set_id":"`+sets[0].ID+`","answers":[{"question_id":"`+sets[0].Questions[0].ID+`","labels":["Yes"]}],"all":true}`)
	var res struct {
		Taken  bool   `json:"taken"`
		Shared string `json:"shared"`
		Others []struct {
			RunID string `json:"run_id"`
			Taken bool   `json:"taken"`
		} `json:"others"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != 200 || !res.Taken || res.Shared == "" || len(res.Others) != 2 ||
		!res.Others[0].Taken || !res.Others[1].Taken {
		t.Fatalf("POST /api/answer all: %d %s", code, body)
	}
	for _, set := range sets {
		rec, err := st.QuestionSet(ctx, set.ID)
		if err != nil || rec.State != store.SetAnswered || rec.Response.By != "alice" || rec.Response.Surface != web.SurfaceName {
			t.Errorf("set %s: %s by %q on %q, %v", set.ID, rec.State, rec.Response.By, rec.Response.Surface, err)
		}
	}
}
