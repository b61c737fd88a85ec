package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
)

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
	refs     Refs // nil: none
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
	// drain ends closeGrace (CloseGrace) after Close: the requests that
	// acknowledge work accepted before it (closing.go) run under it.
	drain      context.Context
	endDrain   context.CancelFunc
	closeGrace time.Duration

	mu         sync.Mutex
	pollers    map[string]*poller       // by lower-case "owner/name"
	posting    map[string]chan struct{} // by set ID: a set's post in flight, closed when its waiter is known (group.go)
	locks      map[string]*keyLock      // held or waited for; removed when free
	runIssues  map[string]int           // repo + run ID → issue (a cache, bounded)
	asked      map[string]*asked        // repo + set ID → where it was asked (a cache, bounded)
	perms      map[string]permEntry
	deliveries deliveries
	progress   map[string]*progressState // repo + run ID → its status comment
	progressIv time.Duration
	triggers   *triggers           // runs started from issues (triggers.go); nil: none
	reviews    map[string]*Reviews // by lower-case "owner/name" (review.go)
}

type permEntry struct {
	level   string
	expires time.Time
}

// NewClient checks cfg and returns a client. It makes no request.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.PollInterval < 0 {
		return nil, fmt.Errorf("github poll_interval %v: must be positive", cfg.PollInterval)
	}
	c := newClient(cfg)
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	c.transport = c.newTransport(cfg, hc)
	rt, err := c.authenticate(cfg, u, hc)
	if err != nil {
		return nil, err
	}
	c.api = newAPI(hc, rt, cfg.Token, u)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.drain, c.endDrain = context.WithCancel(context.Background())
	c.closeGrace = CloseGrace
	return c, nil
}

// parseBaseURL checks the REST API root base (empty: DefaultBaseURL) and
// returns it ending in a slash, as go-github wants it.
func parseBaseURL(base string) (*url.URL, error) {
	raw := base
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("github base_url %q: want an http or https URL", base)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// newClient returns a client with cfg's settings, the defaults for those
// unset, and empty caches; it has no API client or transport yet.
func newClient(cfg ClientConfig) *Client {
	c := &Client{
		log:        cfg.Logger,
		interval:   cfg.PollInterval,
		secret:     []byte(cfg.WebhookSecret),
		permTTL:    cfg.PermissionTTL,
		now:        cfg.now,
		sleep:      cfg.sleep,
		pollers:    make(map[string]*poller),
		posting:    make(map[string]chan struct{}),
		locks:      make(map[string]*keyLock),
		backoff:    cfg.backoff,
		ledger:     cfg.Ledger,
		refs:       cfg.Refs,
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
		c.sleep = retry.Sleep
	}
	if c.backoff <= 0 {
		c.backoff = time.Second
	}
	if c.ledger == nil {
		c.ledger = newMemLedger()
	}
	return c
}

// newTransport returns the transport below go-github that paces writes,
// waits out rate limits, retries and times requests out, over hc's
// transport (http.DefaultTransport if it has none).
func (c *Client) newTransport(cfg ClientConfig, hc *http.Client) *rateLimitTransport {
	writeIv := cfg.WriteInterval
	if writeIv == 0 {
		writeIv = DefaultWriteInterval
	}
	maxWait := cfg.MaxRateLimitWait
	if maxWait <= 0 {
		maxWait = 15 * time.Minute
	}
	baseRT := hc.Transport
	if baseRT == nil {
		baseRT = http.DefaultTransport
	}
	reqTimeout := cfg.RequestTimeout
	if reqTimeout == 0 {
		reqTimeout = DefaultRequestTimeout
	}
	return &rateLimitTransport{
		base: baseRT, sleep: c.sleep, now: c.now, log: c.log, maxWait: maxWait, retries: 5,
		writeInterval: writeIv, backoff: c.backoff, jitter: retry.Jitter, timeout: max(reqTimeout, 0), observe: c.noteAttempt,
	}
}

// authenticate checks that cfg has exactly one of a token and an App, and
// returns the transport the API client sends by: c.transport under a token
// (go-github adds it), an installation token's transport over it under an
// App (appTransport).
func (c *Client) authenticate(cfg ClientConfig, u *url.URL, hc *http.Client) (http.RoundTripper, error) {
	switch {
	case cfg.Token != "" && cfg.App != nil:
		return nil, errors.New("github: both token and app are set; use one")
	case cfg.Token == "" && cfg.App == nil:
		return nil, errors.New("github: neither token nor app is set")
	case cfg.App != nil:
		return c.appTransport(cfg.App, u, hc)
	}
	return c.transport, nil
}

// appTransport returns the transport of App a's installation over
// c.transport, and makes c.appJWT, the client that calls the API as the
// App itself.
func (c *Client) appTransport(a *AppAuth, u *url.URL, hc *http.Client) (http.RoundTripper, error) {
	if a.ID == 0 || a.InstallationID == 0 {
		return nil, errors.New("github app: id and installation_id are required")
	}
	key, err := appPrivateKey(a)
	if err != nil {
		return nil, err
	}
	itr, err := ghinstallation.New(c.transport, a.ID, a.InstallationID, key)
	if err != nil {
		return nil, fmt.Errorf("github app %d: private key: %w", a.ID, err)
	}
	itr.BaseURL = strings.TrimRight(u.String(), "/")
	atr, err := ghinstallation.NewAppsTransport(c.transport, a.ID, key)
	if err != nil {
		return nil, fmt.Errorf("github app %d: private key: %w", a.ID, err)
	}
	atr.BaseURL = itr.BaseURL
	c.appJWT = newAPI(hc, atr, "", u)
	return itr, nil
}

// appPrivateKey returns a's PEM private key: PrivateKey, or else the
// contents of PrivateKeyFile.
func appPrivateKey(a *AppAuth) ([]byte, error) {
	if len(a.PrivateKey) > 0 {
		return a.PrivateKey, nil
	}
	if a.PrivateKeyFile == "" {
		return nil, errors.New("github app: private_key_file is required")
	}
	key, err := os.ReadFile(a.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("github app: read private key: %w", err)
	}
	return key, nil
}

// newAPI returns a go-github client on the API root u that sends by rt
// (over a copy of hc), with token as its bearer token unless empty.
func newAPI(hc *http.Client, rt http.RoundTripper, token string, u *url.URL) *gh.Client {
	client := *hc
	client.Transport = rt
	api := gh.NewClient(&client)
	if token != "" {
		api = api.WithAuthToken(token)
	}
	api.BaseURL = u
	api.UploadURL = u
	api.UserAgent = "orchestrator"
	return api
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
