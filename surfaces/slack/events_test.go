package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// httpApp serves s's interactivity and Events API endpoints as serve
// mounts them, and points the fake Slack at them.
func httpApp(ctx context.Context, t *testing.T, srv *slacktest.Server, s *Surface, opts ...slacktest.HTTPOption) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/slack", s.Handler())
	mux.Handle("POST /webhooks/slack/events", s.EventsHandler())
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	if err := srv.UseHTTP(ctx, app.URL+"/webhooks/slack/events", app.URL+"/webhooks/slack", opts...); err != nil {
		t.Fatal(err)
	}
	return app
}

// TestEventsAPIMention: without Socket Mode, the fake verifies the Events
// API URL (url_verification), and a signed app_mention POSTed there is
// handed to Start as a Socket Mode one is, its reply said in its thread;
// a retry of it (X-Slack-Retry-Num) has the same key, so it starts
// nothing more; a click on a question comes over HTTP too; a request
// with a bad signature is refused 401 and starts nothing.
func TestEventsAPIMention(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	s := newSurface(t, srv, &MemoryRefs{}, func(c *Config) { c.AppToken, c.SigningSecret = "", srv.SigningSecret() })
	h := &mentions{}
	s.HandleMentions(h)
	app := httpApp(ctx, t, srv, s)

	top := srv.PostAsUser(alice, "", "<@"+slacktest.BotUserID+"> run fix-bug please")
	ev := slacktest.AppMention("Ev0HTTP001", alice, top, "")
	if _, err := srv.Send("events_api", ev, false); err != nil {
		t.Fatal(err)
	}
	reply, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Started run") })
	if err != nil {
		t.Fatal(err)
	}
	if reply.ThreadTS != top.TS {
		t.Errorf("reply %+v: want it in the mention's thread %s", reply, top.TS)
	}
	// Slack's retry of the same event: answered 200, started once.
	body := []byte(`{"token":"x","team_id":"` + slacktest.TeamID + `","api_app_id":"` + slacktest.AppID + `","type":"event_callback","event_id":"Ev0HTTP001","event_time":1700000000,` +
		`"event":{"type":"app_mention","user":"` + alice.ID + `","text":"<@` + slacktest.BotUserID + `> run fix-bug please","ts":"` + top.TS + `","channel":"` + slacktest.ChannelID + `","event_ts":"` + top.TS + `"}}`)
	post := func(secret string, header map[string]string) int {
		t.Helper()
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req, _ := http.NewRequest(http.MethodPost, app.URL+"/webhooks/slack/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", slacktest.Sign(secret, ts, body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(srv.SigningSecret(), map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}); code != http.StatusOK {
		t.Errorf("a retry: %d, want 200", code)
	}
	if code := post("not-the-signing-secret", nil); code != http.StatusUnauthorized {
		t.Errorf("a bad signature: %d, want 401", code)
	}
	// A last event, handled after the others: their handling is over
	// when it shows.
	last := srv.PostAsUser(alice, "", "<@"+slacktest.BotUserID+"> tidy the docs")
	if _, err := srv.Send("events_api", slacktest.AppMention("Ev0HTTP002", alice, last, ""), false); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(ctx, func() bool { n, _ := h.counts(); return n == 2 }); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	started := append([]Mention(nil), h.started...)
	h.mu.Unlock()
	if started[0].Key() != "slack:event:Ev0HTTP001" || started[1].EventID != "Ev0HTTP002" {
		t.Errorf("started = %+v, want Ev0HTTP001 then Ev0HTTP002, once each", started)
	}
	if d := srv.Deliveries(); len(d) != 2 || d[0].Status != http.StatusOK || d[0].RetryNum != 0 {
		t.Errorf("deliveries = %+v, want two answered 200 at once", d)
	}

	// The question of a run is answered by a click over HTTP.
	answers := surfacetest.NewAnswers()
	set := surfacetest.SingleChoice("http-events")
	answers.Add(set)
	if err := s.Watch(ctx, set, answers); err != nil {
		t.Fatal(err)
	}
	q := setMessage(ctx, t, srv, set)
	if _, err := srv.ClickButton(alice, q.TS, set.Questions[0].Options[0].Label); err != nil {
		t.Fatal(err)
	}
	if _, err := answers.WaitFinal(ctx, set.ID); err != nil {
		t.Fatal(err)
	}
}

// TestEventsAPIVerification: the endpoint answers url_verification with
// its challenge, refuses a bad signature or a stale timestamp with 401,
// a body that is not an event with 400, and takes an event it does not
// read (one subscribed to by mistake) with 200, lest Slack retry it.
func TestEventsAPIVerification(t *testing.T) {
	t.Parallel()
	srv := slacktest.NewServer(t)
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	s := newSurface(t, srv, &MemoryRefs{}, func(c *Config) { c.AppToken, c.SigningSecret = "", secret })
	h := s.EventsHandler()
	post := func(sign string, at time.Time, body string) (int, string) {
		ts := strconv.FormatInt(at.Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, "/webhooks/slack/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", slacktest.Sign(sign, ts, []byte(body)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	now := time.Now()
	verify := `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	if code, body := post(secret, now, verify); code != http.StatusOK || body != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("url_verification: %d %q, want 200 and the challenge", code, body)
	}
	if code, _ := post("wrong", now, verify); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", code)
	}
	if code, _ := post(secret, now.Add(-6*time.Minute), verify); code != http.StatusUnauthorized {
		t.Errorf("a timestamp six minutes old: %d, want 401", code)
	}
	if code, _ := post(secret, now, "not json"); code != http.StatusBadRequest {
		t.Errorf("not an event: %d, want 400", code)
	}
	other := `{"token":"x","type":"event_callback","event_id":"Ev1","event":{"type":"no_such_event_type"}}`
	if code, _ := post(secret, now, other); code != http.StatusOK {
		t.Errorf("an event not read: %d, want 200", code)
	}
	off := newSurface(t, srv, &MemoryRefs{}) // Socket Mode: no endpoint
	rec := httptest.NewRecorder()
	off.EventsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhooks/slack/events", strings.NewReader(verify)))
	if rec.Code != http.StatusNotFound {
		t.Errorf("without a signing secret: %d, want 404", rec.Code)
	}
}

// TestFakeEventRetries: the fake retries an event as Slack does: after a
// non-2xx answer with reason http_error, after three seconds without an
// answer with reason http_timeout (not waiting for the slow request),
// numbering the retries 1, 2, 3, and gives up after the third.
func TestFakeEventRetries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	var mu sync.Mutex
	var seen []string
	release := make(chan struct{})
	mode := "verify"
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		m := mode
		seen = append(seen, r.Header.Get("X-Slack-Retry-Num")+"/"+r.Header.Get("X-Slack-Retry-Reason"))
		n := len(seen)
		mu.Unlock()
		switch {
		case m == "verify":
			w.Write([]byte(`{"challenge":"` + challengeOf(t, r) + `"}`))
		case m == "fail":
			w.WriteHeader(http.StatusInternalServerError)
		case m == "slow" && n == 2:
			<-release // the first event delivery never answers in time
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(app.Close)
	t.Cleanup(func() { close(release) }) // before app.Close
	if err := srv.UseHTTP(ctx, app.URL, app.URL, slacktest.WithRetryDelays(0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	top := srv.PostAsUser(alice, "", "<@"+slacktest.BotUserID+"> hi")
	mu.Lock()
	mode, seen = "slow", nil
	seen = append(seen, "verify done")
	mu.Unlock()
	if _, err := srv.Send("events_api", slacktest.AppMention("Ev0SLOW", alice, top, ""), false); err != nil {
		t.Fatalf("a slow first attempt, then a retry answered: %v", err)
	}
	d := srv.Deliveries()
	if len(d) != 2 || d[0].Status != 0 || d[1].RetryNum != 1 || d[1].Reason != "http_timeout" || d[1].Status != http.StatusOK {
		t.Errorf("deliveries = %+v, want a timeout, then retry 1 http_timeout answered 200", d)
	}
	mu.Lock()
	mode, seen = "fail", nil
	mu.Unlock()
	if _, err := srv.Send("events_api", slacktest.AppMention("Ev0FAIL", alice, top, ""), false); err != slacktest.ErrNoAck {
		t.Fatalf("an endpoint that always fails: %v, want ErrNoAck", err)
	}
	mu.Lock()
	got := strings.Join(seen, " ")
	mu.Unlock()
	if got != "/ 1/http_error 2/http_error 3/http_error" {
		t.Errorf("attempts (retry num/reason) = %s, want the first then three retries", got)
	}
}

// challengeOf reads a url_verification's challenge.
func challengeOf(t *testing.T, r *http.Request) string {
	var b bytes.Buffer
	b.ReadFrom(r.Body)
	s := b.String()
	i := strings.Index(s, `"challenge":"`)
	if i < 0 {
		t.Errorf("no challenge in %s", s)
		return ""
	}
	s = s[i+len(`"challenge":"`):]
	return s[:strings.Index(s, `"`)]
}

// memInbox is an EventInbox in memory; fail makes Keep fail that many
// times.
type memInbox struct {
	mu     sync.Mutex
	kept   []KeptEvent
	fail   int
	bodies []string // every body kept
}

func (m *memInbox) Keep(_ context.Context, key string, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail > 0 {
		m.fail--
		return errors.New("the store is away")
	}
	for _, k := range m.kept {
		if k.Key == key {
			return nil
		}
	}
	m.kept = append(m.kept, KeptEvent{Key: key, Body: body})
	m.bodies = append(m.bodies, string(body))
	return nil
}

func (m *memInbox) Drop(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kept = slices.DeleteFunc(m.kept, func(k KeptEvent) bool { return k.Key == key })
	return nil
}

func (m *memInbox) Kept(context.Context) ([]KeptEvent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.kept), nil
}

func (m *memInbox) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.kept)
}

// TestEventsAPIInbox: a mention is kept before Slack gets its 200 and
// dropped once its work ran; one that cannot be kept gets a 500, so Slack
// retries it (http_error) and it starts its run then; one kept from
// before a restart is handed to the handler when it is set, once.
func TestEventsAPIInbox(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	top := srv.PostAsUser(alice, "", "<@"+slacktest.BotUserID+"> run fix-bug")
	old := srv.PostAsUser(alice, "", "<@"+slacktest.BotUserID+"> run before-the-crash")
	body, _ := json.Marshal(slacktest.AppMention("Ev0KEPT01", alice, old, ""))
	inbox := &memInbox{kept: []KeptEvent{{Key: "Ev0KEPT01", Body: body}}, fail: 1}
	s := newSurface(t, srv, &MemoryRefs{}, func(c *Config) { c.AppToken, c.SigningSecret, c.Inbox = "", srv.SigningSecret(), inbox })
	h := &mentions{}
	s.HandleMentions(h)
	if err := until(ctx, func() bool { n, _ := h.counts(); return n == 1 && inbox.len() == 0 }); err != nil {
		t.Fatalf("the kept mention was not taken on start: %v", err)
	}
	httpApp(ctx, t, srv, s, slacktest.WithRetryDelays(0, 0, 0))
	if _, err := srv.Send("events_api", slacktest.AppMention("Ev0FAILS01", alice, top, ""), false); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, func() bool { n, _ := h.counts(); return n == 2 && inbox.len() == 0 }); err != nil {
		t.Fatal(err)
	}
	d := srv.Deliveries()
	if len(d) != 2 || d[0].Status != http.StatusInternalServerError || d[1].RetryNum != 1 || d[1].Reason != "http_error" || d[1].Status != http.StatusOK {
		t.Errorf("deliveries = %+v, want a 500 (not kept), then retry 1 answered 200", d)
	}
	h.mu.Lock()
	started := append([]Mention(nil), h.started...)
	h.mu.Unlock()
	if started[0].EventID != "Ev0KEPT01" || started[1].EventID != "Ev0FAILS01" {
		t.Errorf("started = %+v, want the kept mention, then the retried one", started)
	}
	inbox.mu.Lock()
	defer inbox.mu.Unlock()
	if len(inbox.bodies) != 1 || strings.Contains(inbox.bodies[0], "fake-verification-token") || !strings.Contains(inbox.bodies[0], `"event_id":"Ev0FAILS01"`) {
		t.Errorf("kept bodies = %q, want the event without its verification token", inbox.bodies)
	}
}

// until looks at cond every 10ms until it holds or ctx ends (what it
// watches tells nobody of its changes).
func until(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// BenchmarkEventsHandler is the time to answer Slack for a signed
// app_mention (verify, parse, keep in an inbox, 200): Slack wants it
// within three seconds.
func BenchmarkEventsHandler(b *testing.B) {
	srv := slacktest.NewServer(b)
	s, err := New(Config{BotToken: srv.BotToken(), SigningSecret: srv.SigningSecret(), ChannelID: slacktest.ChannelID, APIURL: srv.APIURL(), Inbox: &memInbox{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	s.HandleMentions(&mentions{})
	h := s.EventsHandler()
	m := slacktest.Message{Channel: "C0ELSEWHERE", TS: "1700000000.000100", Text: "<@" + slacktest.BotUserID + "> run x"}
	b.ResetTimer()
	for i := range b.N {
		body, _ := json.Marshal(slacktest.AppMention("Ev"+strconv.Itoa(i), alice, m, ""))
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, "/webhooks/slack/events", bytes.NewReader(body))
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", slacktest.Sign(srv.SigningSecret(), ts, body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
