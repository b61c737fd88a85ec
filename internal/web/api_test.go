package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
	return v
}

func TestAPIPendingListsEverySetNewestFirst(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do(nil, "GET", "/api/pending", "", bearer(aliceToken))
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", r.status, r.header.Get("Content-Type"))
	}
	got := decode[struct {
		V       int      `json:"v"`
		Pending []apiSet `json:"pending"`
	}](t, r)
	if got.V != 1 || len(got.Pending) != 2 || got.Pending[0].ID != "r2-s1b2c3d4e5f6" || got.Pending[1].ID != "r1-s9f3e2d1c0ab" {
		t.Fatalf("pending = %+v, want r2-s1b2c3d4e5f6 then r1-s9f3e2d1c0ab", got)
	}
	s := got.Pending[1]
	if s.RunID != "r1" || s.State != "pending" || s.CreatedAt == nil || s.CreatedAt.Format(time.RFC3339) != "2026-11-23T20:02:00Z" || strings.Join(s.Surfaces, ",") != "terminal,github" ||
		len(s.Questions) != 1 || s.Questions[0].ID != "qa1" || len(s.Questions[0].Options) != 2 || s.Questions[0].Answered {
		t.Fatalf("set = %+v", s)
	}
	q := got.Pending[0].Questions
	if !q[0].MultiSelect || !q[1].FreeText {
		t.Fatalf("multi_select / free_text not set: %+v", q)
	}
	// snake_case only, and nothing of a run's options.
	for _, bad := range []string{"multiSelect", "freeText", "options\":null", "RunID"} {
		if strings.Contains(r.body, bad) {
			t.Errorf("body has %q", bad)
		}
	}
}

func TestAPIRunsFilters(t *testing.T) {
	f := newFixture(t, nil)
	type runs struct {
		V    int      `json:"v"`
		Runs []apiRun `json:"runs"`
	}
	ids := func(path string) string {
		got := decode[runs](t, f.do(nil, "GET", path, "", bearer(aliceToken)))
		if got.V != 1 {
			t.Fatalf("%s: v = %d", path, got.V)
		}
		var out []string
		for _, r := range got.Runs {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	for path, want := range map[string]string{
		"/api/runs":                             "r2,r1,r3",
		"/api/runs?status=waiting":              "r2,r1",
		"/api/runs?status=done":                 "r3",
		"/api/runs?spec=nightly":                "r1,r3",
		"/api/runs?spec=nightly&status=waiting": "r1",
		"/api/runs?status=failed":               "",
	} {
		if got := ids(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	got := decode[runs](t, f.do(nil, "GET", "/api/runs?status=done", "", bearer(aliceToken)))
	if r := got.Runs[0]; r.CostUSD != 0.5 || r.Turns != 2 || r.Spec != "nightly" || r.CreatedAt.Format(time.RFC3339) != "2026-11-23T19:00:00Z" {
		t.Fatalf("run = %+v", r)
	}
}

func TestAPIRunHasTimelineAndDecisions(t *testing.T) {
	f := newFixture(t, nil)
	run := f.be.runs["r3"]
	set := questions.Set{ID: "r3-1", RunID: "r3", Turn: 1, Questions: []questions.Question{authQuestion()}}
	resp := questions.Response{SetID: "r3-1", By: "bob", Surface: "github", Answers: []questions.Answer{{QuestionID: "qa1", Labels: []string{"JWT"}}}}
	run.Items = []Item{{Kind: ItemTurn, Turn: 1, Text: "start", Transcript: true}, {Kind: ItemText, Turn: 1, Text: "I need a decision."},
		{Kind: ItemTool, Turn: 1, Tool: "Bash", Text: `{"command":"ls"}`}, {Kind: ItemQuestion, Turn: 1, Set: &set},
		{Kind: ItemAnswer, Turn: 1, Set: &set, Response: &resp}, {Kind: ItemResult, Turn: 1, Text: "success", CostUSD: 0.25}}
	run.Decisions = []DecisionEntry{{SetID: "r3-1", Header: "Auth", Question: "Which auth method?", State: "resumed", Answer: "JWT", By: "bob", Surface: "github"}}
	run.Links = []Link{{Label: "GitHub issue #1", URL: "https://github.com/acme/app/issues/1"}}
	run.FinalText = "Implemented with JWT."
	r := f.do(nil, "GET", "/api/runs/r3", "", bearer(aliceToken))
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	got := decode[struct {
		V         int           `json:"v"`
		Run       apiRun        `json:"run"`
		FinalText string        `json:"final_text"`
		Timeline  []apiItem     `json:"timeline"`
		Decisions []apiDecision `json:"decisions"`
		Links     []apiLink     `json:"links"`
	}](t, r)
	if got.V != 1 || got.Run.ID != "r3" || got.Run.Status != "done" || got.FinalText != "Implemented with JWT." || len(got.Timeline) != 6 ||
		got.Timeline[0].Transcript != "/runs/r3/transcripts/1" || got.Timeline[2].Tool != "Bash" || got.Timeline[4].Response.By != "bob" ||
		len(got.Decisions) != 1 || got.Decisions[0].Answer != "JWT" || len(got.Links) != 1 {
		t.Fatalf("run = %+v", got)
	}
	if r := f.do(nil, "GET", "/api/runs/nope", "", bearer(aliceToken)); r.status != 404 || !strings.Contains(r.body, `"error"`) {
		t.Fatalf("unknown run: %d %s", r.status, r.body)
	}
}

func TestAPIAnswerTakenInvalidTooLateAndErrors(t *testing.T) {
	f := newFixture(t, nil)
	post := func(body string) (result, answerResult) {
		r := f.do(nil, "POST", "/api/answer", body, map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json"})
		if r.status == 200 || r.status == 409 || r.status == 422 || r.status == 404 || r.status == 400 {
			return r, decode[answerResult](t, r)
		}
		t.Fatalf("POST %s: %d %s", body, r.status, r.body)
		return r, answerResult{}
	}
	// Invalid: the reason comes back and the set stays open.
	for body, reason := range map[string]string{
		`{"set_id":"r1-s9f3e2d1c0ab","answers":[{"question_id":"qa1","labels":["Basic"]}]}`:                     `chooses "Basic", which is not an option`,
		`{"set_id":"r1-s9f3e2d1c0ab","answers":[{"question_id":"qa1","labels":["JWT","OAuth2"]}]}`:              "it takes one",
		`{"set_id":"r1-s9f3e2d1c0ab","answers":[]}`:                                                             "0 answers for 1 questions",
		`{"set_id":"r1-s9f3e2d1c0ab","answers":[{"question_id":"qa1","text":"my own"}]}`:                        "takes options only",
		`{"set_id":"r2-s1b2c3d4e5f6","answers":[{"question_id":"qb1","labels":["chi"]},{"question_id":"qb2"}]}`: "is empty",
	} {
		r, res := post(body)
		if r.status != 422 || res.V != 1 || res.Taken || !strings.Contains(res.Error, reason) {
			t.Errorf("%s: %d %+v, want 422 with %q", body, r.status, res, reason)
		}
	}
	if f.be.final("r1-s9f3e2d1c0ab") != nil {
		t.Fatal("an invalid answer was taken")
	}
	// Too long: refused before the backend.
	long := strings.Repeat("x", 101)
	if r, res := post(`{"set_id":"r2-s1b2c3d4e5f6","answers":[{"question_id":"qb1","labels":["chi"]},{"question_id":"qb2","text":"` + long + `"}]}`); r.status != 422 || !strings.Contains(res.Error, "at most 100") {
		t.Errorf("too long: %d %+v", r.status, res)
	}
	// Malformed requests.
	for body, status := range map[string]int{
		`not json`:                               400,
		`{"set_id":"r1-s9f3e2d1c0ab","extra":1}`: 400,
		`{"answers":[]}`:                         400,
		`{"set_id":"nope","answers":[{"question_id":"q","labels":["a"]}]}`: 404,
	} {
		if r, res := post(body); r.status != status || res.Error == "" {
			t.Errorf("%s: %d %+v, want %d with an error", body, r.status, res, status)
		}
	}
	// Taken: by the token's user, on the web; a multi-select and free text.
	r, res := post(`{"set_id":"r2-s1b2c3d4e5f6","answers":[{"question_id":"qb2","text":"store"},{"question_id":"qb1","labels":["chi","sqlc"]}]}`)
	if r.status != 200 || !res.Taken || !res.Closed || res.Final == nil || res.Final.By != "alice" || res.Final.Surface != "web" {
		t.Fatalf("taken: %d %+v", r.status, res)
	}
	got := f.be.final("r2-s1b2c3d4e5f6")
	if got.By != "alice" || got.Surface != "web" || got.At.IsZero() || strings.Join(got.Answers[0].Labels, ",") != "chi,sqlc" || got.Answers[1].Text != "store" {
		t.Fatalf("recorded %+v", got)
	}
	// Too late: answered elsewhere first.
	f.be.answerElsewhere(questions.Response{SetID: "r1-s9f3e2d1c0ab", By: "bob", Surface: "github", At: time.Now(),
		Answers: []questions.Answer{{QuestionID: "qa1", Labels: []string{"OAuth2"}}}})
	r, res = post(`{"set_id":"r1-s9f3e2d1c0ab","answers":[{"question_id":"qa1","labels":["JWT"]}]}`)
	if r.status != 409 || res.Taken || !res.Closed || !strings.Contains(res.Error, "answered elsewhere by bob on github") || res.Final.Answers[0].Labels[0] != "OAuth2" {
		t.Fatalf("too late: %d %+v", r.status, res)
	}
}

func TestAPIAnswerWithSessionNeedsCSRFHeader(t *testing.T) {
	f := newFixture(t, nil)
	c, csrf := f.signIn(bobToken)
	body := `{"set_id":"r1-s9f3e2d1c0ab","answers":[{"question_id":"qa1","labels":["JWT"]}]}`
	r := f.do(c, "POST", "/api/answer", body, map[string]string{"Content-Type": "application/json", "X-CSRF-Token": csrf})
	if r.status != 200 || f.be.final("r1-s9f3e2d1c0ab").By != "bob" {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestAPICancel(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do(nil, "POST", "/api/runs/r1/cancel", "", bearer(aliceToken))
	got := decode[struct {
		V   int    `json:"v"`
		Run apiRun `json:"run"`
	}](t, r)
	if r.status != 200 || got.V != 1 || got.Run.Status != "cancelled" || got.Run.Error != "cancelled by alice on the web" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if r := f.do(nil, "POST", "/api/runs/r1/cancel", "", bearer(aliceToken)); r.status != http.StatusConflict || !strings.Contains(r.body, "already ended") {
		t.Fatalf("cancel again: %d %s", r.status, r.body)
	}
	if r := f.do(nil, "POST", "/api/runs/nope/cancel", "", bearer(aliceToken)); r.status != http.StatusNotFound {
		t.Fatalf("cancel unknown: %d %s", r.status, r.body)
	}
}

func TestTranscriptDownloadRedactsSecrets(t *testing.T) {
	f := newFixture(t, nil)
	f.be.transcript = `{"type":"assistant","text":"key sk-ant-api03-abcdefghijklmnopqrstuvwxyz"}` + "\n"
	r := f.do(nil, "GET", "/runs/r1/transcripts/1", "", bearer(aliceToken))
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Disposition"), `r1-1.ndjson`) || strings.Contains(r.body, "sk-ant-api03") || !strings.Contains(r.body, "[REDACTED]") {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	if r := f.do(nil, "GET", "/runs/r1/transcripts/9", "", bearer(aliceToken)); r.status != 404 {
		t.Fatalf("unknown turn: %d", r.status)
	}
}

func TestRunEventsStreamUpdatesUntilTheRunEnds(t *testing.T) {
	f := newFixture(t, nil)
	req, _ := http.NewRequest("GET", f.ts.URL+"/runs/r1/events", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.be.mu.Lock()
		f.be.runs["r1"].Items = append(f.be.runs["r1"].Items, Item{Kind: ItemText, Turn: 2, Text: "Implemented with <b>JWT</b>."})
		f.be.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		f.be.mu.Lock()
		f.be.runs["r1"].Status = "done"
		f.be.mu.Unlock()
	}()
	b := new(strings.Builder)
	buf := make([]byte, 4096)
	for !strings.Contains(b.String(), "event: end") {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	s := b.String()
	if strings.Count(s, "event: update") < 3 || !strings.Contains(s, "Implemented with") || strings.Contains(s, "<b>JWT") || !strings.Contains(s, "event: end") {
		t.Fatalf("stream:\n%s", s)
	}
	for _, line := range strings.Split(s, "\n") {
		if line != "" && !strings.HasPrefix(line, "event: ") && !strings.HasPrefix(line, "data: ") && !strings.HasPrefix(line, ":") {
			t.Fatalf("malformed event line %q", line)
		}
	}
}

// fakeResumer resumes the fake backend's interrupted runs.
type fakeResumer struct{ be *fakeBackend }

func (f fakeResumer) Resume(ctx context.Context, runID, by string) error {
	f.be.mu.Lock()
	defer f.be.mu.Unlock()
	r, ok := f.be.runs[runID]
	if !ok {
		return fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	if r.Status != "interrupted" {
		return fmt.Errorf("run %s is %s: %w", runID, r.Status, ErrNotResumable)
	}
	r.Status = "running"
	return nil
}

func TestAPIResume(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.do(nil, "POST", "/api/runs/r3/resume", "", bearer(aliceToken)); r.status != http.StatusNotFound {
		t.Fatalf("resume without a Resumer: %d", r.status)
	}
	f = newFixture(t, func(c *Config) { c.Resume = fakeResumer{c.Backend.(*fakeBackend)} })
	f.be.runs["r3"].Status = "interrupted"
	page := f.do(nil, "GET", "/runs/r3", "", bearer(aliceToken))
	if !strings.Contains(page.body, `id="resume"`) {
		t.Fatal("no resume button on an interrupted run's page")
	}
	r := f.do(nil, "POST", "/api/runs/r3/resume", "", bearer(aliceToken))
	got := decode[struct {
		V   int    `json:"v"`
		Run apiRun `json:"run"`
	}](t, r)
	if r.status != 200 || got.Run.Status != "running" {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if r := f.do(nil, "POST", "/api/runs/r3/resume", "", bearer(aliceToken)); r.status != http.StatusConflict || !strings.Contains(r.body, "cannot be resumed now") {
		t.Fatalf("resume a running run: %d %s", r.status, r.body)
	}
	if r := f.do(nil, "POST", "/api/runs/nope/resume", "", bearer(aliceToken)); r.status != http.StatusNotFound {
		t.Fatalf("resume unknown: %d", r.status)
	}
	// The form needs the CSRF token.
	c, csrf := f.signIn(aliceToken)
	f.be.runs["r3"].Status = "interrupted"
	body, h := form(url.Values{"csrf": {"wrong"}})
	if r := f.do(c, "POST", "/runs/r3/resume", body, h); r.status != http.StatusForbidden {
		t.Fatalf("resume form without the token: %d", r.status)
	}
	body, h = form(url.Values{"csrf": {csrf}})
	if r := f.do(c, "POST", "/runs/r3/resume", body, h); r.status != 200 || !strings.Contains(r.body, "Run resumed.") {
		t.Fatalf("resume form: %d", r.status)
	}
}
