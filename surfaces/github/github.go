// Package github asks questions in GitHub issue comments and offers the
// answers people reply with to the store.
//
// One comment per question set, readable on its own, carries a hidden marker
// with the set's and its questions' IDs, so that asking again (a retry, a
// restart) finds it instead of posting twice. Replies on the same issue after
// it are read with the questions package; only people with write, maintain or
// admin permission, or on the allowlist, may answer. Each reply is decided
// once, ever, against the sets the issue shows waiting when it was posted
// (a question comment edited to show its answer records the reply that
// closed it), and the decision is kept in a Ledger (the store): live, after a
// restart and in any process, a reply means the same. Answers are found by
// polling the repository's issue comments (one conditional request per
// repository per interval, whatever the number of pending questions) or by
// the issue_comment webhook.
//
// A Client is one GitHub (base URL and credentials); the surfaces made from
// it share its pollers, one per repository, and its webhook handler.
package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

const surfaceName = "github"

// Compile-time checks that Surface provides what the run loop uses.
var (
	_ surfaces.Surface        = (*Surface)(nil)
	_ surfaces.HealthReporter = (*Surface)(nil)
	_ surfaces.Resolver       = (*Surface)(nil)
	_ surfaces.Reminder       = (*Surface)(nil)
	_ surfaces.ResumeNotifier = (*Surface)(nil)
)

// Defaults.
const (
	DefaultBaseURL        = "https://api.github.com/"
	DefaultPollInterval   = 15 * time.Second
	DefaultPermissionTTL  = time.Minute
	DefaultMaxAnswerBytes = 8192
	DefaultWriteInterval  = time.Second
	// maxCached bounds the caches of where sets and runs were asked: an
	// entry dropped is found again on GitHub by its marker.
	maxCached = 1024
	// overlap is how far back each poll's since reaches before the newest
	// comment seen, for comments that show up in the listing late.
	overlap = 30 * time.Second
	// cursorStep is the least the since cursor moves by.
	cursorStep = 2 * time.Minute
)

// AppAuth authenticates as a GitHub App installation.
type AppAuth struct {
	ID             int64
	InstallationID int64
	// PrivateKeyFile is the app's PEM private key; PrivateKey, if set, is
	// used instead.
	PrivateKeyFile string
	PrivateKey     []byte
}

// ClientConfig says how to reach one GitHub.
type ClientConfig struct {
	// BaseURL is the REST API root: https://api.github.com/ (the default),
	// https://HOST/api/v3/ for GitHub Enterprise Server, or a test server.
	BaseURL string
	// Token is a personal access token (or any bearer token). Exactly one
	// of Token and App.
	Token string
	App   *AppAuth
	// PollInterval is how often each repository's comments are polled
	// while questions wait. Default 15s.
	PollInterval time.Duration
	// WebhookSecret verifies webhook deliveries; WebhookHandler refuses to
	// start without one.
	WebhookSecret string
	// OnIdleDelivery, if set, is called with the repository ("owner/name")
	// and the issue of a webhook delivery of a new comment that no Ask of
	// this client waits for: on a cluster, the Asks wait on another
	// instance (the leader), which the serve daemon nudges to read it at
	// once (PollNow). It is called after the delivery was answered, on a
	// goroutine that Close waits for: keep it short.
	OnIdleDelivery func(repo string, issue int)
	// PermissionTTL is how long a collaborator permission lookup is
	// trusted. Default one minute.
	PermissionTTL time.Duration
	// MaxRateLimitWait is the longest rate-limit wait sat out before an
	// API call fails instead. Default 15 minutes.
	MaxRateLimitWait time.Duration
	// ProgressInterval is the least time between two edits of a run's
	// status comment (SurfaceConfig.Progress). Default 10s.
	ProgressInterval time.Duration
	// WriteInterval is the least time between two content-creating requests
	// (posting or editing comments, opening issues, reacting), as GitHub
	// asks of integrations. Default one second; negative: no pacing (for
	// tests against a fake).
	WriteInterval time.Duration
	// Ledger keeps what became of each comment read as a possible answer,
	// durably, so that a restart neither decides a comment again nor posts
	// its notices twice (the store). Default: kept in memory, for this
	// process only.
	Ledger Ledger
	// RequestTimeout bounds each request to GitHub (each attempt, from
	// sending it to reading its body): one that GitHub does not answer in
	// time fails, and the surface reports itself unhealthy (Health) until
	// GitHub answers again. Default DefaultRequestTimeout; negative: none.
	RequestTimeout time.Duration
	// HTTPClient sends the requests (its Transport is wrapped, not
	// changed). Default: a client with http.DefaultTransport.
	HTTPClient *http.Client
	Logger     *slog.Logger

	// Test hooks: the clock and the sleep used by polling and rate-limit
	// waits, and the first wait before retrying after a 5xx or a network
	// error (default one second).
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error
	backoff time.Duration
}

// SurfaceConfig says where and from whom one surface takes answers.
type SurfaceConfig struct {
	// Repo is "owner/name".
	Repo string
	// Issue is the issue to ask in; 0 opens one issue per run (Set.RunID),
	// titled from Set.Title, found again after a restart by a hidden marker.
	Issue int
	// Labels are put on the issues opened per run.
	Labels []string
	// Allow lists logins that may answer besides those with write,
	// maintain or admin permission; with AllowOnly, only them.
	Allow     []string
	AllowOnly bool
	// MaxAnswerBytes bounds the comment read as an answer. Default 8192.
	MaxAnswerBytes int
	// Progress keeps one status comment per run on the run's issue: the
	// current step, tool uses and cost, edited at most every
	// ClientConfig.ProgressInterval, and a summary when the run ends.
	Progress bool
	// LeaveIssueOpen keeps a run's own issue (Issue 0) open when the run
	// ends; by default it is closed with a final comment (RunEnded).
	LeaveIssueOpen bool
}

// Config is ClientConfig and SurfaceConfig together, for New.
type Config struct {
	ClientConfig
	SurfaceConfig
}

// Client is one GitHub: its API client, a poller per repository and the
// webhook handler. Safe for concurrent use.
type Client struct {
	api      *gh.Client
	log      *slog.Logger
	interval time.Duration
	secret   []byte
	permTTL  time.Duration
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error
	backoff  time.Duration
	ledger   Ledger
	// durable: the Ledger was given (the store), and keeps the number of
	// each run's own issue from its creation on.
	durable bool
	onIdle  func(repo string, issue int)
	// transport paces writes and waits out rate limits below go-github.
	transport *rateLimitTransport
	// appJWT calls the API as the App itself (its JWT), to learn its bot's
	// login; nil under a token.
	appJWT *gh.Client

	idMu sync.Mutex // guards me; held while it is looked up
	me   identity   // who the orchestrator posts as; zero until learned (self)
	hl   health

	ctx    context.Context // ends with Close; bounds pollers and webhook work
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	pollers    map[string]*poller  // by lower-case "owner/name"
	locks      map[string]*keyLock // held or waited for; removed when free
	runIssues  map[string]int      // repo + run ID → issue (a cache, bounded)
	asked      map[string]*asked   // repo + set ID → where it was asked (a cache, bounded)
	perms      map[string]permEntry
	deliveries deliveries
	progress   map[string]*progressState // repo + run ID → its status comment
	progressIv time.Duration
}

// asked is what this process knows of a set it asked.
type asked struct {
	issue     int
	partIDs   []int64 // the question comments, in order
	bodies    []string
	htmlURL   string
	answerID  int64 // the comment taken as the answer, 0 if none yet
	answered  bool  // the question comment shows the answer
	resumedOK bool
}

type permEntry struct {
	level   string
	expires time.Time
}

// NewClient checks cfg and returns a client. It makes no request.
func NewClient(cfg ClientConfig) (*Client, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("github base_url %q: want an http or https URL", cfg.BaseURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	if cfg.PollInterval < 0 {
		return nil, fmt.Errorf("github poll_interval %v: must be positive", cfg.PollInterval)
	}
	c := &Client{
		log:        cfg.Logger,
		interval:   cfg.PollInterval,
		secret:     []byte(cfg.WebhookSecret),
		permTTL:    cfg.PermissionTTL,
		now:        cfg.now,
		sleep:      cfg.sleep,
		pollers:    make(map[string]*poller),
		locks:      make(map[string]*keyLock),
		backoff:    cfg.backoff,
		ledger:     cfg.Ledger,
		durable:    cfg.Ledger != nil,
		onIdle:     cfg.OnIdleDelivery,
		runIssues:  make(map[string]int),
		asked:      make(map[string]*asked),
		perms:      make(map[string]permEntry),
		progress:   make(map[string]*progressState),
		progressIv: cfg.ProgressInterval,
	}
	if c.progressIv <= 0 {
		c.progressIv = DefaultProgressInterval
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.interval == 0 {
		c.interval = DefaultPollInterval
	}
	if c.permTTL <= 0 {
		c.permTTL = DefaultPermissionTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	if c.backoff <= 0 {
		c.backoff = time.Second
	}
	if c.ledger == nil {
		c.ledger = newMemLedger()
	}
	writeIv := cfg.WriteInterval
	if writeIv == 0 {
		writeIv = DefaultWriteInterval
	}
	maxWait := cfg.MaxRateLimitWait
	if maxWait <= 0 {
		maxWait = 15 * time.Minute
	}

	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	baseRT := hc.Transport
	if baseRT == nil {
		baseRT = http.DefaultTransport
	}
	reqTimeout := cfg.RequestTimeout
	if reqTimeout == 0 {
		reqTimeout = DefaultRequestTimeout
	}
	c.transport = &rateLimitTransport{
		base: baseRT, sleep: c.sleep, now: c.now, log: c.log, maxWait: maxWait, retries: 5,
		writeInterval: writeIv, backoff: c.backoff, timeout: max(reqTimeout, 0), observe: c.noteAttempt,
	}
	var rt http.RoundTripper = c.transport
	switch {
	case cfg.Token != "" && cfg.App != nil:
		return nil, errors.New("github: both token and app are set; use one")
	case cfg.Token == "" && cfg.App == nil:
		return nil, errors.New("github: neither token nor app is set")
	case cfg.App != nil:
		a := cfg.App
		if a.ID == 0 || a.InstallationID == 0 {
			return nil, errors.New("github app: id and installation_id are required")
		}
		key := a.PrivateKey
		if len(key) == 0 {
			if a.PrivateKeyFile == "" {
				return nil, errors.New("github app: private_key_file is required")
			}
			key, err = os.ReadFile(a.PrivateKeyFile)
			if err != nil {
				return nil, fmt.Errorf("github app: read private key: %w", err)
			}
		}
		itr, err := ghinstallation.New(rt, a.ID, a.InstallationID, key)
		if err != nil {
			return nil, fmt.Errorf("github app %d: private key: %w", a.ID, err)
		}
		itr.BaseURL = strings.TrimRight(u.String(), "/")
		rt = itr
		atr, err := ghinstallation.NewAppsTransport(c.transport, a.ID, key)
		if err != nil {
			return nil, fmt.Errorf("github app %d: private key: %w", a.ID, err)
		}
		atr.BaseURL = itr.BaseURL
		appClient := *hc
		appClient.Transport = atr
		c.appJWT = gh.NewClient(&appClient)
		c.appJWT.BaseURL = u
		c.appJWT.UploadURL = u
		c.appJWT.UserAgent = "orchestrator"
	}
	client := *hc
	client.Transport = rt
	api := gh.NewClient(&client)
	if cfg.Token != "" {
		api = api.WithAuthToken(cfg.Token)
	}
	api.BaseURL = u
	api.UploadURL = u
	api.UserAgent = "orchestrator"
	c.api = api
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops the client's pollers and webhook work and waits for them.
// Surfaces made from it stop taking answers.
func (c *Client) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// PollNow makes the poller of repo ("owner/name") poll at once instead of
// at the end of its interval, if an Ask of this client waits on issue
// there (on any issue: 0); otherwise it does nothing. It does not wait for
// the poll. Requests made meanwhile are folded into one poll, whose
// requests wait out rate limits as any other's (the client's transport).
// Another instance's OnIdleDelivery is what calls it, through the serve
// daemon.
//
// A repository renamed since the surface was configured is named by its
// new name, which no poller has: then every poller that waits on issue
// polls (a conditional request each).
func (c *Client) PollNow(repo string, issue int) {
	if p := c.lookupPoller(repo); p != nil {
		p.kick(issue)
		return
	}
	c.mu.Lock()
	ps := make([]*poller, 0, len(c.pollers))
	for _, p := range c.pollers {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	for _, p := range ps {
		p.kick(issue)
	}
}

// Surface returns a surface on one repository of c.
func (c *Client) Surface(cfg SurfaceConfig) (*Surface, error) {
	owner, name, ok := strings.Cut(cfg.Repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("github repo %q: want owner/name", cfg.Repo)
	}
	if cfg.Issue < 0 {
		return nil, fmt.Errorf("github issue %d: want a positive number, or 0 for one issue per run", cfg.Issue)
	}
	if cfg.AllowOnly && len(cfg.Allow) == 0 {
		return nil, errors.New("github allow_only is set but allow is empty: nobody could answer")
	}
	s := &Surface{c: c, owner: owner, name: name, cfg: cfg, allow: make(map[string]bool)}
	for _, l := range cfg.Allow {
		s.allow[strings.ToLower(strings.TrimPrefix(strings.TrimSpace(l), "@"))] = true
	}
	if s.cfg.MaxAnswerBytes <= 0 {
		s.cfg.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	return s, nil
}

// New returns a surface with a client of its own; closing the surface
// closes the client.
func New(cfg Config) (*Surface, error) {
	c, err := NewClient(cfg.ClientConfig)
	if err != nil {
		return nil, err
	}
	s, err := c.Surface(cfg.SurfaceConfig)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.owns = true
	return s, nil
}

// Surface asks on one repository. Safe for concurrent use.
type Surface struct {
	c           *Client
	owner, name string
	cfg         SurfaceConfig
	allow       map[string]bool // lower-case logins
	owns        bool
}

// Name is "github".
func (s *Surface) Name() string { return surfaceName }

// Client returns the client the surface was made from.
func (s *Surface) Client() *Client { return s.c }

// WebhookHandler is the client's webhook handler.
func (s *Surface) WebhookHandler() (http.Handler, error) { return s.c.WebhookHandler() }

// Close closes the client if the surface has its own (New).
func (s *Surface) Close() error {
	if s.owns {
		return s.c.Close()
	}
	return nil
}

func (s *Surface) repo() string { return s.owner + "/" + s.name }

func (s *Surface) key(id string) string { return strings.ToLower(s.repo()) + "\x00" + id }

// keyLock is a mutex for one key, removed from Client.locks when nobody
// holds or waits for it.
type keyLock struct {
	mu   sync.Mutex
	refs int // guarded by Client.mu
}

// lock locks key and returns its unlock.
func (c *Client) lock(key string) (unlock func()) {
	c.mu.Lock()
	l, ok := c.locks[key]
	if !ok {
		l = new(keyLock)
		c.locks[key] = l
	}
	l.refs++
	c.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(c.locks, key)
		}
		c.mu.Unlock()
	}
}

func (c *Client) askedInfo(key string) *asked {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked[key]
}

// remember caches where a set was asked. c.mu is held.
func (c *Client) rememberLocked(key string, a *asked) {
	evict(c.asked, key)
	c.asked[key] = a
}

// evict makes room for key in a bounded cache by dropping other entries.
func evict[V any](m map[string]V, key string) {
	if _, ok := m[key]; ok || len(m) < maxCached {
		return
	}
	for k := range m {
		delete(m, k)
		if len(m) < maxCached*3/4 {
			return
		}
	}
}

// Ask posts set as an issue comment (unless it is there already) and, until
// ctx ends, offers the answers people reply with to answers and tells them
// what became of each. It returns nil once the set is closed.
func (s *Surface) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if set.ID == "" {
		return errors.New("github: ask: set has no ID")
	}
	if len(set.Questions) == 0 {
		return fmt.Errorf("github: ask %s: set has no questions", set.ID)
	}
	if answers == nil {
		return fmt.Errorf("github: ask %s: no answers to offer to", set.ID)
	}
	a, comments, date, err := s.post(ctx, set)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}

	w := &waiter{
		s:       s,
		set:     set,
		answers: answers,
		issue:   a.issue,
		afterID: a.partIDs[len(a.partIDs)-1],
		done:    make(chan struct{}),
	}
	p := s.c.poller(s.owner, s.name)
	p.add(w, date.Add(-overlap))
	defer p.remove(w)

	// What the issue holds: the questions waiting there (and whether they
	// are still open), the notices posted, and replies given before this
	// Ask (while the process was down, or before a retry).
	p.handle(ctx, a.issue, comments)

	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.c.ctx.Done():
		return fmt.Errorf("github: ask %s: client closed: %w", set.ID, surfaces.ErrUnavailable)
	}
}

// post finds set's question comment(s) on its issue, posting what is
// missing, and returns them with the issue's comments and the server's time
// of the listing.
func (s *Surface) post(ctx context.Context, set questions.Set) (*asked, []*gh.IssueComment, time.Time, error) {
	key := s.key(set.ID)
	defer s.c.lock(key)()

	issue, err := s.issueFor(ctx, set, true)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	comments, date, err := s.listIssueComments(ctx, issue)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: list comments of %s#%d: %w", set.ID, s.repo(), issue, err)
	}
	me, err := s.c.self(ctx)
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: %w", set.ID, err)
	}
	bodies := renderParts(set)
	found := findParts(me.ownOnly(comments), set.ID, len(bodies))
	for i, body := range bodies {
		if found[i] != nil {
			continue
		}
		c, err := s.createComment(ctx, issue, body, questionMarker(set, i+1, len(bodies)))
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("github: ask %s: post question on %s#%d: %w", set.ID, s.repo(), issue, err)
		}
		s.c.log.Info("github: question posted", "set", set.ID, "repo", s.repo(), "issue", issue, "comment", c.GetID())
		found[i] = c
		comments = append(comments, c)
	}
	a := askedFrom(issue, set.ID, found)
	s.c.mu.Lock()
	if old := s.c.asked[key]; old != nil && old.answerID != 0 && a.answerID == 0 {
		a.answerID, a.answered, a.resumedOK = old.answerID, old.answered, old.resumedOK
	}
	s.c.rememberLocked(key, a)
	s.c.mu.Unlock()
	return a, comments, date, nil
}

// findParts returns the question comments of set among comments (the
// orchestrator's own: identity.ownOnly), by part
// (nil where missing): the first of each part, of a rendering in parts
// parts, or of whatever number of parts was posted when parts is 0.
func findParts(comments []*gh.IssueComment, setID string, parts int) []*gh.IssueComment {
	var found []*gh.IssueComment
	for _, c := range comments {
		qp, ok := parseQuestionMarker(c.GetBody())
		if !ok || qp.setID != markerValue(setID) {
			continue
		}
		if found == nil {
			if parts == 0 {
				parts = qp.parts
			}
			found = make([]*gh.IssueComment, parts)
		}
		if qp.parts == parts && found[qp.part-1] == nil {
			found[qp.part-1] = c
		}
	}
	if found == nil && parts > 0 {
		found = make([]*gh.IssueComment, parts)
	}
	return found
}

// askedFrom is what the question comments of a set (all parts present) say.
func askedFrom(issue int, setID string, parts []*gh.IssueComment) *asked {
	a := &asked{issue: issue}
	for i, c := range parts {
		a.partIDs = append(a.partIDs, c.GetID())
		a.bodies = append(a.bodies, c.GetBody())
		if i == 0 {
			a.htmlURL = c.GetHTMLURL()
			if id, ok := parseAnsweredMarker(c.GetBody(), setID); ok {
				a.answerID, a.answered = id, true
			} else if parseClosedMarker(c.GetBody(), markerValue(setID)) {
				a.answered = true // closed without an answer: nothing more to show
			}
		}
	}
	return a
}

// createComment posts body, which carries marker, on issue. After a 5xx or
// a network error it waits, then looks for marker on the issue before
// posting again: the lost response may have come from a comment that was
// created.
func (s *Surface) createComment(ctx context.Context, issue int, body, marker string) (*gh.IssueComment, error) {
	return s.c.createComment(ctx, s.owner, s.name, issue, body, marker)
}

func (c *Client) createComment(ctx context.Context, owner, name string, issue int, body, marker string) (*gh.IssueComment, error) {
	for attempt := 0; ; attempt++ {
		cm, _, err := c.api.Issues.CreateComment(ctx, owner, name, issue, &gh.IssueComment{Body: gh.String(body)})
		if err == nil {
			return cm, nil
		}
		if !transient(err) || attempt >= 4 || ctx.Err() != nil {
			return nil, err
		}
		c.log.Info("github: posting a comment failed; looking for it before posting again", "repo", owner+"/"+name, "issue", issue, "err", err)
		if err := c.sleep(ctx, backoffWait(c.backoff, attempt)); err != nil {
			return nil, err
		}
		comments, _, lerr := c.listIssueComments(ctx, owner, name, issue)
		if lerr != nil {
			continue
		}
		me, lerr := c.self(ctx)
		if lerr != nil {
			continue
		}
		if cm := findMarked(me.ownOnly(comments), marker); cm != nil {
			return cm, nil
		}
	}
}

// findMarked returns the first of comments that carries marker, or nil.
// Give it the orchestrator's own comments (identity.ownOnly).
func findMarked(comments []*gh.IssueComment, marker string) *gh.IssueComment {
	for _, c := range comments {
		if strings.Contains(c.GetBody(), marker) {
			return c
		}
	}
	return nil
}

// transient reports whether err may go away by trying again: a 5xx, or no
// response at all.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		return er.Response != nil && er.Response.StatusCode >= 500
	}
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	return !errors.As(err, &rl) && !errors.As(err, &ab)
}

// listIssueComments lists all comments of an issue and returns the server's
// time of the first response.
func (s *Surface) listIssueComments(ctx context.Context, issue int) ([]*gh.IssueComment, time.Time, error) {
	return s.c.listIssueComments(ctx, s.owner, s.name, issue)
}

func (c *Client) listIssueComments(ctx context.Context, owner, name string, issue int) ([]*gh.IssueComment, time.Time, error) {
	var all []*gh.IssueComment
	var date time.Time
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for page := 0; page < 100; page++ {
		cs, resp, err := c.api.Issues.ListComments(ctx, owner, name, issue, opts)
		if err != nil {
			return nil, time.Time{}, err
		}
		if date.IsZero() {
			date = serverTime(resp, c.now())
		}
		all = append(all, cs...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return all, date, nil
}

// serverTime is the Date of resp, or now if it has none or it is ahead.
func serverTime(resp *gh.Response, now time.Time) time.Time {
	if resp != nil && resp.Response != nil {
		if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil && t.Before(now) {
			return t
		}
	}
	return now
}

// issueFor returns the issue set is asked in: the configured one, or the
// run's, recorded in the Ledger when it was opened or (create) opened; a
// run with none recorded (one whose issue predates the records) has it
// found once and recorded (legacyRunIssue). Without a durable Ledger (no
// store) it is found by its marker among the repository's issues.
func (s *Surface) issueFor(ctx context.Context, set questions.Set, create bool) (int, error) {
	if s.cfg.Issue > 0 {
		return s.cfg.Issue, nil
	}
	runID := set.RunID
	if runID == "" {
		runID = set.ID
	}
	key := s.key("run\x00" + runID)
	defer s.c.lock(key)()
	s.c.mu.Lock()
	n, ok := s.c.runIssues[key]
	s.c.mu.Unlock()
	if ok {
		return n, nil
	}
	rkey := runIssueKey(s.repo(), runID)
	if s.c.durable {
		v, err := s.c.ledger.CommentDecision(ctx, rkey)
		if err != nil {
			return 0, fmt.Errorf("github: look up the issue of run %s in %s: %w", runID, s.repo(), err)
		}
		if v != "" {
			if n, err = strconv.Atoi(v); err != nil || n <= 0 {
				return 0, fmt.Errorf("github: the issue of run %s in %s is recorded as %q, not an issue number", runID, s.repo(), v)
			}
		} else if n, err = s.legacyRunIssue(ctx, runID, rkey); err != nil {
			return 0, err
		}
	} else {
		var err error
		if n, err = s.findRunIssue(ctx, runID); err != nil {
			return 0, fmt.Errorf("github: find the issue of run %s in %s: %w", runID, s.repo(), err)
		}
	}
	if n == 0 && create {
		opened, err := s.openRunIssue(ctx, set, runID)
		if err != nil {
			return 0, err
		}
		// Recorded at once: the issue is never looked for again (a
		// label taken off it, or a thousand issues opened after it, do
		// not lose it). The first record wins.
		got, err := s.c.ledger.DecideComment(context.WithoutCancel(ctx), rkey, strconv.Itoa(opened))
		if err != nil {
			return 0, fmt.Errorf("github: record issue #%d of run %s in %s: %w", opened, runID, s.repo(), err)
		}
		if n, err = strconv.Atoi(got); err != nil || n <= 0 {
			n = opened
		}
	}
	if n == 0 {
		return 0, nil
	}
	s.c.mu.Lock()
	evict(s.c.runIssues, key)
	s.c.runIssues[key] = n
	s.c.mu.Unlock()
	return n, nil
}

// legacyRunIssue finds the issue of a run that has none recorded: a run
// whose issue was opened before issues were recorded at creation (or
// a run that has none yet). It looks once, the old way (findRunIssue: the
// run's marker in an issue the orchestrator's own identity opened), and
// records what it found, so that the run's next question goes there
// instead of opening a second issue, and the issue is never looked for
// again.
func (s *Surface) legacyRunIssue(ctx context.Context, runID, rkey string) (int, error) {
	n, err := s.findRunIssue(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("github: find the issue of run %s in %s (none is recorded): %w", runID, s.repo(), err)
	}
	if n == 0 {
		return 0, nil
	}
	got, err := s.c.ledger.DecideComment(context.WithoutCancel(ctx), rkey, strconv.Itoa(n))
	if err != nil {
		return 0, fmt.Errorf("github: record issue #%d of run %s in %s: %w", n, runID, s.repo(), err)
	}
	if r, err := strconv.Atoi(got); err == nil && r > 0 {
		n = r
	}
	s.c.log.Info("github: found the issue of a run opened before issues were recorded, and recorded it", "run", runID, "repo", s.repo(), "issue", n)
	return n, nil
}

// openRunIssue opens the run's issue. After a 5xx or a network error it
// looks for the issue by its marker before opening it again, and never
// opens it again without having looked: the lost response may have come
// from an issue that was opened.
func (s *Surface) openRunIssue(ctx context.Context, set questions.Set, runID string) (int, error) {
	title := truncate(cleanLine(set.Title), 200)
	if title == "" {
		title = "Questions from run " + truncate(cleanLine(runID), 100)
	}
	body := fmt.Sprintf("The orchestrator asks the questions of run `%s` here. Reply to a question comment to answer it.\n\n%s",
		strings.ReplaceAll(cleanLine(runID), "`", "'"), runMarker(runID))
	req := &gh.IssueRequest{Title: gh.String(title), Body: gh.String(body)}
	if len(s.cfg.Labels) > 0 {
		req.Labels = &s.cfg.Labels
	}
	for attempt := 0; ; attempt++ {
		is, _, err := s.c.api.Issues.Create(ctx, s.owner, s.name, req)
		if err == nil {
			s.c.log.Info("github: issue opened", "run", runID, "repo", s.repo(), "issue", is.GetNumber())
			return is.GetNumber(), nil
		}
		if !transient(err) || attempt >= 4 || ctx.Err() != nil {
			return 0, fmt.Errorf("github: open an issue for run %s in %s: %w", runID, s.repo(), err)
		}
		if err := s.c.sleep(ctx, backoffWait(s.c.backoff, attempt)); err != nil {
			return 0, err
		}
		n, ferr := s.findRunIssue(ctx, runID)
		for look := 0; ferr != nil; look++ {
			if !transient(ferr) || look >= 4 {
				return 0, fmt.Errorf("github: open an issue for run %s in %s: look for it after a failed response: %w", runID, s.repo(), ferr)
			}
			if err := s.c.sleep(ctx, backoffWait(s.c.backoff, look)); err != nil {
				return 0, err
			}
			n, ferr = s.findRunIssue(ctx, runID)
		}
		if n != 0 {
			return n, nil
		}
	}
}

// runIssueKey names the number of a run's own issue in the Ledger.
func runIssueKey(repo, runID string) string {
	return "github/" + strings.ToLower(repo) + "/run-issue/" + runID
}

// findRunIssue looks for the issue carrying the run's marker among the
// repository's issues (with the configured labels), newest first.
func (s *Surface) findRunIssue(ctx context.Context, runID string) (int, error) {
	marker := runMarker(runID)
	me, err := s.c.self(ctx)
	if err != nil {
		return 0, err
	}
	opts := &gh.IssueListByRepoOptions{
		State: "all", Sort: "created", Direction: "desc",
		Labels:      s.cfg.Labels,
		ListOptions: gh.ListOptions{PerPage: 100},
	}
	for page := 0; page < 10; page++ {
		issues, resp, err := s.c.api.Issues.ListByRepo(ctx, s.owner, s.name, opts)
		if err != nil {
			return 0, err
		}
		for _, is := range issues {
			if me.wrote(is.GetUser()) && strings.Contains(is.GetBody(), marker) {
				return is.GetNumber(), nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return 0, nil
}

// find returns what is known of where set was asked, reading the issue if
// this process does not know.
func (s *Surface) find(ctx context.Context, set questions.Set) (*asked, error) {
	key := s.key(set.ID)
	if a := s.c.askedInfo(key); a != nil {
		return a, nil
	}
	issue, err := s.issueFor(ctx, set, false)
	if err != nil || issue == 0 {
		return nil, err
	}
	comments, _, err := s.listIssueComments(ctx, issue)
	if err != nil {
		return nil, fmt.Errorf("github: list comments of %s#%d: %w", s.repo(), issue, err)
	}
	me, err := s.c.self(ctx)
	if err != nil {
		return nil, err
	}
	parts := findParts(me.ownOnly(comments), set.ID, 0)
	if len(parts) == 0 || slices.Contains(parts, nil) {
		return nil, nil
	}
	a := askedFrom(issue, set.ID, parts)
	s.c.mu.Lock()
	if old := s.c.asked[key]; old != nil {
		a = old
	} else {
		s.c.rememberLocked(key, a)
	}
	s.c.mu.Unlock()
	return a, nil
}

// Resolve edits the question comment to show the answer given elsewhere.
// It does nothing if the comment shows it already.
func (s *Surface) Resolve(ctx context.Context, set questions.Set, resp questions.Response) error {
	a, err := s.find(ctx, set)
	if err != nil {
		return fmt.Errorf("github: resolve %s: %w", set.ID, err)
	}
	if a == nil {
		return nil // never asked here
	}
	if err := s.markAnswered(ctx, set, a, resp, 0); err != nil {
		return err
	}
	if p := s.c.lookupPoller(s.repo()); p != nil {
		p.closed(a.issue, set.ID, 0)
	}
	return nil
}

// markAnswered edits the first question comment of set to show resp, taken
// from comment answerID (0: from elsewhere).
func (s *Surface) markAnswered(ctx context.Context, set questions.Set, a *asked, resp questions.Response, answerID int64) error {
	defer s.c.lock(s.key(set.ID))()
	s.c.mu.Lock()
	done := a.answered
	body := ""
	if len(a.bodies) > 0 {
		body = a.bodies[0]
	}
	id := a.partIDs[0]
	if answerID != 0 {
		a.answerID = answerID
	}
	answerID = a.answerID
	s.c.mu.Unlock()
	if done {
		return nil
	}
	// The marker records the answer comment (0 if answered elsewhere), for
	// Resumed after a restart, and closes the set for the comments after it.
	newBody := renderAnswered(set, resp) + body + "\n" + answeredMarker(set.ID, answerID)
	if _, _, err := s.c.api.Issues.EditComment(ctx, s.owner, s.name, id, &gh.IssueComment{Body: gh.String(newBody)}); err != nil {
		return fmt.Errorf("github: edit question comment %d of %s: %w", id, s.repo(), err)
	}
	s.c.mu.Lock()
	a.answered = true
	if len(a.bodies) > 0 {
		a.bodies[0] = newBody
	}
	s.c.mu.Unlock()
	return nil
}

// Resumed puts 🚀 on the comment taken as the answer. It is the last thing
// done for a set: what the client remembers of it goes.
func (s *Surface) Resumed(ctx context.Context, set questions.Set) error {
	a, err := s.find(ctx, set)
	if err != nil {
		return fmt.Errorf("github: resumed %s: %w", set.ID, err)
	}
	if a == nil {
		return nil
	}
	s.c.mu.Lock()
	id, done := a.answerID, a.resumedOK
	s.c.mu.Unlock()
	if id != 0 && !done {
		if _, _, err := s.c.api.Reactions.CreateIssueCommentReaction(ctx, s.owner, s.name, id, "rocket"); err != nil {
			return fmt.Errorf("github: react to comment %d of %s: %w", id, s.repo(), err)
		}
	}
	s.c.mu.Lock()
	a.resumedOK = true
	if a.answered {
		delete(s.c.asked, s.key(set.ID))
	}
	s.c.mu.Unlock()
	return nil
}

// Remind posts a comment pointing at the question still waiting.
func (s *Surface) Remind(ctx context.Context, set questions.Set) error {
	a, err := s.find(ctx, set)
	if err != nil {
		return fmt.Errorf("github: remind %s: %w", set.ID, err)
	}
	if a == nil {
		return fmt.Errorf("github: remind %s in %s: %w", set.ID, s.repo(), surfaces.ErrNotAsked)
	}
	link := "the question above"
	if a.htmlURL != "" {
		link = "[this question](" + a.htmlURL + ")"
	}
	var ids []string
	for _, q := range set.Questions {
		ids = append(ids, "`"+q.ID+"`")
	}
	// Each reminder has a marker of its own, so that a retry finds it.
	marker := reminderMarker(set.ID, s.c.now().UnixNano())
	body := fmt.Sprintf("⏰ Still waiting for an answer to %s (%s).\n\n%s", link, strings.Join(ids, ", "), marker)
	if _, err := s.createComment(ctx, a.issue, body, marker); err != nil {
		return fmt.Errorf("github: remind %s on %s#%d: %w", set.ID, s.repo(), a.issue, err)
	}
	return nil
}
