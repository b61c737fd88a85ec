// Package slack is the Slack surface: it posts each question set as one
// Block Kit message (in a thread per run when asked to) with buttons, a
// select menu beyond five options, a multi-select for multi-select
// questions and an "Other…" button that opens a modal, and takes the answer
// of an allowed person who clicks.
//
// It is built from a Config (plain arguments, no YAML) on
// github.com/slack-go/slack, and listens through Socket Mode (no public
// URL). Every envelope is acknowledged as soon as it arrives, before any
// slow work; block IDs carry the set's ID, so the buttons of a message
// posted before a restart still answer (the store decides, through
// Config.Lookup); posting is idempotent through Refs. The tokens never
// reach a log: slack-go's own logging is off and errors are redacted.
package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// name is the surface's Name.
const name = "slack"

var (
	_ surfaces.Surface        = (*Surface)(nil)
	_ surfaces.Watcher        = (*Surface)(nil)
	_ surfaces.Resolver       = (*Surface)(nil)
	_ surfaces.Reminder       = (*Surface)(nil)
	_ surfaces.Closer         = (*Surface)(nil)
	_ surfaces.RunEnder       = (*Surface)(nil)
	_ surfaces.HealthReporter = (*Surface)(nil)
)

// Config is what the Slack surface is built from. The YAML block
// surfaces.slack maps onto its first fields (internal/config checks them,
// each at its key); the last ones are wiring.
type Config struct {
	// BotToken (xoxb-…) calls the Web API; AppToken (xapp-…, with
	// connections:write) opens Socket Mode connections. Neither ever
	// appears in a log.
	BotToken string
	AppToken string
	// SigningSecret, instead of AppToken, takes interactions over HTTP
	// (Handler, mounted by serve) rather than through Socket Mode.
	SigningSecret string
	// ChannelID is the channel questions are posted in.
	ChannelID string
	// ThreadPerRun posts a run's questions in a thread of its own.
	ThreadPerRun bool
	// AllowUsers (U…) and the members of AllowGroups (user groups, S…)
	// may answer; nobody else.
	AllowUsers  []string
	AllowGroups []string
	// APIURL replaces https://slack.com/api/ (tests, proxies).
	APIURL string

	// Refs remembers the messages posted and the answers taken, so that a
	// restarted process finds them. Nil keeps them in memory.
	Refs Refs
	// Lookup finds a set this process neither watches nor asks (a restart,
	// another connection of the same app): the set, where to offer its
	// answers, and whether it is still pending. Nil answers such clicks
	// that the question is closed.
	Lookup func(ctx context.Context, setID string) (set questions.Set, answers surfaces.Answers, pending bool, err error)
	// Offers, if set, keeps the offers to remember an answer (the
	// "Remember for this spec" button) durably, so that a click after a
	// restart or on another instance still takes its offer, once
	// (remember_kept.go). Nil holds them in memory.
	Offers surfaces.RememberOffers
	// RunThread finds the thread a run lives in when the run says so
	// itself (started by a mention in a thread: HandleMentions); "" when
	// it does not. Such a run is asked, and its end said, in that thread
	// even without ThreadPerRun. Nil: no run says so.
	RunThread func(ctx context.Context, runID string) (thread string, err error)
	// Inbox keeps the Events API mentions (EventsHandler) from before
	// Slack is answered until their work ran, so that a crash or a
	// shutdown after the 200 does not lose them: HandleMentions hands
	// what is left to the handler again. Nil keeps nothing (as Socket
	// Mode, whose envelopes are acknowledged before their work).
	Inbox EventInbox
	// HTTPClient makes the Web API calls; nil means one with a 20s
	// timeout.
	HTTPClient *http.Client
	// Logger receives the surface's log. Nil discards it.
	Logger *slog.Logger
}

// Refs is a small durable key-value store (the orchestrator's store;
// surfaces.Refs).
type Refs = surfaces.Refs

// MemoryRefs is a Refs kept in memory (surfaces.MemoryRefs).
type MemoryRefs = surfaces.MemoryRefs

const (
	defaultHTTPTimeout = 20 * time.Second
	// workTimeout bounds the work done after acknowledging an envelope.
	workTimeout = 2 * time.Minute
	// groupTTL is how long the members of a user group are trusted.
	groupTTL = time.Minute
	// groupCheckTimeout bounds listing a user group's members when someone
	// acts.
	groupCheckTimeout = 10 * time.Second
)

// Surface is the Slack surface. It is safe for concurrent use.
type Surface struct {
	cfg     Config
	log     *slog.Logger
	api     *slack.Client
	smc     *socketmode.Client
	refs    Refs
	secrets []string
	allow   map[string]bool

	ctx    context.Context // ends on Close
	cancel context.CancelFunc

	openOnce  sync.Once
	connected chan struct{} // closed on the first hello
	fatalCh   chan struct{} // closed once fatal is set
	stopped   chan struct{} // closed when the socket loop returns

	mu       sync.Mutex
	sets     map[string]*setState
	health   error
	fatal    error
	groups   map[string]groupMembers
	progress map[string]*progressState // by run ID
	threads  sync.Mutex                // serializes thread creation
	// remembers are the offers to keep an answer as a rule (remember.go),
	// by set ID; rememberOrder bounds them, oldest dropped first.
	remembers     map[string]*rememberOffer
	rememberOrder []string
	mentions      MentionHandler // mention.go
	me            string         // the bot's mention, once known
}

type groupMembers struct {
	users map[string]bool
	at    time.Time
}

type setState struct {
	set     questions.Set
	answers surfaces.Answers
	waiters int
	watched bool
	posting chan struct{}
	channel string
	ts      string
	ans     map[string]*answered
	closed  string
	shown   string // what the message shows (fingerprint), to edit only on change
	done    chan struct{}
}

// New builds the surface. It does not connect: the first Ask or Watch does.
func New(cfg Config) (*Surface, error) {
	cfg.BotToken, cfg.AppToken = strings.TrimSpace(cfg.BotToken), strings.TrimSpace(cfg.AppToken)
	switch {
	case cfg.BotToken == "" || cfg.ChannelID == "":
		return nil, errors.New("slack surface: a bot token and a channel ID are required")
	case cfg.AppToken == "" && cfg.SigningSecret == "":
		return nil, errors.New("slack surface: an app-level token (xapp-…) for Socket Mode, or a signing secret for interactivity over HTTP, is required")
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: defaultHTTPTimeout}
	}
	opts := []slack.Option{slack.OptionHTTPClient(client), slack.OptionAppLevelToken(cfg.AppToken)}
	if cfg.APIURL != "" {
		u := cfg.APIURL
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		opts = append(opts, slack.OptionAPIURL(u))
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Surface{
		cfg:       cfg,
		log:       lg.With("surface", name),
		api:       slack.New(cfg.BotToken, opts...),
		refs:      cfg.Refs,
		secrets:   []string{cfg.BotToken, cfg.AppToken, cfg.SigningSecret},
		allow:     map[string]bool{},
		connected: make(chan struct{}),
		fatalCh:   make(chan struct{}),
		stopped:   make(chan struct{}),
		sets:      map[string]*setState{},
		groups:    map[string]groupMembers{},
	}
	for _, u := range cfg.AllowUsers {
		s.allow[u] = true
	}
	if s.refs == nil {
		s.refs = &MemoryRefs{}
	}
	s.smc = socketmode.New(s.api, socketmode.OptionLog(log.New(io.Discard, "", 0)))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Name implements surfaces.Surface.
func (s *Surface) Name() string { return name }

// Close disconnects and ends the work after acknowledgements.
func (s *Surface) Close() error {
	s.cancel()
	s.openOnce.Do(func() { close(s.stopped) }) // never opened: nothing runs
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-s.stopped:
	case <-t.C:
		s.log.Warn("the Socket Mode connection did not stop within 10s")
	}
	return nil
}

// redact removes the tokens from err's text.
func (s *Surface) redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := questions.Redact(msg)
	for _, t := range s.secrets {
		if t != "" {
			clean = strings.ReplaceAll(clean, t, "[REDACTED]")
		}
	}
	if clean == msg {
		return err
	}
	return errors.New(clean)
}

// Health implements surfaces.HealthReporter.
func (s *Surface) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return s.fatal
	}
	return s.health
}

func (s *Surface) setHealth(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health = err
}

// Open connects to Socket Mode once and waits for the first hello. Without
// an app-level token, interactions come over HTTP (Handler): there is
// nothing to open.
func (s *Surface) Open(ctx context.Context) error {
	if s.cfg.AppToken == "" {
		return nil
	}
	s.openOnce.Do(func() { go s.runSocket() })
	select {
	case <-s.connected:
		return nil
	case <-s.fatalCh:
		return s.fatalErr()
	case <-s.ctx.Done():
		return fmt.Errorf("slack: surface closed: %w", surfaces.ErrUnavailable)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Surface) fatalErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Errorf("%w: %w", s.fatal, surfaces.ErrUnavailable)
}

// Ask implements surfaces.Surface: it posts the set's message (or finds
// the one posted before) and offers the answers allowed people give, until
// the set is closed (Ask returns nil) or ctx ends.
func (s *Surface) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSet(set); err != nil {
		return err
	}
	set = s.withGroup(ctx, set, answers) // group.go
	if err := s.Open(ctx); err != nil {
		return err
	}
	st := s.join(set, answers, false)
	defer s.leave(st, false)
	if err := s.ensurePosted(ctx, st); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redact(err)
	}
	select {
	case <-st.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return fmt.Errorf("slack: ask %s: surface closed: %w", set.ID, surfaces.ErrUnavailable)
	case <-s.fatalCh:
		return fmt.Errorf("slack: ask %s: %w", set.ID, s.fatalErr())
	}
}

// Watch implements surfaces.Watcher: it posts the set's message (or finds
// it) and returns; clicks on it are taken by the Socket Mode listener until
// Unwatch.
func (s *Surface) Watch(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSet(set); err != nil {
		return err
	}
	s.mu.Lock()
	if st := s.sets[set.ID]; st != nil && st.watched {
		st.answers = answers
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if err := s.Open(ctx); err != nil {
		return err
	}
	set = s.withGroup(ctx, set, answers) // group.go
	st := s.join(set, answers, true)
	if err := s.ensurePosted(ctx, st); err != nil {
		s.Unwatch(set.ID)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redact(err)
	}
	return nil
}

// Unwatch implements surfaces.Watcher.
func (s *Surface) Unwatch(setID string) {
	s.mu.Lock()
	st := s.sets[setID]
	s.mu.Unlock()
	if st != nil {
		s.leave(st, true)
	}
}

// checkSet rejects what Slack cannot show.
func checkSet(set questions.Set) error {
	switch {
	case set.ID == "":
		return errors.New("slack: ask: set has no ID")
	case len(set.Questions) == 0:
		return fmt.Errorf("slack: ask %s: set has no questions", set.ID)
	case len(blockID(set.ID, len(set.Questions))) > maxBlockID:
		return fmt.Errorf("slack: ask %s: set ID too long for a Slack block ID", set.ID)
	case 2+3*len(set.Questions) > maxBlocks:
		return fmt.Errorf("slack: ask %s: %d questions do not fit in one Slack message", set.ID, len(set.Questions))
	}
	for i, q := range set.Questions {
		switch {
		case q.ID == "":
			return fmt.Errorf("slack: ask %s: question %d has no ID", set.ID, i+1)
		case len(q.Options) > maxOptions:
			return fmt.Errorf("slack: ask %s: question %s has %d options; Slack shows at most %d", set.ID, q.ID, len(q.Options), maxOptions)
		}
	}
	return nil
}

// join registers an Ask (or the Watch) of set.
func (s *Surface) join(set questions.Set, answers surfaces.Answers, watch bool) *setState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sets[set.ID]
	if st == nil {
		st = &setState{set: set, posting: make(chan struct{}, 1), ans: map[string]*answered{}, done: make(chan struct{})}
		s.sets[set.ID] = st
	}
	st.answers = answers
	if watch {
		if st.watched {
			return st
		}
		st.watched = true
	}
	st.waiters++
	return st
}

// leave unregisters an Ask (or the Watch); the last one out forgets the set.
func (s *Surface) leave(st *setState, watch bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if watch {
		if !st.watched {
			return
		}
		st.watched = false
	}
	st.waiters--
	if st.waiters <= 0 && s.sets[st.set.ID] == st {
		delete(s.sets, st.set.ID)
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

// finish closes st: its Asks return.
func (s *Surface) finish(st *setState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !isDone(st) {
		close(st.done)
	}
}

// call runs a Web API call, waiting out rate limits (429 with
// Retry-After) until ctx ends.
func (s *Surface) call(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	for {
		err := fn(ctx)
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) {
			if err != nil {
				return s.redact(fmt.Errorf("slack: %s: %w", what, err))
			}
			return nil
		}
		wait := rl.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return s.redact(fmt.Errorf("slack: %s: rate limited for %s, past its deadline: %w", what, wait, err))
		}
		s.log.Info("rate limited, waiting", "call", what, "retry_after", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("slack: %s: rate limited: %w", what, ctx.Err())
		}
	}
}
