package discord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// TestTokenNeverLogged runs a whole session — connect, ask, a refused
// click, a dropped gateway and its resume, an answer, failures — with the
// surface's log at debug level and discordgo's package log captured, and
// checks the token appears nowhere. It is not parallel: it captures the
// standard logger, which discordgo writes to.
func TestTokenNeverLogged(t *testing.T) {
	std := &syncBuffer{}
	prev, flags := log.Writer(), log.Flags()
	log.SetOutput(std)
	t.Cleanup(func() { log.SetOutput(prev); log.SetFlags(flags) })

	srv := discordtest.NewServer(t)
	logs := &syncBuffer{}
	debug := func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := newSurface(t, srv, nil, debug)
	if s.dg.LogLevel >= discordgo.LogError || s.dg.Debug {
		t.Errorf("discordgo logging is on: LogLevel %d, Debug %v", s.dg.LogLevel, s.dg.Debug)
	}
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("token")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	act(ctx, t, srv, mallory, m, set.Questions[0], surfacetest.Choose(set.Questions[0], "MySQL"))
	if err := srv.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	srv.Drop()
	if err := srv.WaitReady(ctx, 2); err != nil {
		t.Fatal(err)
	}
	act(ctx, t, srv, alice, m, set.Questions[0], surfacetest.Choose(set.Questions[0], "MySQL"))
	result(ctx, t, ch)

	// Failures: a wrong token, a channel that does not exist.
	var errs []error
	bad := newSurface(t, srv, nil, debug, func(c *Config) { c.Token = "not-" + srv.Token() })
	err := bad.Ask(ctx, surfacetest.SingleChoice("bad-token"), surfacetest.NewAnswers())
	errs = append(errs, err)
	gone := newSurface(t, srv, nil, debug, func(c *Config) { c.ChannelID = "999" })
	err = gone.Ask(ctx, surfacetest.SingleChoice("bad-channel"), surfacetest.NewAnswers())
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil {
			t.Fatal("Ask succeeded, want an error")
		}
		if strings.Contains(err.Error(), srv.Token()) {
			t.Errorf("error shows the token: %v", err)
		}
	}
	s.Close()
	bad.Close()
	gone.Close()

	if !strings.Contains(logs.String(), "level=DEBUG") && !strings.Contains(logs.String(), "level=INFO") {
		t.Fatalf("nothing logged:\n%s", logs)
	}
	for what, out := range map[string]string{"surface log": logs.String(), "standard log": std.String()} {
		if strings.Contains(out, srv.Token()) {
			t.Errorf("%s shows the token:\n%s", what, out)
		}
	}
}

func TestRedactingLogger(t *testing.T) {
	t.Parallel()
	const secret = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123"
	var buf syncBuffer
	l := newRedactingLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), secret)
	l = l.With("token", secret).WithGroup("g-" + secret)
	l.Debug("msg "+secret, "err", errors.New("Bot "+secret), "s", "x"+secret, slog.Group("grp", "k", secret),
		"any", struct{ T string }{secret}, "n", 3)
	if strings.Contains(buf.String(), secret) {
		t.Errorf("secret in log: %s", buf.String())
	}
	if !strings.Contains(buf.String(), redacted) || !strings.Contains(buf.String(), `"n":3`) {
		t.Errorf("log lost its content: %s", buf.String())
	}
	err := redactErr(errors.Join(context.Canceled, errors.New("token "+secret)), secret)
	if strings.Contains(err.Error(), secret) || !errors.Is(err, context.Canceled) {
		t.Errorf("redactErr = %v", err)
	}
}

func TestThreadPerRun(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	threads := func(c *Config) { c.ThreadPerRun = true }
	ctx := testCtx(t)
	turn1 := surfacetest.NewSet("threads").Title("Deploy the service").Single().Set()
	turn2 := surfacetest.NewSet("threads").Title("Deploy the service").Turn(2).Multi().Set()

	s := newSurface(t, srv, refs, threads)
	ch := asking(ctx, s, turn1)
	var thread string
	for thread == "" {
		if ths := srv.Threads(discordtest.ChannelID); len(ths) > 0 {
			thread = ths[0]
		}
		select {
		case <-ctx.Done():
			t.Fatal("no thread started")
		case <-time.After(10 * time.Millisecond):
		}
	}
	m := questionMessage(ctx, t, srv, turn1, turn1.Questions[0], thread)
	act(ctx, t, srv, bob, m, turn1.Questions[0], surfacetest.Choose(turn1.Questions[0], "Postgres"))
	result(ctx, t, ch)

	// The run's next turn, after a restart, goes to the same thread.
	s.Close()
	s = newSurface(t, srv, refs, threads)
	ch = asking(ctx, s, turn2)
	m = questionMessage(ctx, t, srv, turn2, turn2.Questions[0], thread)
	act(ctx, t, srv, bob, m, turn2.Questions[0], surfacetest.Choose(turn2.Questions[0], "Linux"))
	result(ctx, t, ch)
	if ths := srv.Threads(discordtest.ChannelID); len(ths) != 1 {
		t.Errorf("threads = %v, want one per run", ths)
	}
	if msgs := srv.Messages(discordtest.ChannelID); len(msgs) != 0 {
		t.Errorf("%d messages in the channel itself, want all in the thread", len(msgs))
	}
}

func TestResolveAnsweredElsewhere(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.TwoQuestions("resolve")
	askCtx, cancel := context.WithCancel(ctx)
	ch := asking(askCtx, s, set)
	m0 := questionMessage(ctx, t, srv, set, set.Questions[0])
	m1 := questionMessage(ctx, t, srv, set, set.Questions[1])
	cancel()
	<-ch

	resp := questions.Response{SetID: set.ID, By: "@octocat", Surface: "github", At: time.Now(), Answers: []questions.Answer{
		surfacetest.Choose(set.Questions[0], "MySQL"), surfacetest.Choose(set.Questions[1], "Linux", "macOS"),
	}}
	if err := s.Resolve(ctx, set, resp); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	for _, m := range []*discordgo.Message{m0, m1} {
		got, _ := srv.Message(m.ID)
		if !disabled(got) || !strings.Contains(got.Content, "on github by **\\@octocat**") {
			t.Errorf("after Resolve, message %s = %q, disabled %v", m.ID, got.Content, disabled(got))
		}
	}
	// A surface that never asked (a restart) resolves through Refs.
	other := newSurface(t, srv, s.refs)
	if err := other.Resolve(ctx, set, resp); err != nil {
		t.Fatalf("Resolve after restart: %v", err)
	}
}

func TestRemind(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.TwoQuestions("remind")
	if err := s.Remind(ctx, set); err == nil {
		t.Error("Remind of a set never asked succeeded")
	}
	ch := asking(ctx, s, set)
	m0 := questionMessage(ctx, t, srv, set, set.Questions[0])
	m1 := questionMessage(ctx, t, srv, set, set.Questions[1])
	act(ctx, t, srv, alice, m0, set.Questions[0], surfacetest.Choose(set.Questions[0], "SQLite"))
	waitAnswered(ctx, t, srv, m0)
	if err := s.Remind(ctx, set); err != nil {
		t.Fatalf("Remind: %v", err)
	}
	msgs := srv.Messages(discordtest.ChannelID)
	last := msgs[len(msgs)-1]
	if last.MessageReference == nil || last.MessageReference.MessageID != m1.ID || !strings.Contains(last.Content, "Still waiting") {
		t.Errorf("reminder = %q replying to %+v, want a reply to the unanswered question %s", last.Content, last.MessageReference, m1.ID)
	}
	noResult(t, ch)
}

func TestReplies(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil, func(c *Config) { c.AcceptReplies = true })
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("replies")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])

	if _, err := srv.Reply(mallory, m.ID, "Postgres"); err != nil { // not allowed: ignored
		t.Fatal(err)
	}
	bad, err := srv.Reply(bob, m.ID, "Oracle") // not an option, no free text
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitMessage(ctx, discordtest.ChannelID, func(x *discordgo.Message) bool {
		return x.MessageReference != nil && x.MessageReference.MessageID == bad && strings.Contains(x.Content, "not taken")
	}); err != nil {
		t.Fatalf("no explanation for an invalid reply: %v", err)
	}
	noResult(t, ch)
	good, err := srv.Reply(bob, m.ID, "2")
	if err != nil {
		t.Fatal(err)
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "SQLite")}, time.Now().Add(-timeout))
	if got, _ := srv.Message(good); len(got.Reactions) == 0 || got.Reactions[0].Emoji.Name != "✅" {
		t.Errorf("taken reply has reactions %+v, want ✅", got.Reactions)
	}
	waitAnswered(ctx, t, srv, m)
}

func TestAskErrors(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	many := surfacetest.NewSet("many").Question(questions.Question{Text: "Which?", Options: make([]questions.Option, 26)}).Set()
	for i := range many.Questions[0].Options {
		many.Questions[0].Options[i].Label = strings.Repeat("x", i+1)
	}
	tests := []struct {
		name string
		set  questions.Set
		want string
	}{
		{"no questions", questions.Set{ID: "s1"}, "no questions"},
		{"no ID", questions.Set{Questions: []questions.Question{{ID: "q1", Text: "?"}}}, "no ID"},
		{"duplicate question", questions.Set{ID: "s1", Questions: []questions.Question{{ID: "q1", Text: "?"}, {ID: "q1", Text: "?"}}}, "twice"},
		{"too many options", many, "at most 25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Ask(ctx, tt.set, surfacetest.NewAnswers())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Ask = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if n := srv.CountRequests("POST", "/channels/"); n != 0 {
		t.Errorf("%d messages posted for invalid sets", n)
	}
	s.Close()
	err := s.Ask(ctx, surfacetest.SingleChoice("closed"), surfacetest.NewAnswers())
	if !errors.Is(err, surfaces.ErrUnavailable) {
		t.Errorf("Ask on a closed surface = %v, want ErrUnavailable", err)
	}
}

func TestManyOptionsUseASelectMenu(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	q := questions.Question{Header: "Region", Text: "Which region?", FreeText: true}
	for _, l := range []string{"eu-west-1", "eu-west-2", "us-east-1", "us-east-2", "us-west-1", "ap-south-1", "sa-east-1"} {
		q.Options = append(q.Options, questions.Option{Label: l, Description: "AWS " + l})
	}
	set := surfacetest.NewSet("regions").Question(q).Set()
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	act(ctx, t, srv, alice, m, set.Questions[0], surfacetest.Choose(set.Questions[0], "ap-south-1"))
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "ap-south-1")}, time.Now().Add(-timeout))
}

// TestNewRefusesWhatItCannotStartFrom: the values of a Config are checked
// by the configuration (internal/config TestValidate has the ID, URL and
// token cases); New refuses a config it could not connect with at all.
func TestNewRefusesWhatItCannotStartFrom(t *testing.T) {
	t.Parallel()
	ok := Config{Token: "abc.def.ghi", ChannelID: "123", AllowUsers: []string{"456"}}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // "" for accepted
	}{
		{"valid", func(*Config) {}, ""},
		{"Bot prefix", func(c *Config) { c.Token = "Bot abc" }, ""},
		{"no token", func(c *Config) { c.Token = "" }, "token"},
		{"blank token", func(c *Config) { c.Token = "  " }, "token"},
		{"no channel", func(c *Config) { c.ChannelID = "" }, "channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			s, err := New(c)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
			if s != nil {
				s.Close()
			}
		})
	}
}

func TestRewriteTransport(t *testing.T) {
	t.Parallel()
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Host+" "+r.URL.RequestURI())
		io.WriteString(w, "{}")
	}))
	t.Cleanup(up.Close)
	c, err := newHTTPClient(nil, up.URL+"/proxy/", "ws://127.0.0.1:9/gw")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Get(discordgo.EndpointChannelMessages("42") + "?limit=5")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.Get(discordgo.EndpointGatewayBot)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "ws://127.0.0.1:9/gw") {
		t.Errorf("gateway lookup answered %s", body)
	}
	host := strings.TrimPrefix(up.URL, "http://")
	if want := []string{host + " /proxy/api/v" + discordgo.APIVersion + "/channels/42/messages?limit=5"}; !slices.Equal(got, want) {
		t.Errorf("upstream saw %q, want %q", got, want)
	}
	if c.Transport == http.DefaultTransport {
		t.Error("the client's transport was not wrapped")
	}
}

func TestGatewayURLOverride(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil, func(c *Config) { c.GatewayURL = srv.GatewayURL })
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("gateway-url")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	if n := srv.CountRequests("GET", "/gateway"); n != 0 {
		t.Errorf("asked the API for the gateway %d times, want gateway_url used", n)
	}
	s.Close()
	r := <-ch
	if !errors.Is(r.err, surfaces.ErrUnavailable) {
		t.Errorf("Ask after Close = %v, want ErrUnavailable", r.err)
	}
	if got, _ := srv.Message(m.ID); disabled(got) {
		t.Error("Close disabled the question; it should stay answerable")
	}
}

// TestRepliesWhileDisconnected: a reply sent while the gateway session was
// lost is never dispatched; the surface fetches it after reconnecting.
func TestRepliesWhileDisconnected(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil, func(c *Config) { c.AcceptReplies = true })
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("lost-reply")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	if err := srv.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	srv.DropSession()
	if _, err := srv.Reply(alice, m.ID, "mysql"); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if srv.Identifies() != 2 {
		t.Errorf("identifies = %d, want a new session", srv.Identifies())
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}, time.Now().Add(-timeout))
}

// TestAnsweredMessageEditedOnce: the message of a question answered here is
// edited once, to "Answered by **alice**"; resolving the set afterwards (a
// final answer naming several surfaces) does not edit it again.
func TestAnsweredMessageEditedOnce(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("edited-once")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	act(ctx, t, srv, alice, m, set.Questions[0], surfacetest.Choose(set.Questions[0], "SQLite"))
	resp := result(ctx, t, ch)
	got := waitAnswered(ctx, t, srv, m)
	edits := srv.CountRequests("PATCH", "/channels/")
	resp.Surface = "discord, terminal"
	if err := s.Resolve(ctx, set, resp); err != nil {
		t.Fatal(err)
	}
	if n := srv.CountRequests("PATCH", "/channels/"); n != edits || edits != 1 {
		t.Errorf("%d edits after the answer, %d after Resolve; want 1 and no more", edits, n)
	}
	if after, _ := srv.Message(m.ID); after.Content != got.Content || !strings.Contains(after.Content, "Answered by **alice**:") {
		t.Errorf("message = %q, want it to stay %q", after.Content, got.Content)
	}
}

// TestDoneSetsForgotten: 10,000 sets asked and answered leave no state
// behind but the last maxFinished refs (who answered, for late clicks).
func TestDoneSetsForgotten(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil, func(c *Config) { c.AcceptReplies = true })
	a := surfacetest.NewAnswers()
	for i := range 10000 {
		set := surfacetest.TwoQuestions(fmt.Sprintf("forgotten-%d", i))
		st := s.join(set, a)
		s.mu.Lock()
		for j, qs := range st.qs {
			qs.ans, qs.settled, qs.messageID = &answered{Name: "alice"}, true, fmt.Sprintf("m%d-%d", i, j)
			s.byMsg[qs.messageID] = qs
			if st.replies == nil {
				st.replies = map[string]bool{}
			}
			st.replies[fmt.Sprintf("r%d-%d", i, j)] = true
		}
		s.mu.Unlock()
		s.finish(st)
		s.leave(st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sets) != 0 || len(s.byRef) != 0 || len(s.byMsg) != 0 {
		t.Errorf("left %d sets, %d refs, %d messages; want none", len(s.sets), len(s.byRef), len(s.byMsg))
	}
	if len(s.finished) != maxFinished || len(s.finishedOrder) != maxFinished {
		t.Errorf("finished holds %d refs (%d in order), want the last %d", len(s.finished), len(s.finishedOrder), maxFinished)
	}
	if cap(s.finishedOrder) > 4*maxFinished {
		t.Errorf("finishedOrder has capacity %d, want it bounded", cap(s.finishedOrder))
	}
}

// TestArchivedThreadIsUnarchivedToEdit: Discord archives a run's thread
// after a week without activity and then refuses edits in it (50083). A
// question answered elsewhere meanwhile still gets its message edited: the
// surface unarchives the thread and edits again.
func TestArchivedThreadIsUnarchivedToEdit(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil, func(c *Config) { c.ThreadPerRun = true })
	ctx := testCtx(t)
	set := surfacetest.NewSet("archived").Title("Deploy the service").Single().Set()
	askCtx, cancel := context.WithCancel(ctx)
	ch := asking(askCtx, s, set)
	var thread string
	for thread == "" {
		if ths := srv.Threads(discordtest.ChannelID); len(ths) > 0 {
			thread = ths[0]
		}
		select {
		case <-ctx.Done():
			t.Fatal("no thread started")
		case <-time.After(10 * time.Millisecond):
		}
	}
	m := questionMessage(ctx, t, srv, set, set.Questions[0], thread)
	cancel()
	<-ch
	srv.ArchiveThread(thread)
	resp := questions.Response{SetID: set.ID, By: "@octocat", Surface: "github", At: time.Now(),
		Answers: []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}}
	if err := s.Resolve(ctx, set, resp); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if got, _ := srv.Message(m.ID); !disabled(got) || !strings.Contains(got.Content, "on github by **\\@octocat**") {
		t.Errorf("message %s = %q, disabled %v; want it edited", m.ID, got.Content, disabled(got))
	}
	if srv.Archived(thread) {
		t.Error("the thread is still archived")
	}
	if n := srv.CountRequests("PATCH", "/channels/"+thread); n != 3 {
		// The refused edit, the unarchive, the edit again.
		t.Errorf("%d PATCH requests in the thread, want 3", n)
	}
}
