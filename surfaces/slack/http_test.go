package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestHTTPInteractivity: without Socket Mode, a signed click POSTed to the
// Handler is taken; a request with a bad signature is refused and nothing
// is recorded.
func TestHTTPInteractivity(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	s := newSurface(t, srv, &MemoryRefs{}, func(c *Config) { c.AppToken, c.SigningSecret = "", secret })
	answers := surfacetest.NewAnswers()
	set := surfacetest.SingleChoice("http")
	answers.Add(set)
	if err := s.Watch(ctx, set, answers); err != nil {
		t.Fatal(err)
	}
	m := setMessage(ctx, t, srv, set)
	payload, _ := json.Marshal(map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": alice.ID, "name": alice.Name},
		"container":  map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel},
		"trigger_id": "1.2.3",
		"actions":    []any{map[string]any{"type": "button", "block_id": blockID(set.ID, 0), "action_id": "b|1", "value": "1"}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	h := s.Handler()
	post := func(sign string) int {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(sign))
		mac.Write([]byte("v0:" + ts + ":" + body))
		req := httptest.NewRequest(http.MethodPost, "/webhooks/slack", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := post("not-the-secret"); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d", code)
	}
	if n := len(answers.Offers(set.ID)); n != 0 {
		t.Fatalf("%d offers after a forged request", n)
	}
	if code := post(secret); code != http.StatusOK {
		t.Fatalf("signed request: %d", code)
	}
	resp, err := answers.WaitFinal(ctx, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := set.Questions[0].Options[1].Label; len(resp.Answers) != 1 || len(resp.Answers[0].Labels) != 1 || resp.Answers[0].Labels[0] != want {
		t.Errorf("answer = %+v, want %q", resp.Answers, want)
	}
	if srv.Opens() != 0 {
		t.Errorf("a Socket Mode connection was opened without an app token")
	}
}

// TestNotice: a notice is posted once per key, in the run's thread.
func TestNotice(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	s := newSurface(t, srv, &MemoryRefs{}, func(c *Config) { c.ThreadPerRun = true })
	set := surfacetest.SingleChoice("notice")
	if err := s.Watch(ctx, set, surfacetest.NewAnswers()); err != nil {
		t.Fatal(err)
	}
	q := setMessage(ctx, t, srv, set)
	for range 2 {
		if err := s.Notice(ctx, set.RunID, "paused/1", "The schedule <!channel> paused itself."); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, m := range srv.Messages() {
		if strings.Contains(m.Text, "paused itself") {
			n++
			if m.ThreadTS != q.ThreadTS || strings.Contains(m.Text, "<!channel>") {
				t.Errorf("notice %+v: want it in the run's thread, without a mention", m)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d notices posted, want 1", n)
	}
}

// TestRunEndedLinksPullRequest: the run's end, said in its thread, carries
// the pull request's link, once; a URL that is not http(s) is left out.
func TestRunEndedLinksPullRequest(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	s := newSurface(t, srv, &MemoryRefs{}, func(c *Config) { c.ThreadPerRun = true })
	set := surfacetest.SingleChoice("ended")
	if err := s.Watch(ctx, set, surfacetest.NewAnswers()); err != nil {
		t.Fatal(err)
	}
	q := setMessage(ctx, t, srv, set)
	const pr = "https://github.com/acme/app/pull/7"
	end := surfaces.RunProgress{RunID: set.RunID, Step: "done", Final: true, Summary: "All tests pass.", PRURL: pr}
	for range 2 {
		if err := s.RunEnded(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, m := range srv.Messages() {
		if strings.Contains(m.Text, "The run done") {
			n++
			if m.ThreadTS != q.ThreadTS || !strings.Contains(m.Text, "Pull request: <"+pr+">") {
				t.Errorf("end message %+v: want it in the run's thread with the link to %s", m, pr)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d end messages posted, want 1", n)
	}
	if got := progressText(end); !strings.Contains(got, "<"+pr+">") {
		t.Errorf("final progress %q: want the link to %s", got, pr)
	}
	for _, bad := range []string{"javascript:alert(1)", "https://x/a|b", "https://x/<!channel>"} {
		if got := prLink(bad); got != "" {
			t.Errorf("prLink(%q) = %q, want nothing", bad, got)
		}
	}
}
