package github

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/github/githubtest"
)

func TestProgressComment(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	const repo = "acme/app"
	issue := srv.CreateIssue(repo, "Tasks")
	newSurface := func() *Surface {
		s, err := New(Config{
			ClientConfig:  ClientConfig{BaseURL: srv.URL() + "/", Token: "t", ProgressInterval: 300 * time.Millisecond},
			SurfaceConfig: SurfaceConfig{Repo: repo, Issue: issue, Progress: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := newSurface()
	ctx := context.Background()
	status := func() []githubtest.Comment {
		var out []githubtest.Comment
		for _, c := range srv.Comments(repo, issue) {
			if strings.Contains(c.Body, "orchestrator:progress run=r1") {
				out = append(out, c)
			}
		}
		return out
	}
	edits := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Method == "PATCH" && strings.Contains(r.Path, "/issues/comments/") {
				n++
			}
		}
		return n
	}
	p := surfaces.RunProgress{RunID: "r1", Title: "Add @everyone a login <!-- x -->", Step: "turn 1 running", Turn: 1}
	if err := s.Progress(ctx, p); err != nil {
		t.Fatal(err)
	}
	// A burst within the interval writes nothing at once, then the latest.
	for i := 1; i <= 5; i++ {
		p.ToolUses, p.LastTool = i, "Bash: go test ./..."
		if err := s.Progress(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if c := status(); len(c) != 1 || edits() != 0 {
		t.Fatalf("after a burst: %d status comments, %d edits; want 1 and none yet", len(c), edits())
	}
	srv.WaitFor(t, 10*time.Second, "the latest progress written after the interval", func() bool {
		c := status()
		return len(c) == 1 && strings.Contains(c[0].Body, "5 tool uses")
	})
	if n := edits(); n != 1 {
		t.Fatalf("%d edits for the burst, want 1", n)
	}
	body := status()[0].Body
	if strings.Contains(body, "@everyone") || strings.Contains(body, "<!-- x") {
		t.Fatalf("model text not cleaned:\n%s", body)
	}
	// After a restart the same comment is found and the final one is
	// written at once.
	s2 := newSurface()
	p.Final, p.Step, p.Summary, p.Turn = true, "done", "All done.", 2
	if err := s2.Progress(ctx, p); err != nil {
		t.Fatal(err)
	}
	c := status()
	if len(c) != 1 || !strings.Contains(c[0].Body, "✅") || !strings.Contains(c[0].Body, "All done.") {
		t.Fatalf("final status comments = %+v", c)
	}
	// Off by default.
	off, _ := New(Config{ClientConfig: ClientConfig{BaseURL: srv.URL() + "/", Token: "t"}, SurfaceConfig: SurfaceConfig{Repo: repo, Issue: issue}})
	defer off.Close()
	if err := off.Progress(ctx, surfaces.RunProgress{RunID: "r2", Step: "x"}); err != nil || len(srv.Comments(repo, issue)) != 1 {
		t.Fatalf("progress off: %v, %d comments", err, len(srv.Comments(repo, issue)))
	}
}

// TestProgressCommentListsRefusedCalls: the final status comment lists the
// tool calls the CLI refused, the model's text escaped, and counts those
// over the cap.
func TestProgressCommentListsRefusedCalls(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	const repo = "acme/app"
	issue := srv.CreateIssue(repo, "Tasks")
	s, err := New(Config{
		ClientConfig:  ClientConfig{BaseURL: srv.URL() + "/", Token: "t"},
		SurfaceConfig: SurfaceConfig{Repo: repo, Issue: issue, Progress: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := surfaces.RunProgress{RunID: "r1", Title: "Add a login", Step: "done", Turn: 2, Final: true, Summary: "All done.",
		Refused: []surfaces.RefusedCall{
			{Turn: 1, Tool: "Bash", Summary: "touch made_by_tool.txt"},
			{Turn: 2, Tool: "Bash", Summary: "echo `id` @everyone <!-- x -->"},
		},
		RefusedMore: 3}
	if err := s.Progress(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	var body string
	for _, c := range srv.Comments(repo, issue) {
		if strings.Contains(c.Body, "orchestrator:progress run=r1") {
			body = c.Body
		}
	}
	for _, want := range []string{
		"✋ Refused by the CLI: 5 tool calls",
		"- `Bash: touch made_by_tool.txt` (turn 1)",
		"- `Bash: echo 'id' @\u200beveryone",
		"- and 3 more",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("status comment lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "@everyone") || strings.Contains(body, "<!-- x") {
		t.Errorf("model text not cleaned:\n%s", body)
	}
}

// TestRunEndShowsPullRequest: the final status comment and the run issue's
// final comment link the pull request that delivered the run; a URL that is
// not http(s) is left out.
func TestRunEndShowsPullRequest(t *testing.T) {
	const pr = "https://github.com/acme/app/pull/7"
	p := surfaces.RunProgress{RunID: "r1", Step: "done", Final: true, PRURL: pr}
	for name, text := range map[string]string{"status": renderProgress(p), "final comment": renderRunEnded(p)} {
		if !strings.Contains(text, "Pull request: "+pr) {
			t.Errorf("%s %q: want the link to %s", name, text, pr)
		}
	}
	p.Final = false
	if text := renderProgress(p); strings.Contains(text, pr) {
		t.Errorf("progress before the end %q: want no pull request yet", text)
	}
	p.Final, p.PRURL = true, "javascript:alert(1)"
	if text := renderProgress(p) + renderRunEnded(p); strings.Contains(text, "javascript") {
		t.Errorf("%q: want a URL that is not http(s) left out", text)
	}
}
