package discord

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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

// watchAsAsk asks as the runner's ask room does: Watch, then wait (the
// runner waits on the store, here on the set being closed or ctx), then
// Unwatch. No goroutine of the surface waits meanwhile. It keeps the
// surface's other capabilities (Resolver, Reminder…).
type watchAsAsk struct{ *Surface }

func (w watchAsAsk) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := w.Watch(ctx, set, answers); err != nil {
		return err
	}
	defer w.Unwatch(set.ID)
	w.mu.Lock()
	st := w.sets[set.ID]
	w.mu.Unlock()
	var done <-chan struct{}
	if st != nil {
		done = st.done
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.ctx.Done():
		return fmt.Errorf("surface closed: %w", surfaces.ErrUnavailable)
	}
}

// TestConformanceWatch runs the conformance suite through Watch: the
// answers are taken by the gateway's handlers while nothing but the test
// waits.
func TestConformanceWatch(t *testing.T) {
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
		New:      func(t *testing.T) surfaces.Surface { return watchAsAsk{newSurface(t, srv, refs)} },
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

// click clicks label on m as u once and waits for the response.
func click(ctx context.Context, t *testing.T, srv *discordtest.Server, u discordtest.User, m *discordgo.Message, label string) discordtest.Response {
	t.Helper()
	id, err := srv.ClickButton(u, m.ID, label)
	if err != nil {
		t.Fatalf("click %s: %v", label, err)
	}
	r, err := srv.WaitResponse(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWatchClickAfterReturn: Watch returns once the message is posted; a
// click then is offered, acknowledged and shown, with no Ask waiting.
func TestWatchClickAfterReturn(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("watch-click")
	a := surfacetest.NewAnswers()
	a.Add(set)
	if err := s.Watch(ctx, set, a); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	if r := click(ctx, t, srv, alice, m, "MySQL"); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("response = %+v, want the click acknowledged as taken", r)
	}
	resp, err := a.WaitFinal(ctx, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}, time.Now().Add(-timeout))
	waitAnswered(ctx, t, srv, m)

	s.Unwatch(set.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sets) != 0 || len(s.byRef) != 0 || len(s.byMsg) != 0 {
		t.Errorf("after Unwatch: %d sets, %d refs, %d messages kept; want none", len(s.sets), len(s.byRef), len(s.byMsg))
	}
}

// TestWatchTwiceMakesNoRequest: watching a set watched already asks
// nothing of Discord, and the latest Answers are where answers go.
func TestWatchTwiceMakesNoRequest(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("watch-twice")
	first, second := surfacetest.NewAnswers(), surfacetest.NewAnswers()
	first.Add(set)
	second.Add(set)
	if err := s.Watch(ctx, set, first); err != nil {
		t.Fatal(err)
	}
	n := len(srv.Requests())
	if err := s.Watch(ctx, set, second); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Requests()); got != n {
		t.Errorf("the second Watch made %d requests, want none", got-n)
	}
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	click(ctx, t, srv, alice, m, "SQLite")
	if _, err := second.WaitFinal(ctx, set.ID); err != nil {
		t.Fatal(err)
	}
	if offers := first.Offers(set.ID); len(offers) != 0 {
		t.Errorf("the first Answers got %d offers, want none", len(offers))
	}
}

// TestUnwatchedClickIsClosed: a click on a set let go of is answered, at
// once and only to the clicker, that the question is closed.
func TestUnwatchedClickIsClosed(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("unwatched")
	a := surfacetest.NewAnswers()
	a.Add(set)
	if err := s.Watch(ctx, set, a); err != nil {
		t.Fatal(err)
	}
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	s.Unwatch(set.ID)
	s.Unwatch(set.ID) // idempotent
	r := click(ctx, t, srv, alice, m, "MySQL")
	if r.Type != discordgo.InteractionResponseChannelMessageWithSource || !r.Ephemeral || r.Data.Content != msgNotOpen {
		t.Errorf("response = %+v, want an ephemeral %q", r, msgNotOpen)
	}
	if offers := a.Offers(set.ID); len(offers) != 0 {
		t.Errorf("%d offers after Unwatch, want none", len(offers))
	}
	// Someone not allowed is told so, not about the question.
	if r := click(ctx, t, srv, mallory, m, "MySQL"); !r.Ephemeral || r.Data.Content != msgNotAllowed {
		t.Errorf("stranger: response %+v, want %q", r, msgNotAllowed)
	}
}

// TestWatchedSetsRouteAfterReconnect: after the gateway resumes, and after
// a new session (Discord could not resume), clicks on watched sets are
// still taken.
func TestWatchedSetsRouteAfterReconnect(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	a := surfacetest.NewAnswers()
	sets := []questions.Set{surfacetest.SingleChoice("reconnect-resume"), surfacetest.SingleChoice("reconnect-identify")}
	for _, set := range sets {
		a.Add(set)
		if err := s.Watch(ctx, set, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}

	srv.Drop()
	if err := srv.WaitReady(ctx, 2); err != nil {
		t.Fatal(err)
	}
	m := questionMessage(ctx, t, srv, sets[0], sets[0].Questions[0])
	if r := click(ctx, t, srv, alice, m, "MySQL"); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("after a resume: response %+v, want taken", r)
	}
	if srv.Resumes() != 1 {
		t.Errorf("resumes = %d, want 1", srv.Resumes())
	}

	srv.DropSession()
	if err := srv.WaitReady(ctx, 3); err != nil {
		t.Fatal(err)
	}
	m = questionMessage(ctx, t, srv, sets[1], sets[1].Questions[0])
	if r := click(ctx, t, srv, bob, m, "Postgres"); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("after a new session: response %+v, want taken", r)
	}
	if srv.Identifies() != 2 {
		t.Errorf("identifies = %d, want 2", srv.Identifies())
	}
	for i, set := range sets {
		resp, err := a.WaitFinal(ctx, set.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"MySQL", "Postgres"}[i]
		surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], want)}, time.Now().Add(-timeout))
	}
}

// TestLookupDecidesUnwatchedClicks: a process that does not watch a set
// (another instance does, or it was restarted and has not watched it
// again yet) offers a click on it to the store through Config.Lookup; a
// set the store has settled is answered closed; a store that fails is
// answered "try again".
func TestLookupDecidesUnwatchedClicks(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	ctx := testCtx(t)
	open, settled, broken := surfacetest.SingleChoice("lookup-open"), surfacetest.SingleChoice("lookup-settled"), surfacetest.SingleChoice("lookup-broken")
	store := surfacetest.NewAnswers()
	for _, set := range []questions.Set{open, settled, broken} {
		store.Add(set)
	}
	poster := newSurface(t, srv, refs)
	for _, set := range []questions.Set{open, settled, broken} {
		if err := poster.Watch(ctx, set, store); err != nil {
			t.Fatal(err)
		}
	}
	if err := poster.Close(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var lookups []string
	s := newSurface(t, srv, refs, func(c *Config) {
		c.Lookup = func(_ context.Context, setID string) (questions.Set, surfaces.Answers, bool, error) {
			mu.Lock()
			lookups = append(lookups, setID)
			mu.Unlock()
			switch setID {
			case open.ID:
				return open, store, true, nil
			case broken.ID:
				return questions.Set{}, nil, false, errors.New("store down")
			}
			return questions.Set{}, nil, false, nil
		}
	})
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	m := questionMessage(ctx, t, srv, open, open.Questions[0])
	if r := click(ctx, t, srv, alice, m, "MySQL"); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("pending in the store: response %+v, want the click taken", r)
	}
	resp, err := store.WaitFinal(ctx, open.ID)
	if err != nil {
		t.Fatal(err)
	}
	surfacetest.CheckResponse(t, name, open, resp, []questions.Answer{surfacetest.Choose(open.Questions[0], "MySQL")}, time.Now().Add(-timeout))
	waitAnswered(ctx, t, srv, m)

	m = questionMessage(ctx, t, srv, settled, settled.Questions[0])
	if r := click(ctx, t, srv, alice, m, "MySQL"); !r.Ephemeral || r.Data.Content != msgNotOpen {
		t.Errorf("settled: response %+v, want %q", r, msgNotOpen)
	}
	m = questionMessage(ctx, t, srv, broken, broken.Questions[0])
	if r := click(ctx, t, srv, alice, m, "MySQL"); !r.Ephemeral || r.Data.Content != msgNotRecorded {
		t.Errorf("store down: response %+v, want %q", r, msgNotRecorded)
	}
	mu.Lock()
	got := strings.Join(lookups, ",")
	mu.Unlock()
	if got != open.ID+","+settled.ID+","+broken.ID {
		t.Errorf("lookups = %s", got)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sets) != 0 || len(s.byRef) != 0 {
		t.Errorf("the looked-up sets stayed: %d sets, %d refs", len(s.sets), len(s.byRef))
	}
}

// BenchmarkWatchedSets holds 10,000 sets against the fake Discord, watched
// (Watch) and, side by side, asked (one Ask waiting per set, as before
// Watch), and reports the bytes (heap and stacks) and goroutines each set
// costs. Their messages were posted by another process: both find them, as
// after a restart.
func BenchmarkWatchedSets(b *testing.B) {
	const n = 10000
	srv := discordtest.NewServer(b)
	refs := &MemoryRefs{}
	sets := make([]questions.Set, n)
	for i := range sets {
		sets[i] = surfacetest.SingleChoice(fmt.Sprintf("bench-%d", i))
	}
	ctx := context.Background()
	a := surfacetest.NewAnswers()
	cfg := Config{Token: srv.Token(), ChannelID: discordtest.ChannelID, AllowUsers: []string{alice.ID}, APIURL: srv.URL, Refs: refs}
	poster, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, set := range sets {
		a.Add(set)
		if err := poster.Watch(ctx, set, a); err != nil {
			b.Fatal(err)
		}
	}
	poster.Close()

	// measure holds sets[1:] with hold on a surface already holding
	// sets[0] (so that the connection's own allocations are settled), and
	// returns the bytes (heap and stacks) and goroutines per set held.
	measure := func(b *testing.B, hold func(s *Surface, sets []questions.Set), release func(s *Surface)) {
		var bytesPer, goroutinesPer float64
		for b.Loop() {
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			hold(s, sets[:1])
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			g0 := runtime.NumGoroutine()
			hold(s, sets[1:])
			runtime.GC()
			runtime.ReadMemStats(&after)
			g1 := runtime.NumGoroutine()
			bytesPer = float64(int64(after.HeapAlloc+after.StackInuse)-int64(before.HeapAlloc+before.StackInuse)) / (n - 1)
			goroutinesPer = float64(g1-g0) / (n - 1)
			release(s)
			s.Close()
		}
		b.ReportMetric(bytesPer, "B/set")
		b.ReportMetric(goroutinesPer, "goroutines/set")
	}

	b.Run("watch", func(b *testing.B) {
		measure(b, func(s *Surface, sets []questions.Set) {
			for _, set := range sets {
				if err := s.Watch(ctx, set, a); err != nil {
					b.Fatal(err)
				}
			}
		}, func(s *Surface) {
			for _, set := range sets {
				s.Unwatch(set.ID)
			}
		})
	})

	b.Run("ask", func(b *testing.B) {
		var cancels []context.CancelFunc
		var wg sync.WaitGroup
		measure(b, func(s *Surface, sets []questions.Set) {
			for _, set := range sets {
				actx, cancel := context.WithCancel(ctx)
				cancels = append(cancels, cancel)
				wg.Go(func() { s.Ask(actx, set, a) })
			}
			// Every Ask has found its message and waits.
			want := len(cancels)
			for {
				s.mu.Lock()
				got := len(s.byMsg)
				s.mu.Unlock()
				if got == want {
					break
				}
				time.Sleep(10 * time.Millisecond) // polling a benchmark's setup, not a test's synchronization
			}
		}, func(*Surface) {
			for _, c := range cancels {
				c()
			}
			wg.Wait()
			cancels = nil
		})
	})
}

// TestOtherProcessWatches: every process connected to the bot gets every
// click. The one that watches the set takes it; one that does not, with a
// Lookup or without, never tells the clicker the question is closed.
func TestOtherProcessWatches(t *testing.T) {
	t.Parallel()
	for _, withLookup := range []bool{false, true} {
		t.Run(fmt.Sprintf("lookup=%v", withLookup), func(t *testing.T) {
			t.Parallel()
			srv := discordtest.NewServer(t)
			refs := &MemoryRefs{}
			ctx := testCtx(t)
			set := surfacetest.SingleChoice("other-process")
			store := surfacetest.NewAnswers()
			store.Add(set)
			watcher := newSurface(t, srv, refs)
			other := newSurface(t, srv, refs, func(c *Config) {
				if withLookup {
					c.Lookup = func(context.Context, string) (questions.Set, surfaces.Answers, bool, error) {
						_, done := store.Final(set.ID)
						return set, store, !done, nil
					}
				}
			})
			if err := other.Open(ctx); err != nil {
				t.Fatal(err)
			}
			if err := watcher.Watch(ctx, set, store); err != nil {
				t.Fatal(err)
			}
			if err := srv.WaitReady(ctx, 2); err != nil {
				t.Fatal(err)
			}
			m := questionMessage(ctx, t, srv, set, set.Questions[0])
			if r := click(ctx, t, srv, alice, m, "MySQL"); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
				t.Errorf("response = %+v, want the click taken", r)
			}
			resp, err := store.WaitFinal(ctx, set.ID)
			if err != nil {
				t.Fatal(err)
			}
			surfacetest.CheckResponse(t, name, set, resp, []questions.Answer{surfacetest.Choose(set.Questions[0], "MySQL")}, time.Now().Add(-timeout))
			waitAnswered(ctx, t, srv, m)
		})
	}
}

// TestClickTakenByAnotherProcess: every process connected to the bot gets
// a click. When the one that watches the set took it but its
// acknowledgement has not reached Discord yet, another process that looks
// the set up finds it settled: with this very answer it acknowledges the
// click as taken, never "not open"; another person's click on the settled
// set is still told it is not open.
func TestClickTakenByAnotherProcess(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	refs := &MemoryRefs{}
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("taken-elsewhere")
	store := surfacetest.NewAnswers()
	store.Add(set)
	watcher := newSurface(t, srv, refs)
	if err := watcher.Watch(ctx, set, store); err != nil {
		t.Fatal(err)
	}
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	watcher.Close()
	// What the watching process did with alice's click, before it could
	// acknowledge it.
	q := set.Questions[0]
	if d, err := store.Offer(ctx, questions.Response{SetID: set.ID, Surface: name, By: "alice (discord " + alice.ID + ")", At: time.Now(),
		Answers: []questions.Answer{surfacetest.Choose(q, "MySQL")}}); err != nil || !d.Taken {
		t.Fatalf("offer = %+v, %v", d, err)
	}
	other := newSurface(t, srv, refs, func(c *Config) {
		c.Lookup = func(context.Context, string) (questions.Set, surfaces.Answers, bool, error) {
			_, done := store.Final(set.ID)
			return set, store, !done, nil
		}
	})
	if err := other.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if r := click(ctx, t, srv, alice, m, "MySQL"); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("alice's click, taken by the other process: response = %+v, want it acknowledged as taken", r)
	}
	if r := click(ctx, t, srv, bob, m, "Postgres"); r.Type != discordgo.InteractionResponseChannelMessageWithSource || r.Data == nil || r.Data.Content != msgNotOpen {
		t.Errorf("bob's click on the settled set: response = %+v, want %q", r, msgNotOpen)
	}
	if offers := store.Offers(set.ID); len(offers) != 3 {
		t.Errorf("the store was offered %d answers, want 3 (alice's twice, bob's once; only the first taken)", len(offers))
	}
	if f, _ := store.Final(set.ID); !strings.HasPrefix(f.By, "alice") {
		t.Errorf("final answer by %q, want alice's", f.By)
	}
}

// TestConformanceWatchReplies runs the suite through Watch answering by
// text replies, also given while nothing watched (read by the next Watch).
func TestConformanceWatchReplies(t *testing.T) {
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
			return watchAsAsk{newSurface(t, srv, refs, func(c *Config) { c.AcceptReplies = true })}
		},
		Answer:   answerAs(bob),
		Intrude:  answerAs(mallory),
		Posted:   postedOnce(srv),
		Shown:    func(_ *testing.T, set questions.Set) string { return shown(srv, &c, set) },
		Person:   "bob",
		Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true, AnswerWhileDown: true},
		Timeout:  timeout,
	})
}

// TestWatchAndAskShareASet: a set both watched and asked stays routed
// until both let go of it.
func TestWatchAndAskShareASet(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t)
	s := newSurface(t, srv, nil)
	ctx := testCtx(t)
	set := surfacetest.SingleChoice("watch-and-ask")
	a := surfacetest.NewAnswers()
	a.Add(set)
	askCtx, cancel := context.WithCancel(ctx)
	ch := make(chan error, 1)
	go func() { ch <- s.Ask(askCtx, set, a) }()
	m := questionMessage(ctx, t, srv, set, set.Questions[0])
	if err := s.Watch(ctx, set, a); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-ch; !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask = %v, want the context's end", err)
	}
	if !s.watching(set.ID) {
		t.Fatal("the Ask's end let go of a watched set")
	}
	if r := click(ctx, t, srv, alice, m, "MySQL"); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("response = %+v, want the click taken", r)
	}
	if _, err := a.WaitFinal(ctx, set.ID); err != nil {
		t.Fatal(err)
	}
	s.Unwatch(set.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sets) != 0 {
		t.Errorf("%d sets kept after the Ask and the Watch let go", len(s.sets))
	}
}
