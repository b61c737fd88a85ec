package slack

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/orchestrator-dev/orchestrator/surfaces/slack/slacktest"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// mentions is a MentionHandler that records what it is handed, once per
// event key as the store does.
type mentions struct {
	mu      sync.Mutex
	seen    map[string]bool
	started []Mention
	refused []Mention
}

func (h *mentions) first(m Mention) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	if h.seen[m.Key()] {
		return false
	}
	h.seen[m.Key()] = true
	return true
}

func (h *mentions) Refuse(ctx context.Context, m Mention) (bool, error) {
	if !h.first(m) {
		return false, nil
	}
	h.mu.Lock()
	h.refused = append(h.refused, m)
	h.mu.Unlock()
	return true, nil
}

func (h *mentions) Start(ctx context.Context, m Mention) (string, error) {
	if !h.first(m) {
		return "", nil
	}
	h.mu.Lock()
	h.started = append(h.started, m)
	h.mu.Unlock()
	return "Started run run-m1 <!channel>.", nil
}

func (h *mentions) counts() (started, refused int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.started), len(h.refused)
}

// TestMentionStartsRunInItsThread: an allowed person's app_mention,
// delivered twice, is handed to Start once with its event's key and
// thread, and the reply is said in that thread; a stranger's is refused
// with one ephemeral message however often it comes; a bot's is ignored.
// A run that lives in the mention's thread (RunThread) is asked there,
// without thread_per_run.
func TestMentionStartsRunInItsThread(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := slacktest.NewServer(t)
	srv.SetGroup("S0GROUP001", bob.ID)
	set := surfacetest.SingleChoice("mention")
	var thread string
	var tmu sync.Mutex
	s := newSurface(t, srv, &MemoryRefs{}, func(c *Config) {
		c.ThreadPerRun = false
		c.RunThread = func(_ context.Context, run string) (string, error) {
			tmu.Lock()
			defer tmu.Unlock()
			if run == set.RunID {
				return thread, nil
			}
			return "", nil
		}
	})
	h := &mentions{}
	s.HandleMentions(h)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	send := func(payload map[string]any) {
		t.Helper()
		if _, err := srv.Send("events_api", payload, false); err != nil {
			t.Fatal(err)
		}
	}

	top := srv.PostAsUser(alice, "", "<@"+slacktest.BotUserID+"> run fix-bug please")
	for range 2 { // Slack redelivers an event it thinks was lost
		send(slacktest.AppMention("Ev0001", alice, top, ""))
	}
	reply, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Started run") })
	if err != nil {
		t.Fatal(err)
	}
	if reply.ThreadTS != top.TS || strings.Contains(reply.Text, "<!channel>") {
		t.Errorf("reply %+v: want it in the mention's thread %s, escaped", reply, top.TS)
	}

	stranger := srv.PostAsUser(mallory, top.TS, "<@"+slacktest.BotUserID+"> run deploy")
	bot := srv.PostAsUser(bob, "", "<@"+slacktest.BotUserID+"> run something")
	for range 2 {
		send(slacktest.AppMention("Ev0002", mallory, stranger, ""))
	}
	send(slacktest.AppMention("Ev0003", bob, bot, "B0OTHERBOT"))
	if err := srv.WaitFor(ctx, func() bool { return len(srv.Ephemerals()) > 0 }); err != nil {
		t.Fatal(err)
	}
	// A last event from alice, handled after the others were: their
	// handling is over when it shows.
	last := srv.PostAsUser(alice, "", "<@"+slacktest.BotUserID+"> tidy the docs")
	send(slacktest.AppMention("Ev0004", alice, last, ""))
	if err := srv.WaitFor(ctx, func() bool { n, _ := h.counts(); return n == 2 }); err != nil {
		t.Fatal(err)
	}
	eph := srv.Ephemerals()
	if len(eph) != 1 || eph[0].User != mallory.ID || eph[0].ThreadTS != top.TS {
		t.Errorf("ephemerals = %+v, want one refusal to mallory in the thread", eph)
	}
	h.mu.Lock()
	started, refused := append([]Mention(nil), h.started...), len(h.refused)
	h.mu.Unlock()
	m := started[0]
	if m.Key() != "slack:event:Ev0001" || m.User != alice.ID || m.Thread() != top.TS || m.BotMention != "<@"+slacktest.BotUserID+">" ||
		!strings.HasPrefix(m.Text, m.BotMention+" run fix-bug") {
		t.Errorf("started = %+v, want alice's mention Ev0001 in thread %s", m, top.TS)
	}
	if started[1].EventID != "Ev0004" || refused != 1 {
		t.Errorf("started %+v, refused %d: want Ev0001 and Ev0004 started, mallory refused once, the bot ignored", started, refused)
	}

	// The run started lives in the mention's thread: its question is
	// asked there.
	tmu.Lock()
	thread = top.TS
	tmu.Unlock()
	if err := s.Watch(ctx, set, surfacetest.NewAnswers()); err != nil {
		t.Fatal(err)
	}
	if q := setMessage(ctx, t, srv, set); q.ThreadTS != top.TS {
		t.Errorf("question %+v: want it in the mention's thread %s", q, top.TS)
	}
}
