package discord

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/discord/discordtest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

const roleOps = "2000000000000000001"

var (
	alice   = discordtest.User{ID: "3000000000000000001", Name: "alice"}                         // allowed by ID
	bob     = discordtest.User{ID: "3000000000000000002", Name: "bob", Roles: []string{roleOps}} // allowed by role
	mallory = discordtest.User{ID: "3000000000000000003", Name: "mallory", Roles: []string{"2000000000000000009"}}
)

// timeout bounds every wait: generous, for -race on a loaded machine.
const timeout = time.Minute

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newSurface builds a surface on srv, allowing alice by ID and bob by role.
func newSurface(t *testing.T, srv *discordtest.Server, refs Refs, mods ...func(*Config)) *Surface {
	t.Helper()
	cfg := Config{
		Token:      srv.Token(),
		ChannelID:  discordtest.ChannelID,
		AllowUsers: []string{alice.ID},
		AllowRoles: []string{roleOps},
		APIURL:     srv.URL,
		Refs:       refs,
		Logger:     slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tWriter logs through t, until the test ends.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	defer func() { recover() }() // a log line after the test ended
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// questionMessage waits for the message of question q of set in any of the
// fake's channels given.
func questionMessage(ctx context.Context, t *testing.T, srv *discordtest.Server, set questions.Set, q questions.Question, channels ...string) *discordgo.Message {
	t.Helper()
	if len(channels) == 0 {
		channels = []string{discordtest.ChannelID}
	}
	r := ref(set.ID, q.ID)
	for {
		for _, c := range channels {
			for _, m := range srv.Messages(c) {
				if hasRef(m, r) {
					return m
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("question %s of set %s was never posted", q.ID, set.ID)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func hasRef(m *discordgo.Message, r string) bool {
	found := false
	walk(m.Components, func(c discordgo.MessageComponent) {
		var id string
		switch c := c.(type) {
		case *discordgo.Button:
			id = c.CustomID
		case *discordgo.SelectMenu:
			id = c.CustomID
		}
		if p, ok := parseCustomID(id); ok && p.ref == r {
			found = true
		}
	})
	return found
}

func walk(cs []discordgo.MessageComponent, f func(discordgo.MessageComponent)) {
	for _, c := range cs {
		f(c)
		if row, ok := c.(*discordgo.ActionsRow); ok {
			walk(row.Components, f)
		}
	}
}

// interact does what do does (a click, a choice) until a surface responds:
// Discord shows "This interaction failed" when no process listens, and a
// surface just starting says the question is not open yet (notOpen):
// people click again.
func interact(ctx context.Context, t *testing.T, srv *discordtest.Server, what string, do func() (string, error)) (discordtest.Response, bool) {
	t.Helper()
	for {
		id, err := do()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return discordtest.Response{}, false
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := srv.WaitResponse(wctx, id)
		cancel()
		if err == nil && !notOpen(r) {
			return r, true
		}
		if ctx.Err() != nil {
			t.Errorf("%s: no response: %v", what, err)
			return discordtest.Response{}, false
		}
	}
}

// notOpen reports whether r says the question is open nowhere: what a
// surface that does not watch the set yet (just started, without a Lookup)
// answers; people click again.
func notOpen(r discordtest.Response) bool {
	return r.Ephemeral && r.Data != nil && r.Data.Content == msgNotOpen
}

// act gives answer a to question q as user u the way a person would, and
// returns the response to the last interaction.
func act(ctx context.Context, t *testing.T, srv *discordtest.Server, u discordtest.User, m *discordgo.Message, q questions.Question, a questions.Answer) discordtest.Response {
	t.Helper()
	switch {
	case a.Text != "":
		label := "Other…"
		if len(q.Options) == 0 {
			label = "Answer…"
		}
		var opened string
		r, ok := interact(ctx, t, srv, "click "+label, func() (string, error) {
			var err error
			opened, err = srv.ClickButton(u, m.ID, label)
			return opened, err
		})
		if !ok || r.Type != discordgo.InteractionResponseModal {
			return r // refused
		}
		id, err := srv.SubmitModal(u, opened, a.Text)
		if err != nil {
			t.Errorf("submit modal: %v", err)
			return discordtest.Response{}
		}
		r, err = srv.WaitResponse(ctx, id)
		if err != nil {
			t.Errorf("%v", err)
		}
		return r
	case q.MultiSelect || len(q.Options) > 5:
		r, _ := interact(ctx, t, srv, "select", func() (string, error) { return srv.Select(u, m.ID, a.Labels...) })
		return r
	default:
		r, _ := interact(ctx, t, srv, "click "+a.Labels[0], func() (string, error) { return srv.ClickButton(u, m.ID, a.Labels[0]) })
		return r
	}
}

// told collects, per set, what the surface told people in interaction
// responses.
type told struct {
	mu sync.Mutex
	m  map[string][]string
}

func (c *told) add(setID string, r discordtest.Response) {
	if r.Data == nil || r.Data.Content == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]string{}
	}
	c.m[setID] = append(c.m[setID], r.Data.Content)
}

// shown is everything people see about set: its question messages, the
// bot's replies to them and to answers, and what interactions were told.
func shown(srv *discordtest.Server, c *told, set questions.Set) string {
	var b strings.Builder
	msgs := srv.Messages(discordtest.ChannelID)
	ids := map[string]bool{}
	for _, m := range msgs {
		for _, q := range set.Questions {
			if hasRef(m, ref(set.ID, q.ID)) {
				ids[m.ID] = true
				b.WriteString(m.Content + "\n")
			}
		}
	}
	for _, m := range msgs { // replies to answers that reply to the questions
		if m.MessageReference != nil && ids[m.MessageReference.MessageID] {
			ids[m.ID] = true
		}
	}
	for _, m := range msgs {
		if m.Author != nil && m.Author.Bot && m.MessageReference != nil && ids[m.MessageReference.MessageID] {
			b.WriteString(m.Content + "\n")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.m[set.ID] {
		b.WriteString(t + "\n")
	}
	return b.String()
}

func postedOnce(srv *discordtest.Server) func(t *testing.T, set questions.Set) int {
	return func(t *testing.T, set questions.Set) int {
		r := ref(set.ID, set.Questions[0].ID)
		n := 0
		for _, m := range srv.Messages(discordtest.ChannelID) {
			if hasRef(m, r) {
				n++
			}
		}
		return n
	}
}

func TestConformance(t *testing.T) {
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	var c told
	answerAs := func(u discordtest.User, wantRefused bool) func(*testing.T, questions.Set, []questions.Answer) {
		return func(t *testing.T, set questions.Set, answers []questions.Answer) {
			ctx := testCtx(t)
			for i, q := range set.Questions {
				m := questionMessage(ctx, t, srv, set, q)
				r := act(ctx, t, srv, u, m, q, answers[i])
				c.add(set.ID, r)
				refused := r.Type == discordgo.InteractionResponseChannelMessageWithSource && r.Ephemeral && r.Data.Content == msgNotAllowed
				if refused != wantRefused {
					t.Errorf("%s answering %s: response %+v, refused = %v, want %v", u.Name, q.ID, r, refused, wantRefused)
				}
			}
		}
	}
	surfacetest.Run(t, surfacetest.Backend{
		New:      func(t *testing.T) surfaces.Surface { return newSurface(t, srv, refs) },
		Answer:   answerAs(alice, false),
		Intrude:  answerAs(mallory, true),
		Posted:   postedOnce(srv),
		Shown:    func(_ *testing.T, set questions.Set) string { return shown(srv, &c, set) },
		Person:   "alice",
		Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true},
		Timeout:  timeout,
		Transient: func(*testing.T, questions.Set) {
			srv.LimitRate(discordtest.RateLimit{Method: "POST", PathPrefix: "/channels/" + discordtest.ChannelID + "/messages", RetryAfter: 50 * time.Millisecond, Count: 1})
		},
	})
}

// TestConformanceReplies runs the suite answering by text replies, which
// are also read when given while no Ask runs.
func TestConformanceReplies(t *testing.T) {
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	answerAs := func(u discordtest.User) func(*testing.T, questions.Set, []questions.Answer) {
		return func(t *testing.T, set questions.Set, answers []questions.Answer) {
			ctx := testCtx(t)
			for i, q := range set.Questions {
				m := questionMessage(ctx, t, srv, set, q)
				text := answers[i].Text
				if text == "" {
					text = strings.Join(answers[i].Labels, ", ")
				}
				if _, err := srv.Reply(u, m.ID, text); err != nil {
					t.Errorf("reply: %v", err)
				}
			}
		}
	}
	var c told
	surfacetest.Run(t, surfacetest.Backend{
		New: func(t *testing.T) surfaces.Surface {
			return newSurface(t, srv, refs, func(c *Config) { c.AcceptReplies = true })
		},
		Answer:   answerAs(bob),
		Intrude:  answerAs(mallory),
		Posted:   postedOnce(srv),
		Shown:    func(_ *testing.T, set questions.Set) string { return shown(srv, &c, set) },
		Person:   "bob",
		Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true, AnswerWhileDown: true},
		Timeout:  timeout,
		Transient: func(*testing.T, questions.Set) {
			srv.LimitRate(discordtest.RateLimit{Method: "POST", PathPrefix: "/channels/" + discordtest.ChannelID + "/messages", RetryAfter: 50 * time.Millisecond, Count: 1})
		},
	})
}

// asking starts s.Ask(ctx, set) with in-memory Answers and returns a
// channel with what it returned and, when nil, the set's final answer.
type askResult struct {
	resp questions.Response
	err  error
}

func asking(ctx context.Context, s *Surface, set questions.Set) <-chan askResult {
	a := surfacetest.NewAnswers()
	a.Add(set)
	ch := make(chan askResult, 1)
	go func() {
		err := s.Ask(ctx, set, a)
		var resp questions.Response
		if err == nil {
			var ok bool
			if resp, ok = a.Final(set.ID); !ok {
				err = errors.New("Ask returned nil, and the set has no answer")
			}
		}
		ch <- askResult{resp, err}
	}()
	return ch
}

func result(ctx context.Context, t *testing.T, ch <-chan askResult) questions.Response {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Ask: %v", r.err)
		}
		return r.resp
	case <-ctx.Done():
		t.Fatal("Ask did not return")
	}
	return questions.Response{}
}

func noResult(t *testing.T, ch <-chan askResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Ask returned %+v, %v; want it still waiting", r.resp, r.err)
	default:
	}
}

// disabled reports whether every component of m is disabled.
func disabled(m *discordgo.Message) bool {
	all := true
	walk(m.Components, func(c discordgo.MessageComponent) {
		switch c := c.(type) {
		case *discordgo.Button:
			all = all && c.Disabled
		case *discordgo.SelectMenu:
			all = all && c.Disabled
		}
	})
	return all
}

func waitAnswered(ctx context.Context, t *testing.T, srv *discordtest.Server, m *discordgo.Message) *discordgo.Message {
	t.Helper()
	got, err := srv.WaitMessage(ctx, m.ChannelID, func(x *discordgo.Message) bool {
		return x.ID == m.ID && disabled(x) && strings.Contains(x.Content, "Answered by")
	})
	if err != nil {
		t.Fatalf("message %s never showed the answer: %v", m.ID, err)
	}
	return got
}

func TestButtonAnswer(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("button")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])

	if e := m.Embeds[0]; !strings.Contains(e.Title, "Database") || !strings.Contains(e.Description, "Which database") {
		t.Errorf("embed = %q / %q, want the header and the question", e.Title, e.Description)
	}
	var labels []string
	walk(m.Components, func(c discordgo.MessageComponent) {
		if b, ok := c.(*discordgo.Button); ok {
			labels = append(labels, b.Label)
		}
	})
	if want := []string{"Postgres", "SQLite", "MySQL"}; !slices.Equal(labels, want) {
		t.Errorf("buttons = %q, want %q", labels, want)
	}

	r := act(ctx, t, srv, bob, m, set.Questions[0], surfacetest.Choose(set.Questions[0], "SQLite"))
	if r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("response type = %d, want a deferred update (6)", r.Type)
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "SQLite")}, time.Now().Add(-timeout))
	if resp.By != "bob (discord "+bob.ID+")" {
		t.Errorf("By = %q", resp.By)
	}
	got := waitAnswered(ctx, t, srv, m)
	if !strings.Contains(got.Content, "bob") || !strings.Contains(got.Content, "SQLite") {
		t.Errorf("answered message = %q, want who and what", got.Content)
	}
}

func TestMultiSelectMenu(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.MultiSelect("multi")
	q := set.Questions[0]
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, q)
	var menu *discordgo.SelectMenu
	walk(m.Components, func(c discordgo.MessageComponent) {
		if sm, ok := c.(*discordgo.SelectMenu); ok {
			menu = sm
		}
	})
	if menu == nil || menu.MinValues == nil || *menu.MinValues != 1 || menu.MaxValues != 3 {
		t.Fatalf("select menu = %+v, want min 1 max 3", menu)
	}
	// Chosen out of order: the answer follows the options' order.
	id, err := srv.Select(alice, m.ID, "Windows", "Linux")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitResponse(ctx, id); err != nil {
		t.Fatal(err)
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(q, "Linux", "Windows")}, time.Now().Add(-timeout))
	waitAnswered(ctx, t, srv, m)
}

func TestModalFreeText(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.NewSet("modal").Other().Free().Set()
	ch := asking(ctx, s, set)
	for i, text := range []string{"MPL-2.0 please", "orchestrate"} {
		q := set.Questions[i]
		m := questionMessage(ctx, t, srv, set, q)
		label := map[int]string{0: "Other…", 1: "Answer…"}[i]
		opened, err := srv.ClickButton(alice, m.ID, label)
		if err != nil {
			t.Fatal(err)
		}
		r, err := srv.WaitResponse(ctx, opened)
		if err != nil {
			t.Fatal(err)
		}
		if r.Type != discordgo.InteractionResponseModal || r.Data.Title == "" {
			t.Fatalf("response to %s = %+v, want a modal", label, r)
		}
		id, err := srv.SubmitModal(alice, opened, text)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := srv.WaitResponse(ctx, id); err != nil || r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
			t.Fatalf("response to the modal = %+v, %v", r, err)
		}
		if i == 0 {
			noResult(t, ch) // a set resumes once all its questions are answered
		}
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{
		surfacetest.Say(set.Questions[0], "MPL-2.0 please"),
		surfacetest.Say(set.Questions[1], "orchestrate"),
	}, time.Now().Add(-timeout))
}

func TestRefusedClicker(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.Other("refused")
	q := set.Questions[0]
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, q)

	for _, button := range []string{"MIT", "Other…"} {
		id, err := srv.ClickButton(mallory, m.ID, button)
		if err != nil {
			t.Fatal(err)
		}
		r, err := srv.WaitResponse(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Type != discordgo.InteractionResponseChannelMessageWithSource || !r.Ephemeral || !strings.Contains(r.Data.Content, "not allowed") {
			t.Errorf("response to mallory's %s = %+v, want an ephemeral refusal", button, r)
		}
	}
	got, _ := srv.Message(m.ID)
	if disabled(got) || got.Content != "" {
		t.Errorf("message changed after a refused click: %q", got.Content)
	}
	noResult(t, ch)

	act(ctx, t, srv, alice, m, q, surfacetest.Choose(q, "Apache-2.0"))
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(q, "Apache-2.0")}, time.Now().Add(-timeout))
}

func TestDenyByDefault(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil, func(c *Config) { c.AllowUsers, c.AllowRoles = nil, nil })
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("deny")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	for _, u := range []discordtest.User{alice, bob} {
		r := act(ctx, t, srv, u, m, set.Questions[0], surfacetest.Choose(set.Questions[0], "SQLite"))
		if !r.Ephemeral {
			t.Errorf("%s with nobody allowed: response %+v, want an ephemeral refusal", u.Name, r)
		}
	}
	noResult(t, ch)
}

func TestDoubleClick(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("double")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])

	// Two people at once, and one of them twice, before any edit lands.
	var ids []string
	for _, c := range []struct {
		u     discordtest.User
		label string
	}{{alice, "Postgres"}, {bob, "MySQL"}, {alice, "Postgres"}} {
		id, err := srv.ClickButton(c.u, m.ID, c.label)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	taken, refused := 0, 0
	for _, id := range ids {
		r, err := srv.WaitResponse(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Type == discordgo.InteractionResponseDeferredMessageUpdate:
			taken++
		case r.Ephemeral && strings.Contains(r.Data.Content, "already answered"):
			refused++
		default:
			t.Errorf("unexpected response %+v", r)
		}
	}
	if taken != 1 || refused != 2 {
		t.Errorf("taken %d, told already answered %d; want 1 and 2", taken, refused)
	}
	resp := result(ctx, t, ch)
	if len(resp.Answers) != 1 || len(resp.Answers[0].Labels) != 1 {
		t.Fatalf("response %+v, want one answer", resp)
	}
	// After the set is done, a late click is told so too.
	got := waitAnswered(ctx, t, srv, m)
	if !strings.Contains(got.Content, resp.Answers[0].Labels[0]) {
		t.Errorf("message says %q, response says %v", got.Content, resp.Answers[0].Labels)
	}
}

// slowRefs blocks SetRef of answers until released.
type slowRefs struct {
	MemoryRefs
	entered chan struct{}
	release chan struct{}
}

func (r *slowRefs) SetRef(ctx context.Context, key, value string) error {
	if strings.Contains(key, "/answer/") {
		r.entered <- struct{}{}
		select {
		case <-r.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.MemoryRefs.SetRef(ctx, key, value)
}

func TestAckBeforeSlowWork(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	refs := &slowRefs{entered: make(chan struct{}, 2), release: make(chan struct{})}
	s := newSurface(t, srv, refs)
	ctx := testCtx(t)
	set := surfacetest.TwoQuestions("slow")
	ch := asking(ctx, s, set)
	m0 := questionMessage(ctx, t, srv, set, set.Questions[0])
	m1 := questionMessage(ctx, t, srv, set, set.Questions[1])

	// A global rate limit on every edit, to be waited out after the ack.
	srv.LimitRate(discordtest.RateLimit{Method: "PATCH", PathPrefix: "/channels/", RetryAfter: 1500 * time.Millisecond, Global: true, Count: 1})

	id, err := srv.ClickButton(alice, m0.ID, "Postgres")
	if err != nil {
		t.Fatal(err)
	}
	<-refs.entered // the store is now stuck...
	r, err := srv.WaitResponse(ctx, id)
	if err != nil { // ...and the click was acknowledged all the same
		t.Fatal(err)
	}
	if r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("response = %+v, want a deferred update", r)
	}
	t.Logf("ack latency with the store stuck: %v", r.Latency)
	close(refs.release)

	id, err = srv.Select(bob, m1.ID, "macOS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitResponse(ctx, id); err != nil {
		t.Fatal(err)
	}
	result(ctx, t, ch)
	waitAnswered(ctx, t, srv, m0)
	waitAnswered(ctx, t, srv, m1)
	// Every answer's edit went through after the 429.
	if n := srv.CountRequests("PATCH", "/channels/"); n < 3 {
		t.Errorf("%d message edits, want the rate-limited one retried", n)
	}
}

func TestGatewayDropMidWait(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("drop")
	ch := asking(ctx, s, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	if err := srv.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := srv.Drop(); n != 1 {
		t.Fatalf("dropped %d connections, want 1", n)
	}
	// Clicked while the bot is away: Discord delivers it after the resume.
	id, err := srv.ClickButton(alice, m.ID, "MySQL")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if srv.Resumes() != 1 {
		t.Errorf("resumes = %d, want the session resumed", srv.Resumes())
	}
	if _, err := srv.WaitResponse(ctx, id); err != nil {
		t.Fatal(err)
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}, time.Now().Add(-timeout))
}

func TestRestartOldButtonAnswers(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("restart")

	first := newSurface(t, srv, refs)
	askCtx, cancel := context.WithCancel(ctx)
	ch := asking(askCtx, first, set)
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	cancel()
	<-ch
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := newSurface(t, srv, refs)
	ch = asking(ctx, second, set)
	if err := srv.WaitReady(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// The old message's button, clicked (again, if need be) once the new
	// process asks.
	if r := act(ctx, t, srv, alice, m, set.Questions[0], surfacetest.Choose(set.Questions[0], "Postgres")); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("response = %+v, want the click taken", r)
	}
	resp := result(ctx, t, ch)
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "Postgres")}, time.Now().Add(-timeout))
	if n := srv.CountRequests("POST", "/channels/"+discordtest.ChannelID+"/messages"); n != 1 {
		t.Errorf("posted %d messages, want the first one reused", n)
	}
	waitAnswered(ctx, t, srv, m)
}
