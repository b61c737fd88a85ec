// Package web is the web inbox and run timeline that `orchestrator serve`
// serves next to /healthz and /metrics when serve.web.enabled is set: every
// pending question across runs, answerable in place; the runs with their
// status; a run's timeline, live while it runs; and the JSON API the pages
// are built on (documented in README.md, "Web inbox").
//
// Everything is denied by default: a request is served only for a named
// user (bearer token, or the session cookie the sign-in form sets) or for a
// user a trusted reverse proxy vouches for and serve.web.allow lists. Every
// form carries a CSRF token, the Content-Security-Policy allows no inline
// script, and what the model or a person wrote is escaped wherever shown.
//
// The package owns no run logic: it reads and acts through Backend, which
// the serve wiring implements on top of the store. An answer goes the same
// way as on every surface (Backend.Offer: validation, first valid answer
// wins), with the browser user as the answerer and "web" as the surface.
package web

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// SurfaceName is the surface recorded for answers given here; the other
// surfaces show "answered elsewhere by alice on web".
const SurfaceName = "web"

// ErrNotFound is what Backend returns (wrapped) for an unknown run.
var ErrNotFound = errors.New("not found")

// Backend is what the web pages read and do. The serve wiring implements it
// on top of the store. Safe for concurrent use.
type Backend interface {
	// Pending lists every question set still waiting for an answer.
	Pending(ctx context.Context) ([]Pending, error)
	// Runs lists the runs, newest first.
	Runs(ctx context.Context) ([]Run, error)
	// Run reads one run with its timeline; an unknown ID wraps ErrNotFound.
	Run(ctx context.Context, id string) (RunDetail, error)
	// Offer hands an answer to the store, which decides: first valid
	// answer wins. An error is a failure to decide; a decision against
	// resp is not an error.
	Offer(ctx context.Context, resp questions.Response) (Decision, error)
	// Cancel ends a run for good on behalf of by; its questions expire.
	Cancel(ctx context.Context, runID, by string) error
	// Transcript opens the raw NDJSON the CLI wrote in turn seq of a run.
	Transcript(ctx context.Context, runID string, seq int) (io.ReadCloser, error)
}

// GroupOfferer is implemented by a Backend that answers the same question
// in several runs at once (issue 28): Pending lists with each set, in
// Set.Group, the other runs its question waits in, and the inbox offers to
// answer them all. Whoever may use the inbox may answer in every run (it
// has no roles per run or spec), so OfferGroup answers the whole group as
// it stands, in one decision of the store; the first outcome is resp's
// set's.
type GroupOfferer interface {
	OfferGroup(ctx context.Context, resp questions.Response) (questions.GroupDecision, error)
}

// Decision is what became of an offered answer (the same fields as the
// surfaces' Answers contract).
type Decision struct {
	// Taken: the answer was stored.
	Taken bool
	// Invalid says why the answer was refused; nil otherwise.
	Invalid error
	// Final is the set's complete answer once it has one.
	Final *questions.Response
	// Closed: the set takes no answer any more (answered, expired,
	// cancelled); with Final nil it expired or its run was cancelled.
	Closed bool
}

// Pending is a question set waiting for an answer.
type Pending struct {
	Set       questions.Set
	Spec      string
	RunTitle  string
	Surfaces  []string
	AskedAt   time.Time
	Reminders int // reminders and escalations sent so far
	// Given holds the answers given so far to a multi-question set.
	Given questions.Response
}

// Run is one run as listed.
type Run struct {
	ID        string
	Spec      string
	Title     string
	Status    string // running, waiting, interrupted, done, failed, cancelled, stopped
	WorkDir   string
	Surfaces  []string
	SessionID string
	FinalText string
	CostUSD   float64
	Turns     int
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RunDetail is a run with its timeline and decision log.
type RunDetail struct {
	Run
	Items     []Item
	Decisions []DecisionEntry
	Links     []Link
}

// Item kinds of a run's timeline.
const (
	ItemTurn     = "turn"     // a turn started (Text: its kind)
	ItemText     = "text"     // the model's text (markdown)
	ItemTool     = "tool"     // a tool use (Tool, Text: its input)
	ItemQuestion = "question" // a question set was asked (Set)
	ItemAnswer   = "answer"   // it was answered (Set, Response)
	ItemResult   = "result"   // a turn finished (Text: status, CostUSD)
)

// Item is one entry of a run's timeline.
type Item struct {
	Kind     string
	Turn     int
	At       time.Time
	Text     string
	Tool     string
	CostUSD  float64
	Set      *questions.Set
	Response *questions.Response
	// Transcript: the turn's transcript can be downloaded (ItemTurn).
	Transcript bool
}

// DecisionEntry is one question of a run with its answer.
type DecisionEntry struct {
	SetID    string
	Question string
	Header   string
	Answer   string
	By       string
	Surface  string
	State    string
	At       time.Time
}

// Link is a place the run is also seen (a GitHub issue or pull request).
type Link struct {
	Label string
	URL   string
}

// Resumer drives an interrupted run again, on behalf of by. A run that is
// not interrupted, or is driven already, wraps ErrNotResumable; an unknown
// one ErrNotFound.
type Resumer interface {
	Resume(ctx context.Context, runID, by string) error
}

// ErrNotResumable is what Resumer returns (wrapped) for a run it cannot
// resume now.
var ErrNotResumable = errors.New("cannot be resumed now")

// User is a person who signs in with a token.
type User struct {
	Name string
	// TokenSHA256 is the hex SHA-256 of the token.
	TokenSHA256 string
	// Role is what they may do beyond answering; default RoleAnswer.
	Role Role
}

// Config is what a Server is made of.
type Config struct {
	Backend Backend
	Users   []User
	// TrustedProxies may vouch for a user with ProxyHeader; from other
	// addresses (or without ProxySecret) the header is ignored.
	TrustedProxies []netip.Prefix
	// ProxyHeader is the one header a trusted proxy names the person in:
	// the one it sets itself, overwriting what the browser sent. Default
	// DefaultProxyHeader. No other header is read for who someone is.
	ProxyHeader string
	// ProxySecret, when set, must be the value of ProxySecretHeader
	// (default DefaultProxySecretHeader) for a trusted proxy to be
	// believed: a process on the proxy's host (the agent's tools, when it
	// is this host) does not know it.
	ProxySecretHeader string
	ProxySecret       string
	// Allow lists who a proxy may let in (values of ProxyHeader); "*" is
	// all.
	Allow []string
	// AnswerMaxBytes refuses longer answers (run.answer_max_bytes); 0 is
	// no limit.
	AnswerMaxBytes int
	// SessionTTL is how long a sign-in lasts; default 12h.
	SessionTTL time.Duration
	// Done ends the live streams (server-sent events) when closed, so
	// that a server shutdown does not wait for them.
	Done <-chan struct{}
	// Resume, when set, offers to resume an interrupted run (a button on
	// its page, POST /api/runs/ID/resume).
	Resume Resumer
	// Start, when set, lets people whose role allows it start runs (a
	// form in the inbox, POST /api/runs).
	Start Starter
	// ProxyRole is the role of the people a trusted proxy lets in;
	// default RoleAnswer.
	ProxyRole Role
	// Schedules, when set, lists the scheduled specs with a Pause or
	// Resume button each (GET /schedules, POST /api/schedules/SPEC/pause
	// and /resume; schedules.go).
	Schedules Schedules
	// Poll is how often a live run page looks for changes; default 500ms.
	Poll   time.Duration
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Server serves the web inbox. Create it with New.
type Server struct {
	cfg   Config
	log   *slog.Logger
	tmpl  *template.Template
	mux   *http.ServeMux
	key   []byte // signs CSRF tokens of proxy and token identities
	users map[[32]byte]string
	roles map[string]Role // by user name

	mu       sync.Mutex
	sessions map[string]session
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("web: no Backend")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ProxyHeader == "" {
		cfg.ProxyHeader = DefaultProxyHeader
	}
	if cfg.ProxySecretHeader == "" {
		cfg.ProxySecretHeader = DefaultProxySecretHeader
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, sessions: map[string]session{}, key: make([]byte, 32)}
	rand.Read(s.key)
	users, err := parseUsers(cfg.Users)
	if err != nil {
		return nil, err
	}
	s.users = users
	if err := s.setRoles(); err != nil {
		return nil, err
	}
	s.tmpl, err = template.New("").Funcs(s.funcs()).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /signin", s.signinPage)
	mux.HandleFunc("POST /signin", s.signin)
	mux.HandleFunc("POST /signout", s.authed(s.signout))
	mux.HandleFunc("GET /{$}", s.authed(s.inbox))
	mux.HandleFunc("POST /answer", s.authed(s.answerForm))
	mux.HandleFunc("GET /runs", s.authed(s.runsPage))
	mux.HandleFunc("GET /runs/{id}", s.authed(s.runPage))
	mux.HandleFunc("GET /runs/{id}/events", s.authed(s.runEvents))
	mux.HandleFunc("GET /runs/{id}/transcripts/{seq}", s.authed(s.transcript))
	mux.HandleFunc("POST /runs/{id}/cancel", s.authed(s.cancelForm))
	mux.HandleFunc("GET /api/pending", s.authed(s.apiPending))
	mux.HandleFunc("GET /api/runs", s.authed(s.apiRuns))
	mux.HandleFunc("GET /api/runs/{id}", s.authed(s.apiRun))
	mux.HandleFunc("POST /api/answer", s.authed(s.apiAnswer))
	mux.HandleFunc("POST /api/runs/{id}/cancel", s.authed(s.apiCancel))
	if cfg.Start != nil {
		mux.HandleFunc("POST /runs", s.authed(s.startForm))
		mux.HandleFunc("POST /api/runs", s.authed(s.apiStart))
	}
	if cfg.Resume != nil {
		mux.HandleFunc("POST /runs/{id}/resume", s.authed(s.resumeForm))
		mux.HandleFunc("POST /api/runs/{id}/resume", s.authed(s.apiResume))
	}
	if cfg.Schedules != nil { // schedules.go
		mux.HandleFunc("GET /schedules", s.authed(s.schedulesPage))
		mux.HandleFunc("POST /schedules/{spec}/pause", s.authed(s.pauseForm))
		mux.HandleFunc("POST /schedules/{spec}/resume", s.authed(s.resumeScheduleForm))
		mux.HandleFunc("GET /api/schedules", s.authed(s.apiSchedules))
		mux.HandleFunc("POST /api/schedules/{spec}/pause", s.authed(s.apiPause))
		mux.HandleFunc("POST /api/schedules/{spec}/resume", s.authed(s.apiResumeSchedule))
	}
	s.mux = mux
	return s, nil
}

// Handler serves every page, /static/ and /api/, with the security headers
// and cross-origin protection in front.
func (s *Server) Handler() http.Handler {
	cop := http.NewCrossOriginProtection()
	h := cop.Handler(s.mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}
