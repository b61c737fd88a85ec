package discord

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// wantFatal checks that err and the surface's Health both say the gateway
// closed with code, naming what to change, and that err wraps
// surfaces.ErrUnavailable.
func wantFatal(t *testing.T, s *Surface, err error, code string, fix string) {
	t.Helper()
	if !errors.Is(err, surfaces.ErrUnavailable) {
		t.Fatalf("Ask: %v, want an error wrapping ErrUnavailable", err)
	}
	h := s.Health()
	for _, e := range []error{err, h} {
		if e == nil || !strings.Contains(e.Error(), code) || !strings.Contains(e.Error(), fix) {
			t.Errorf("error %q, want the close code %s and %q", e, code, fix)
		}
	}
}

// errorLines counts the ERROR lines of a surface's log.
func errorLines(logs *syncBuffer) int {
	return strings.Count(logs.String(), "level=ERROR")
}

func logTo(b *syncBuffer) func(*Config) {
	return func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(b, nil)) }
}

// TestGatewayBadTokenIsFinal: Discord refuses a wrong token: 401 to the
// gateway lookup, or a close with 4004 to the identify (a token reset in
// between). The Ask fails at once with the reason, the surface is unhealthy
// saying to fix the token, one error is logged, and no Ask after connects
// again.
func TestGatewayBadTokenIsFinal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, code string
		dials      int
		mod        func(*discordtest.Server, *Config)
	}{
		{"lookup", "401", 0, func(srv *discordtest.Server, c *Config) { c.Token = "not-" + srv.Token() }},
		{"identify", "4004", 1, func(srv *discordtest.Server, c *Config) { srv.RefuseGateway(4004, "Authentication failed.") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := discordtest.NewServer(t)
			logs := &syncBuffer{}
			s := newSurface(t, srv, nil, logTo(logs), func(c *Config) { tc.mod(srv, c) })
			ctx := testCtx(t)
			lookups := func() int { return srv.CountRequests("GET", "/gateway") }
			for _, id := range []string{"bad-token", "bad-token-2"} {
				err := s.Ask(ctx, surfacetest.SingleChoice(id), surfacetest.NewAnswers())
				wantFatal(t, s, err, tc.code, "bot token")
			}
			if n := srv.Dials(""); n != tc.dials {
				t.Errorf("%d gateway connections, want %d (none after the refusal)", n, tc.dials)
			}
			if n := lookups(); n != 1 {
				t.Errorf("%d gateway lookups, want 1", n)
			}
			if n := errorLines(logs); n != 1 {
				t.Errorf("%d error lines, want 1:\n%s", n, logs)
			}
			if strings.Contains(logs.String(), srv.Token()) {
				t.Error("the log shows the token")
			}
		})
	}
}

// TestGatewayDisallowedIntentIsFinal: a bot whose Message Content intent is
// not enabled in the developer portal gets 4014 when it asks for it
// (accept_replies): the Ask fails at once saying to enable it.
func TestGatewayDisallowedIntentIsFinal(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	srv.DisallowIntents(discordtest.IntentMessageContent)
	logs := &syncBuffer{}
	s := newSurface(t, srv, nil, logTo(logs), func(c *Config) { c.AcceptReplies = true })
	ctx := testCtx(t)
	err := s.Ask(ctx, surfacetest.SingleChoice("intents"), surfacetest.NewAnswers())
	wantFatal(t, s, err, "4014", "enable the Message Content intent in the Discord developer portal")
	if n := srv.Dials(""); n != 1 {
		t.Errorf("%d gateway connections, want 1", n)
	}
	if n := errorLines(logs); n != 1 {
		t.Errorf("%d error lines, want 1:\n%s", n, logs)
	}
	// Without the intent the same bot connects.
	ok := newSurface(t, srv, nil)
	ch := asking(ctx, ok, surfacetest.SingleChoice("no-intents"))
	if err := srv.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	noResult(t, ch)
}

// TestGatewayFinalCloseWhileWaiting: a connected surface whose gateway is
// closed with a final code (the token reset meanwhile): the waiting Ask
// returns with the reason, and nothing reconnects. The same close met
// while resuming after a dropped connection stops the reconnecting too.
func TestGatewayFinalCloseWhileWaiting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		close func(*discordtest.Server)
		dials int
	}{
		{"closed", func(srv *discordtest.Server) { srv.CloseGateway(4004, "Authentication failed.") }, 1},
		{"while resuming", func(srv *discordtest.Server) {
			srv.RefuseGateway(4004, "Authentication failed.")
			srv.Drop()
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := discordtest.NewServer(t)
			logs := &syncBuffer{}
			s := newSurface(t, srv, nil, logTo(logs))
			ctx := testCtx(t)
			set := surfacetest.SingleChoice("reset")
			ch := asking(ctx, s, set)
			questionMessage(ctx, t, srv, set, set.Questions[0])
			if err := srv.WaitReady(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.Health(); err != nil {
				t.Fatalf("Health before the close: %v", err)
			}
			tc.close(srv)
			var err error
			select {
			case r := <-ch:
				err = r.err
			case <-ctx.Done():
				t.Fatal("Ask still waits after a final close")
			}
			wantFatal(t, s, err, "4004", "bot token")
			if n := srv.Dials(""); n != tc.dials {
				t.Errorf("%d gateway connections, want %d", n, tc.dials)
			}
			if n := errorLines(logs); n != 1 {
				t.Errorf("%d error lines, want 1:\n%s", n, logs)
			}
			err = s.Ask(ctx, surfacetest.SingleChoice("after"), surfacetest.NewAnswers())
			wantFatal(t, s, err, "4004", "bot token")
		})
	}
}

// TestGatewayResumesOnTheResumeURL: a dropped connection is resumed on the
// READY's resume_gateway_url, and a click made while the bot was away is
// delivered.
func TestGatewayResumesOnTheResumeURL(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("resume-url")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	if err := srv.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	srv.Drop()
	id, err := srv.ClickButton(alice, m.ID, "MySQL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitResponse(ctx, id); err != nil {
		t.Fatal(err)
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}, time.Now().Add(-timeout))
	if g, r := srv.Dials("/gateway"), srv.Dials("/resume-gateway"); g != 1 || r != 1 {
		t.Errorf("connections: %d to the gateway, %d to the resume URL; want 1 and 1", g, r)
	}
	if srv.Identifies() != 1 || srv.Resumes() != 1 {
		t.Errorf("identifies %d, resumes %d; want 1 and 1", srv.Identifies(), srv.Resumes())
	}
}

// TestFakeRefusesAResumeOnTheGatewayURL: the fake is as strict as Discord:
// a RESUME sent to the gateway URL rather than the resume URL is answered
// with op 9 (not resumable), and what was dispatched meanwhile is lost.
func TestFakeRefusesAResumeOnTheGatewayURL(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	ctx := testCtx(t)
	dial := func() *websocket.Conn {
		c, _, err := websocket.DefaultDialer.DialContext(ctx, srv.GatewayURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(timeout))
		var hello struct{ Op int }
		if err := c.ReadJSON(&hello); err != nil || hello.Op != 10 {
			t.Fatalf("hello: %+v %v", hello, err)
		}
		return c
	}
	c := dial()
	if err := c.WriteJSON(map[string]any{"op": 2, "d": map[string]any{"token": "Bot " + srv.Token(), "intents": 1}}); err != nil {
		t.Fatal(err)
	}
	var ready struct {
		T string
		D struct {
			SessionID        string `json:"session_id"`
			ResumeGatewayURL string `json:"resume_gateway_url"`
		}
	}
	if err := c.ReadJSON(&ready); err != nil || ready.T != "READY" {
		t.Fatalf("ready: %+v %v", ready, err)
	}
	if ready.D.ResumeGatewayURL == "" || ready.D.ResumeGatewayURL == srv.GatewayURL {
		t.Fatalf("resume_gateway_url %q, want one of its own", ready.D.ResumeGatewayURL)
	}
	c.Close()
	c = dial()
	if err := c.WriteJSON(map[string]any{"op": 6, "d": map[string]any{"token": "Bot " + srv.Token(), "session_id": ready.D.SessionID, "seq": 1}}); err != nil {
		t.Fatal(err)
	}
	var invalid struct {
		Op int
		D  json.RawMessage
	}
	if err := c.ReadJSON(&invalid); err != nil || invalid.Op != 9 || string(invalid.D) != "false" {
		t.Fatalf("got %+v %v, want op 9 d=false", invalid, err)
	}
	if srv.Resumes() != 0 {
		t.Errorf("resumes = %d, want none", srv.Resumes())
	}
}
