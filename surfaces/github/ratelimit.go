package github

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
)

// rateLimitTransport waits out GitHub's rate limits below go-github:
//
//   - a 403 or 429 with Retry-After waits that long and retries;
//   - a 403 or 429 with X-RateLimit-Remaining: 0 (the primary limit) waits
//     until X-RateLimit-Reset and retries;
//   - a 429, or a 403 whose message speaks of a secondary rate limit, without
//     either header waits a minute, doubling on each retry (GitHub's advice);
//   - a success with X-RateLimit-Remaining: 0 holds every later request
//     until X-RateLimit-Reset instead of spending it on a certain 403.
//
// While a wait is on, every request through the transport waits too: GitHub
// asks clients not to send more requests during a secondary limit.
//
// It also paces content-creating requests (POST, PATCH, PUT, DELETE) at
// least writeInterval apart, as GitHub asks of integrations, and retries
// requests that are safe to repeat (GET, PATCH, PUT, DELETE, and POSTs that
// GitHub answers idempotently: reactions, installation tokens) after a 5xx
// or a network error, backing off. A POST that creates something is not
// repeated here: a lost response may have created it, so its caller looks
// for it by its hidden marker before posting again (createComment).
//
// go-github v60 recognises neither 429 nor a secondary limit without
// documentation_url, and gofri/go-github-ratelimit retries by sending the same
// *http.Request again, whose body was consumed (a retried POST would send an
// empty comment), on the wall clock only; hence this small transport, which
// rewinds bodies with GetBody and sleeps through an injectable function.
type rateLimitTransport struct {
	base    http.RoundTripper
	sleep   func(context.Context, time.Duration) error
	now     func() time.Time
	log     *slog.Logger
	maxWait time.Duration // a longer wait is not waited: the response is returned
	retries int
	// writeInterval is the least time between two content-creating
	// requests; backoff the first wait after a 5xx or network error.
	writeInterval time.Duration
	backoff       time.Duration
	// jitter, when set, spreads a backoff wait (never shortening it), so
	// that clients that failed together do not retry together.
	jitter func(time.Duration) time.Duration
	// timeout bounds each attempt, from sending it to closing its body
	// (0: none); observe, if set, is told what became of each attempt
	// (err nil: the service answered).
	timeout time.Duration
	observe func(ctx context.Context, method, path string, err error)

	mu        sync.Mutex
	until     time.Time // no request before
	nextWrite time.Time // no content-creating request before
}

// contentCreating reports whether req is a request GitHub asks to pace.
func contentCreating(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
		return !strings.HasSuffix(req.URL.Path, "/access_tokens")
	}
	return false
}

// repeatable reports whether sending req twice does what sending it once
// does.
func repeatable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodPut, http.MethodDelete:
		return true
	case http.MethodPost:
		return strings.HasSuffix(req.URL.Path, "/reactions") || strings.HasSuffix(req.URL.Path, "/access_tokens")
	}
	return false
}

// pace waits for req's turn among content-creating requests.
func (t *rateLimitTransport) pace(ctx context.Context, req *http.Request) error {
	if t.writeInterval <= 0 || !contentCreating(req) {
		return nil
	}
	t.mu.Lock()
	now := t.now()
	at := t.nextWrite
	if at.Before(now) {
		at = now
	}
	t.nextWrite = at.Add(t.writeInterval)
	t.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		if err := t.sleep(ctx, d); err != nil {
			return err
		}
	}
	// Woken late: the next one waits from now.
	t.mu.Lock()
	if next := t.now().Add(t.writeInterval); next.After(t.nextWrite) {
		t.nextWrite = next
	}
	t.mu.Unlock()
	return nil
}

// serverError reports whether resp is a 5xx worth trying again.
func serverError(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoffWait is the wait before retry attempt+1 after a transient failure:
// base, doubling, at most 30 times base, spread by jitter (nil: none).
func backoffWait(base time.Duration, attempt int, jitter func(time.Duration) time.Duration) time.Duration {
	return retry.Backoff{Initial: base, Max: 30 * base, Jitter: jitter}.Wait(attempt)
}

func (t *rateLimitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		if err := t.waitTurn(ctx); err != nil {
			return nil, err
		}
		if err := t.pace(ctx, req); err != nil {
			return nil, err
		}
		rewindable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
		retryTransient := repeatable(req) && rewindable && attempt < t.retries && t.backoff > 0
		resp, err := t.attempt(req)
		if t.observe != nil {
			t.observe(ctx, req.Method, req.URL.Path, err)
		}
		if err != nil {
			if !retryTransient || ctx.Err() != nil {
				return nil, err
			}
			wait := backoffWait(t.backoff, attempt, t.jitter)
			t.log.Info("github: network error, retrying", "method", req.Method, "path", req.URL.Path, "err", err, "wait", wait)
			if err := t.sleep(ctx, wait); err != nil {
				return nil, err
			}
		} else if serverError(resp) {
			if !retryTransient {
				return resp, nil
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			wait := backoffWait(t.backoff, attempt, t.jitter)
			t.log.Info("github: server error, retrying", "method", req.Method, "path", req.URL.Path, "status", resp.StatusCode, "wait", wait)
			if err := t.sleep(ctx, wait); err != nil {
				return nil, err
			}
		} else {
			wait, limited := t.limitWait(resp, attempt)
			if !limited {
				t.noteRemaining(resp)
				return resp, nil
			}
			if attempt >= t.retries || wait > t.maxWait || !rewindable {
				t.log.Warn("github rate limit: giving up", "method", req.Method, "path", req.URL.Path,
					"status", resp.StatusCode, "wait", wait, "attempt", attempt+1)
				return resp, nil
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			t.log.Info("github rate limit: waiting", "method", req.Method, "path", req.URL.Path,
				"status", resp.StatusCode, "wait", wait)
			t.hold(t.now().Add(wait))
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// TransportConfig configures Transport. Zero values take the defaults.
type TransportConfig struct {
	// Base sends the requests (default http.DefaultTransport).
	Base   http.RoundTripper
	Logger *slog.Logger
	// MaxWait is the longest rate-limit wait waited out (default 15
	// minutes); a longer one returns GitHub's response.
	MaxWait time.Duration
	// Retries is how many times a request is sent again (default 5).
	Retries int
	// Backoff is the first wait after a 5xx or a network error (default 1
	// second), doubling, with jitter.
	Backoff time.Duration
	// WriteInterval is the least time between two content-creating
	// requests (default DefaultWriteInterval; negative: none).
	WriteInterval time.Duration
}

// Transport returns the surface's handling of GitHub's limits and
// transient failures for another GitHub client of the process (the
// delivery's pull requests): primary and secondary rate limits and
// Retry-After are waited out, requests that are safe to repeat are retried
// after a 5xx or a network error with backoff and jitter, and
// content-creating requests are paced. A POST that creates something is
// not repeated after a 5xx or a lost response: its caller looks for what
// it may have created before trying again.
func Transport(cfg TransportConfig) http.RoundTripper {
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 15 * time.Minute
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.WriteInterval == 0 {
		cfg.WriteInterval = DefaultWriteInterval
	}
	return &rateLimitTransport{base: cfg.Base, sleep: retry.Sleep, now: time.Now, log: cfg.Logger, maxWait: cfg.MaxWait,
		retries: cfg.Retries, writeInterval: cfg.WriteInterval, backoff: cfg.Backoff, jitter: retry.Jitter}
}

// attempt sends req once, bounded by t.timeout until its body is closed.
func (t *rateLimitTransport) attempt(req *http.Request) (*http.Response, error) {
	if t.timeout <= 0 {
		return t.base.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		if ctx.Err() != nil && req.Context().Err() == nil {
			err = fmt.Errorf("no response within %s: %w", t.timeout, err)
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// waitTurn waits until no rate limit holds requests back.
func (t *rateLimitTransport) waitTurn(ctx context.Context) error {
	t.mu.Lock()
	until := t.until
	t.mu.Unlock()
	if d := until.Sub(t.now()); d > 0 {
		return t.sleep(ctx, d)
	}
	return ctx.Err()
}

func (t *rateLimitTransport) hold(until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until.After(t.until) {
		t.until = until
	}
}

// noteRemaining holds later requests until the reset when a response says
// the primary limit is spent.
func (t *rateLimitTransport) noteRemaining(resp *http.Response) {
	if resp.StatusCode == http.StatusNotModified || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		return
	}
	if reset, ok := t.resetTime(resp.Header); ok {
		t.hold(reset)
		// The transport holds requests until the reset itself; go-github
		// v60, seeing Remaining 0 with a Reset, would instead fail them
		// without sending.
		resp.Header.Del("X-RateLimit-Reset")
	}
}

func (t *rateLimitTransport) resetTime(h http.Header) (time.Time, bool) {
	sec, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || sec <= 0 {
		return time.Time{}, false
	}
	return time.Unix(sec, 0).Add(time.Second), true
}

// limitWait says whether resp is a rate limit and how long to wait before
// trying again.
func (t *rateLimitTransport) limitWait(resp *http.Response, attempt int) (time.Duration, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	h := resp.Header
	if d, ok := retryAfter(h.Get("Retry-After"), t.now()); ok {
		return d, true
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, ok := t.resetTime(h); ok {
			return max(reset.Sub(t.now()), time.Second), true
		}
	}
	backoff := retry.Backoff{Initial: time.Minute, Max: 16 * time.Minute}.Wait(attempt)
	if resp.StatusCode == http.StatusTooManyRequests {
		return backoff, true
	}
	// A 403 is a rate limit only if it says so; otherwise it is a real
	// permission error and is returned as is.
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err == nil && strings.Contains(strings.ToLower(string(data)), "rate limit") {
		return backoff, true
	}
	return 0, false
}

// retryAfter parses a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return max(time.Duration(s)*time.Second, time.Second), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), time.Second), true
	}
	return 0, false
}
