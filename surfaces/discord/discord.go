// Package discord is the Discord surface: it posts each question as a
// message with buttons, a select menu and an "Other…" form in a channel (or a
// thread per run), and takes the answer of an allowed person who clicks.
//
// It is built from a Config (plain arguments, no YAML) on
// github.com/bwmarrin/discordgo. Every interaction is acknowledged before
// any slow work; custom IDs carry the set and question IDs so the buttons of
// a message posted before a restart still answer; posting is idempotent
// through Refs. The token never reaches a log: discordgo's own logging is
// off and the surface's log is redacted.
package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// name is the surface's Name.
const name = "discord"

const (
	defaultHTTPTimeout = 20 * time.Second
	// workTimeout bounds the work done after acknowledging an interaction.
	workTimeout = 2 * time.Minute
	// logOff is below discordgo.LogError: discordgo logs nothing.
	logOff = discordgo.LogError - 1
)

var (
	_ surfaces.Surface  = (*Surface)(nil)
	_ surfaces.Resolver = (*Surface)(nil)
	_ surfaces.Reminder = (*Surface)(nil)
)

// Surface is the Discord surface. It is safe for concurrent use.
type Surface struct {
	cfg        Config
	token      string // without "Bot "
	log        *slog.Logger
	client     *http.Client
	health     *healthTransport
	dg         *discordgo.Session
	refs       Refs
	allowUsers map[string]bool
	allowRoles map[string]bool

	ctx    context.Context // ends on Close: bounds the work after an ack
	cancel context.CancelFunc

	connMu  sync.Mutex
	attempt *connectAttempt
	opened  bool
	closed  bool
	unhook  []func()
	// fatal is why Discord refused the gateway for good (fatal.go), and
	// fatalCh is closed once it is set.
	fatal   error
	fatalCh chan struct{}

	mu    sync.Mutex
	sets  map[string]*setState // by set ID, while watched or some Ask waits
	byRef map[string]*qState   // by ref(set, question)
	byMsg map[string]*qState   // by message ID
	// finished remembers who answered the questions of the last sets done
	// (ref → name), to tell a late click; finishedOrder bounds it to
	// maxFinished refs, oldest dropped first.
	finished      map[string]string
	finishedOrder []string
	// remembers are the offers to keep an answer as a rule (remember.go),
	// by their key; rememberOrder bounds them, oldest dropped first.
	remembers     map[string]*rememberOffer
	rememberOrder []string
	threads       sync.Mutex        // serializes thread creation
	guilds        map[string]string // channel ID → guild ID
}

// maxFinished bounds the refs remembered once their set is done: a late
// click on a message whose edit has not landed yet is told who answered;
// older messages have their buttons disabled.
const maxFinished = 1024

type connectAttempt struct {
	done chan struct{}
	err  error
}

type setState struct {
	set     questions.Set
	answers surfaces.Answers // where answers are offered (the latest Ask's or Watch's)
	waiters int              // Asks, the Watch and interactions that hold the set
	watch   *watchToken      // the Watch that holds the set, if any
	posting chan struct{}    // a one-slot lock for posting
	qs      []*qState
	done    chan struct{}   // closed once the set is closed (answered, expired)
	replies map[string]bool // reply message IDs already decided; nil until one is
}

type qState struct {
	st        *setState
	idx       int
	q         questions.Question
	ref       string
	channelID string
	messageID string
	ans       *answered // claimed
	at        time.Time
	settled   bool // persisted and shown
	// shown: the message shows ans, or is being edited to by whoever set
	// it. Who finds ans set and the message not shown when the message
	// becomes known (posted or found while the set was answered) shows it.
	shown bool
}

// New builds the surface. It does not connect: the first Ask does.
func New(cfg Config) (*Surface, error) {
	token := strings.TrimPrefix(strings.TrimSpace(cfg.Token), "Bot ")
	if token == "" || cfg.ChannelID == "" {
		return nil, errors.New("discord surface: a token and a channel ID are required")
	}
	client, err := newHTTPClient(cfg.HTTPClient, cfg.APIURL, cfg.GatewayURL)
	if err != nil {
		return nil, fmt.Errorf("discord surface: %w", err)
	}
	var s *Surface
	ht := &healthTransport{base: client.Transport, log: func() *slog.Logger {
		if s == nil {
			return nil
		}
		return s.log
	}}
	client.Transport = ht
	dg, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("discord surface: new session: %w", err)
	}
	dg.LogLevel = logOff
	dg.Debug = false
	dg.Client = client
	dg.StateEnabled = false
	dg.Compress = false
	dg.Identify.Compress = false
	dg.Identify.Intents = discordgo.IntentsGuilds
	if cfg.AcceptReplies {
		dg.Identify.Intents |= discordgo.IntentsGuildMessages | discordgo.IntentsMessageContent
	}
	s = &Surface{
		health:     ht,
		cfg:        cfg,
		token:      token,
		log:        newRedactingLogger(cfg.Logger, token).With("surface", name),
		client:     client,
		dg:         dg,
		refs:       cfg.Refs,
		allowUsers: set(cfg.AllowUsers),
		allowRoles: set(cfg.AllowRoles),
		sets:       map[string]*setState{},
		byRef:      map[string]*qState{},
		byMsg:      map[string]*qState{},
		finished:   map[string]string{},
		remembers:  map[string]*rememberOffer{},
		guilds:     map[string]string{},
		fatalCh:    make(chan struct{}),
	}
	dg.OnFatalClose = s.onFatalClose
	if s.refs == nil {
		s.refs = &MemoryRefs{}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.unhook = append(s.unhook,
		dg.AddHandler(s.onInteraction),
		dg.AddHandler(s.onReady),
		dg.AddHandler(s.onResumed),
	)
	if cfg.AcceptReplies {
		s.unhook = append(s.unhook, dg.AddHandler(s.onMessage))
	}
	return s, nil
}

func set(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// Name implements surfaces.Surface.
func (s *Surface) Name() string { return name }

func (s *Surface) redact(err error) error { return redactErr(err, s.token) }

// Ask implements surfaces.Surface: it posts one message per question of set
// (or finds those already posted) and offers to answers each answer an
// allowed person gives, question by question, until the set is closed
// (Ask then returns nil) or ctx ends.
func (s *Surface) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSet(set); err != nil {
		return err
	}
	if err := s.Open(ctx); err != nil {
		return err
	}
	set = s.withGroup(ctx, set, answers) // group.go
	st := s.join(set, answers)
	defer s.leave(st)
	if err := s.ensurePosted(ctx, st); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redact(err)
	}
	if s.cfg.AcceptReplies {
		s.catchUp(ctx, st)
	}
	select {
	case <-st.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return fmt.Errorf("discord: ask %s: surface closed: %w", set.ID, surfaces.ErrUnavailable)
	case <-s.fatalCh:
		return fmt.Errorf("ask %s: %w", set.ID, s.fatalErr())
	}
}

// checkSet rejects what Discord cannot show.
func checkSet(set questions.Set) error {
	if set.ID == "" {
		return errors.New("discord: ask: set has no ID")
	}
	if len(set.Questions) == 0 {
		return fmt.Errorf("discord: ask %s: set has no questions", set.ID)
	}
	seen := map[string]bool{}
	for i, q := range set.Questions {
		switch {
		case q.ID == "":
			return fmt.Errorf("discord: ask %s: question %d has no ID", set.ID, i+1)
		case seen[q.ID]:
			return fmt.Errorf("discord: ask %s: question ID %q appears twice", set.ID, q.ID)
		case len(q.Options) > maxOptions:
			return fmt.Errorf("discord: ask %s: question %s has %d options; Discord shows at most %d", set.ID, q.ID, len(q.Options), maxOptions)
		}
		seen[q.ID] = true
	}
	return nil
}

// join registers an Ask of set and returns the set's state.
func (s *Surface) join(set questions.Set, answers surfaces.Answers) *setState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.sets[set.ID]; st != nil {
		st.waiters++
		st.answers = answers
		return st
	}
	st := &setState{set: set, answers: answers, waiters: 1, posting: make(chan struct{}, 1),
		done: make(chan struct{})}
	for i, q := range set.Questions {
		qs := &qState{st: st, idx: i, q: q, ref: ref(set.ID, q.ID)}
		st.qs = append(st.qs, qs)
		s.byRef[qs.ref] = qs
	}
	s.sets[set.ID] = st
	return st
}

// leave unregisters an Ask; the last one out forgets the set (and what
// replies to it were decided). Who answered the questions of a closed set
// is remembered among the last maxFinished.
func (s *Surface) leave(st *setState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.waiters--
	if st.waiters > 0 {
		return
	}
	if s.sets[st.set.ID] == st {
		delete(s.sets, st.set.ID)
	}
	for _, qs := range st.qs {
		if s.byRef[qs.ref] == qs {
			delete(s.byRef, qs.ref)
		}
		if s.byMsg[qs.messageID] == qs {
			delete(s.byMsg, qs.messageID)
		}
		if qs.ans != nil && isDone(st) {
			s.rememberFinished(qs.ref, qs.ans.Name)
		}
	}
}

func isDone(st *setState) bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// rememberFinished records who answered ref, dropping the oldest refs past
// maxFinished; s.mu is held.
func (s *Surface) rememberFinished(ref, who string) {
	if _, ok := s.finished[ref]; ok {
		return
	}
	s.finished[ref] = who
	s.finishedOrder = append(s.finishedOrder, ref)
	if n := len(s.finishedOrder) - maxFinished; n > 0 {
		for _, r := range s.finishedOrder[:n] {
			delete(s.finished, r)
		}
		s.finishedOrder = append(s.finishedOrder[:0], s.finishedOrder[n:]...)
	}
}

// offer offers a, an answer to the question of qs, to the set's Answers.
func (s *Surface) offer(ctx context.Context, qs *qState, a *answered) (surfaces.Decision, error) {
	s.mu.Lock()
	answers, set := qs.st.answers, qs.st.set
	s.mu.Unlock()
	ans := a.Answer
	ans.QuestionID = qs.q.ID
	d, err := answers.Offer(ctx, questions.Response{SetID: set.ID, Answers: []questions.Answer{ans}, By: a.By, Surface: name, At: time.Now()})
	if err != nil {
		s.log.Error("offer an answer", "set", set.ID, "question", qs.q.ID, "err", err)
	}
	return d, err
}

// tooLate says to a person answering qs that the set was closed (d).
func (s *Surface) tooLate(qs *qState, d surfaces.Decision) string {
	s.mu.Lock()
	a := qs.ans
	s.mu.Unlock()
	switch {
	case a != nil:
		return fmt.Sprintf(msgAnswered, escape(a.Name, 100, false))
	case d.Final != nil && d.Final.Surface == name:
		return fmt.Sprintf(msgAnswered, escape(d.Final.By, 100, false))
	case d.Final != nil:
		return fmt.Sprintf(msgAnsweredElsewhere, escape(d.Final.By, 100, false), escape(d.Final.Surface, 40, false))
	default:
		return msgClosed
	}
}

// decided acts on the decision about a, an answer to qs that was taken,
// refused or too late: a taken answer is remembered and shown on the
// question's message; a closed set ends its Asks, and a final answer taken
// elsewhere is shown on the messages that do not show one yet.
func (s *Surface) decided(ctx context.Context, qs *qState, a *answered, d surfaces.Decision) {
	if d.Taken {
		s.mu.Lock()
		if qs.ans == nil {
			qs.ans, qs.at = a, time.Now()
		}
		s.mu.Unlock()
		s.settle(ctx, qs)
	}
	if !d.Closed {
		return
	}
	if d.Final != nil {
		if err := s.Resolve(ctx, qs.st.set, *d.Final); err != nil {
			s.log.Warn("show the final answer", "set", qs.st.set.ID, "err", err)
		}
	}
	s.finish(qs.st)
}

// settle persists the answer taken for qs and shows it on its message,
// once.
func (s *Surface) settle(ctx context.Context, qs *qState) {
	s.mu.Lock()
	a, set, channelID, messageID, settled := qs.ans, qs.st.set, qs.channelID, qs.messageID, qs.settled
	qs.settled = true
	show := !settled && messageID != "" && !qs.shown
	if show {
		qs.shown = true
	}
	s.mu.Unlock()
	if settled {
		return
	}
	if b, err := json.Marshal(a); err == nil {
		if err := surfaces.SetRunRef(ctx, s.refs, set.RunID, s.answerKey(set.ID, qs.q.ID), string(b)); err != nil {
			s.log.Error("remember answer", "set", set.ID, "question", qs.q.ID, "err", err)
		}
	}
	// A message still being posted shows the answer once its post is
	// recorded (messageKnownLocked).
	if show {
		s.show(ctx, channelID, messageID, set, qs.idx, a)
	}
	s.log.Info("answered", "set", set.ID, "question", qs.q.ID, "by", a.By)
}

// finish closes st: its Asks return.
func (s *Surface) finish(st *setState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !isDone(st) {
		close(st.done)
	}
}

// finishIfShown closes st when every question shows an answer taken before
// (a restart): the store has them all.
func (s *Surface) finishIfShown(st *setState) {
	s.mu.Lock()
	for _, qs := range st.qs {
		if qs.ans == nil || !qs.settled {
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	s.finish(st)
}
