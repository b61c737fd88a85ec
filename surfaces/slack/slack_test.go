package slack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

const timeout = time.Minute

var (
	alice   = slacktest.User{ID: "U0ALICE001", Name: "alice"}
	bob     = slacktest.User{ID: "U0BOB00001", Name: "bob"}
	mallory = slacktest.User{ID: "U0MALLORY1", Name: "mallory"}
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// logBuffer collects a surface's log, to check no token reaches it.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func logTo(l *logBuffer) io.Writer {
	if os.Getenv("SLACK_TEST_LOG") != "" {
		return io.MultiWriter(l, os.Stderr)
	}
	return l
}

func newSurface(t *testing.T, srv *slacktest.Server, refs Refs, opts ...func(*Config)) *Surface {
	t.Helper()
	var logs logBuffer
	cfg := Config{
		BotToken: srv.BotToken(), AppToken: srv.AppToken(), ChannelID: slacktest.ChannelID,
		AllowUsers: []string{alice.ID}, AllowGroups: []string{"S0GROUP001"},
		APIURL: srv.APIURL(), Refs: refs,
		Logger: slog.New(slog.NewTextHandler(logTo(&logs), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		out := logs.String()
		if strings.Contains(out, srv.BotToken()) || strings.Contains(out, srv.AppToken()) || strings.Contains(out, "xoxb-") || strings.Contains(out, "xapp-") {
			t.Errorf("a Slack token reached the log:\n%s", out)
		}
	})
	return s
}

// setMessage waits for the message of set.
func setMessage(ctx context.Context, t *testing.T, srv *slacktest.Server, set questions.Set) slacktest.Message {
	t.Helper()
	m, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool {
		return isSetMessage(m, set)
	})
	if err != nil {
		t.Errorf("no message for set %s: %v", set.ID, err)
	}
	return m
}

// act gives answer a to question idx of set as u: a button, a menu, or
// the "Other…" form. It retries while the click cannot be delivered (the
// surface not connected yet).
func act(ctx context.Context, t *testing.T, srv *slacktest.Server, u slacktest.User, m slacktest.Message, q questions.Question, a questions.Answer) {
	t.Helper()
	for {
		var err error
		switch {
		case a.Text != "":
			label := "Other…"
			if len(q.Options) == 0 {
				label = "Answer…"
			}
			var tr string
			if tr, err = srv.ClickButton(u, m.TS, label); err == nil {
				if !allowedUser(u) {
					return // no form opens for a stranger
				}
				v, werr := srv.WaitView(ctx, tr)
				if werr != nil {
					t.Errorf("no form opened: %v", werr)
					return
				}
				_, err = srv.SubmitView(u, v, a.Text)
			}
		case q.MultiSelect || len(q.Options) > maxButtons:
			_, err = srv.Choose(u, m.TS, a.Labels...)
		default:
			_, err = srv.ClickButton(u, m.TS, a.Labels[0])
		}
		if err == nil {
			return
		}
		if err != slacktest.ErrNotConnected && err != slacktest.ErrNoAck {
			t.Errorf("%s answering %s: %v", u.Name, q.ID, err)
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s answering %s: %v", u.Name, q.ID, err)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// isSetMessage reports whether m is the message of set (its metadata
// names the set).
func isSetMessage(m slacktest.Message, set questions.Set) bool {
	var md struct {
		Payload struct {
			SetID string `json:"set_id"`
		} `json:"event_payload"`
	}
	return json.Unmarshal(m.Metadata, &md) == nil && md.Payload.SetID == set.ID
}

func allowedUser(u slacktest.User) bool { return u.ID == alice.ID || u.ID == bob.ID }

// texts collects the text fields of blocks.
func texts(raw json.RawMessage) string {
	var v any
	json.Unmarshal(raw, &v)
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["text"].(string); ok {
				b.WriteString(s + "\n")
			}
			for k, x := range v {
				if k != "text" {
					walk(x)
				} else if _, ok := x.(string); !ok {
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return b.String()
}

func TestConformance(t *testing.T) { conformance(t) }

// TestConformanceThreadPerRun runs the suite with a thread per run: the
// questions, the run's status and its end in the run's thread.
func TestConformanceThreadPerRun(t *testing.T) {
	conformance(t, func(c *Config) { c.ThreadPerRun = true })
}

func conformance(t *testing.T, opts ...func(*Config)) {
	srv := slacktest.NewServer(t)
	srv.SetGroup("S0GROUP001", bob.ID)
	refs := &MemoryRefs{}
	answerAs := func(u slacktest.User) func(*testing.T, questions.Set, []questions.Answer) {
		return func(t *testing.T, set questions.Set, answers []questions.Answer) {
			ctx := testCtx(t)
			m := setMessage(ctx, t, srv, set)
			for i, q := range set.Questions {
				act(ctx, t, srv, u, m, q, answers[i])
			}
		}
	}
	// A new surface is a restart: the previous process is gone, as Slack
	// hands each envelope to one of the app's connections.
	var last *Surface
	surfacetest.Run(t, surfacetest.Backend{
		New: func(t *testing.T) surfaces.Surface {
			if last != nil {
				last.Close()
			}
			last = newSurface(t, srv, refs, opts...)
			return last
		},
		Answer:  answerAs(bob), // allowed through the user group
		Intrude: answerAs(mallory),
		Posted: func(t *testing.T, set questions.Set) int {
			n := 0
			for _, m := range srv.Messages() {
				if isSetMessage(m, set) {
					n++
				}
			}
			return n
		},
		Shown: func(_ *testing.T, set questions.Set) string {
			var b strings.Builder
			ts, thread := "", ""
			for _, m := range srv.Messages() {
				if isSetMessage(m, set) {
					b.WriteString(m.Text + "\n" + texts(m.Blocks))
					ts, thread = m.TS, m.ThreadTS
				}
			}
			for _, m := range srv.Messages() {
				// Replies to the question, or in its run's thread
				// (reminders, the run's status and end).
				if ts != "" && (m.ThreadTS == ts || (thread != "" && m.ThreadTS == thread && m.Metadata == nil)) {
					b.WriteString(m.Text + "\n")
				}
			}
			for _, e := range srv.Ephemerals() {
				b.WriteString(e.Text + "\n")
			}
			return b.String()
		},
		Person:   "bob",
		Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true},
		Timeout:  timeout,
		Transient: func(*testing.T, questions.Set) {
			srv.RateLimit("chat.update", 1)
		},
	})
}
