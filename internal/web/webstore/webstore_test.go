package webstore

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// A recording of the real CLI: text, a Bash tool use, text.
const recording = "../../../executor/testdata/claude-code-2.1.330/bash_perm_streamjson_ppt.ndjson"

// waitingRun stores run r1 whose first turn (transcript: the recording)
// asked set "r1-s1" with two questions.
func waitingRun(t *testing.T) (*Backend, *store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateRun(ctx, store.Run{ID: "r1", Spec: "nightly", Title: "Implement spec X", Prompt: "p",
		Options: []byte(`{"env":{"ANTHROPIC_API_KEY":"sk-ant-secret"}}`)}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(recording)
	if err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(t.TempDir(), "001-start.ndjson")
	if err := os.WriteFile(tr, data, 0o600); err != nil {
		t.Fatal(err)
	}
	turn, err := st.BeginTurn(ctx, store.Turn{RunID: "r1", Kind: store.TurnStart, Prompt: "p", SessionID: "s", TranscriptPath: tr})
	if err != nil {
		t.Fatal(err)
	}
	set := questions.Set{ID: "r1-s1", RunID: "r1", Turn: turn.Seq, Questions: []questions.Question{
		{ID: "qa", Header: "Auth", Text: "Which auth method?", Options: []questions.Option{{Label: "OAuth2"}, {Label: "JWT"}}},
		{ID: "qb", Header: "Libs", Text: "Which libraries?", MultiSelect: true, Options: []questions.Option{{Label: "chi"}, {Label: "sqlc"}}},
	}}
	if err := st.FinishTurn(ctx, "r1", turn.Seq, store.TurnResult{Status: "success", CostUSD: 0.01}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateRun(ctx, "r1", store.RunUpdate{Status: store.RunWaiting}); err != nil {
		t.Fatal(err)
	}
	return &Backend{Store: st}, st
}

func answer(by string, a ...questions.Answer) questions.Response {
	return questions.Response{SetID: "r1-s1", By: by, Surface: web.SurfaceName, Answers: a}
}

func TestPendingAndRunTimelineFromTheStore(t *testing.T) {
	b, _ := waitingRun(t)
	ctx := context.Background()
	p, err := b.Pending(ctx)
	if err != nil || len(p) != 1 || p[0].Set.ID != "r1-s1" || p[0].Spec != "nightly" || p[0].RunTitle != "Implement spec X" ||
		strings.Join(p[0].Surfaces, ",") != "terminal" || p[0].AskedAt.IsZero() {
		t.Fatalf("pending = %+v, %v", p, err)
	}
	runs, err := b.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].Status != "waiting" || runs[0].Turns != 1 {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	d, err := b.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, it := range d.Items {
		kinds = append(kinds, it.Kind)
	}
	if got := strings.Join(kinds, ","); got != "turn,text,tool,text,result,question" {
		t.Fatalf("timeline kinds %s", got)
	}
	if d.Items[1].Text != "Running a command." || d.Items[2].Tool != "Bash" || !strings.Contains(d.Items[2].Text, `"command":"touch made_by_tool.txt"`) ||
		!d.Items[0].Transcript || d.Items[4].CostUSD != 0.01 {
		t.Fatalf("items = %+v", d.Items)
	}
	if len(d.Decisions) != 2 || d.Decisions[0].State != "pending" || d.Decisions[0].Answer != "" {
		t.Fatalf("decisions = %+v", d.Decisions)
	}
	if _, err := b.Run(ctx, "nope"); !errors.Is(err, web.ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	rc, err := b.Transcript(ctx, "r1", 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !strings.Contains(string(got), `"type":"result"`) {
		t.Fatal("transcript not served")
	}
	if _, err := b.Transcript(ctx, "r1", 2); !errors.Is(err, web.ErrNotFound) {
		t.Fatalf("unknown turn: %v", err)
	}
}

func TestOfferValidatesAndTheFirstValidAnswerWins(t *testing.T) {
	b, st := waitingRun(t)
	ctx := context.Background()
	// Invalid: a label that is not an option; an unknown question; no
	// answer; an empty answer; one question twice.
	for _, resp := range []questions.Response{
		answer("alice", questions.Answer{QuestionID: "qa", Labels: []string{"Basic"}}, questions.Answer{QuestionID: "qb", Labels: []string{"chi"}}),
		answer("alice", questions.Answer{QuestionID: "qz", Labels: []string{"JWT"}}),
		answer("alice"),
		answer("alice", questions.Answer{QuestionID: "qb"}),
		answer("alice", questions.Answer{QuestionID: "qa", Labels: []string{"JWT"}}, questions.Answer{QuestionID: "qa", Labels: []string{"OAuth2"}}),
	} {
		d, err := b.Offer(ctx, resp)
		if err != nil || d.Invalid == nil || d.Taken || d.Closed {
			t.Fatalf("%+v: %+v %v, want invalid", resp, d, err)
		}
	}
	if rec, _ := st.QuestionSet(ctx, "r1-s1"); rec.State != store.SetPending || len(rec.Response.Answers) != 0 {
		t.Fatalf("an invalid answer was stored: %+v", rec)
	}
	// Two valid answers at once, answers in any order: exactly one wins.
	var wg sync.WaitGroup
	ds := make([]web.Decision, 2)
	for i, by := range []string{"alice", "bob"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := b.Offer(ctx, answer(by, questions.Answer{QuestionID: "qb", Labels: []string{"chi", "sqlc"}}, questions.Answer{QuestionID: "qa", Labels: []string{"JWT"}}))
			if err != nil {
				t.Error(err)
			}
			ds[i] = d
		}()
	}
	wg.Wait()
	if ds[0].Taken == ds[1].Taken {
		t.Fatalf("decisions %+v: want exactly one taken", ds)
	}
	winner := ds[0]
	loser := ds[1]
	if !winner.Taken {
		winner, loser = loser, winner
	}
	if !winner.Closed || winner.Final == nil || !loser.Closed || loser.Final == nil || loser.Final.By != winner.Final.By {
		t.Fatalf("winner %+v loser %+v", winner, loser)
	}
	rec, _ := st.QuestionSet(ctx, "r1-s1")
	if rec.State != store.SetAnswered || rec.Response.Surface != "web" || rec.Response.Answers[0].QuestionID != "qa" {
		t.Fatalf("stored %+v", rec)
	}
	if _, err := b.Offer(ctx, questions.Response{SetID: "nope"}); !errors.Is(err, web.ErrNotFound) {
		t.Fatalf("unknown set: %v", err)
	}
}

func TestCancelExpiresTheQuestions(t *testing.T) {
	b, st := waitingRun(t)
	ctx := context.Background()
	if err := b.Cancel(ctx, "r1", "alice"); err != nil {
		t.Fatal(err)
	}
	r, _ := st.Run(ctx, "r1")
	if r.Status != store.RunCancelled || r.Error != "cancelled by alice on the web" {
		t.Fatalf("run %+v", r)
	}
	d, err := b.Offer(ctx, answer("bob", questions.Answer{QuestionID: "qa", Labels: []string{"JWT"}}, questions.Answer{QuestionID: "qb", Labels: []string{"chi"}}))
	if err != nil || d.Taken || !d.Closed || d.Final != nil {
		t.Fatalf("answer after cancel: %+v %v", d, err)
	}
	if err := b.Cancel(ctx, "r1", "alice"); !errors.Is(err, web.ErrFinal) {
		t.Fatalf("cancel twice: %v", err)
	}
	if err := b.Cancel(ctx, "nope", "alice"); !errors.Is(err, web.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
}

func TestOfferKeepsAPartialAnswerAndTheSetStaysPending(t *testing.T) {
	b, st := waitingRun(t)
	ctx := context.Background()
	d, err := b.Offer(ctx, answer("alice", questions.Answer{QuestionID: "qa", Labels: []string{"JWT"}}))
	if err != nil || !d.Taken || d.Closed || d.Final != nil {
		t.Fatalf("partial: %+v %v", d, err)
	}
	if rec, _ := st.QuestionSet(ctx, "r1-s1"); rec.State != store.SetPending || len(rec.Response.Answers) != 1 {
		t.Fatalf("after a partial answer: %+v", rec)
	}
	// bob answers both: his answer to qa comes second and is not kept.
	d, err = b.Offer(ctx, answer("bob", questions.Answer{QuestionID: "qa", Labels: []string{"OAuth2"}}, questions.Answer{QuestionID: "qb", Labels: []string{"sqlc"}}))
	if err != nil || !d.Taken || !d.Closed || d.Final == nil {
		t.Fatalf("completing: %+v %v", d, err)
	}
	if a, _ := d.Final.Answer("qa"); a.Labels[0] != "JWT" {
		t.Fatalf("qa = %+v, want alice's JWT", a)
	}
}

// TestRunLinksTheIssueAndThePullRequest: a run page links the GitHub issue
// its questions are asked in (looked up once, not at every live refresh)
// and the pull request of its delivery; an address that is not http(s) is
// never linked.
func TestRunLinksTheIssueAndThePullRequest(t *testing.T) {
	b, st := waitingRun(t)
	ctx := context.Background()
	var mu sync.Mutex
	lookups := 0
	b.IssueURL = func(_ context.Context, runID string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups++
		if runID != "r1" {
			return "", errors.New("unknown run")
		}
		return "https://github.com/acme/app/issues/7", nil
	}
	d, err := b.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Links) != 1 || d.Links[0] != (web.Link{Label: "GitHub issue", URL: "https://github.com/acme/app/issues/7"}) {
		t.Fatalf("links without a delivery = %+v", d.Links)
	}
	if err := st.SaveDelivery(ctx, store.Delivery{RunID: "r1", Worktree: "wt", Branch: "orchestrator/r1",
		State: store.DeliveryOpened, PRNumber: 9, PRURL: "https://github.com/acme/app/pull/9"}); err != nil {
		t.Fatal(err)
	}
	d, err = b.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Links) != 2 || d.Links[1] != (web.Link{Label: "pull request #9", URL: "https://github.com/acme/app/pull/9"}) {
		t.Fatalf("links = %+v", d.Links)
	}
	if lookups != 1 {
		t.Errorf("the issue was looked up %d times, want once", lookups)
	}
	if err := st.SaveDelivery(ctx, store.Delivery{RunID: "r1", Worktree: "wt", Branch: "orchestrator/r1",
		State: store.DeliveryOpened, PRNumber: 9, PRURL: "javascript:alert(1)"}); err != nil {
		t.Fatal(err)
	}
	b.IssueURL = func(context.Context, string) (string, error) { return "", nil }
	b.issues = nil
	d, err = b.Run(ctx, "r1")
	if err != nil || len(d.Links) != 0 {
		t.Fatalf("links = %+v, %v; want none", d.Links, err)
	}
}

// TestRemovedTranscriptIsNotOffered: once gc removed a turn's transcript
// (retention.transcripts), the run's page offers no download of it.
func TestRemovedTranscriptIsNotOffered(t *testing.T) {
	b, st := waitingRun(t)
	ctx := context.Background()
	turns, err := st.Turns(ctx, "r1")
	if err != nil || len(turns) != 1 {
		t.Fatal(turns, err)
	}
	if err := os.Remove(turns[0].TranscriptPath); err != nil {
		t.Fatal(err)
	}
	d, err := b.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Items[0].Kind != web.ItemTurn || d.Items[0].Transcript {
		t.Fatalf("first item %+v: want a turn with no transcript to download", d.Items[0])
	}
}
