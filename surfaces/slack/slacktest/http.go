package slacktest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Apps without Socket Mode: Slack POSTs events to the app's Event
// Subscriptions Request URL and interactions to its Interactivity Request
// URL, each signed with the app's signing secret (X-Slack-Signature: v0=
// hex HMAC-SHA256 of "v0:" + X-Slack-Request-Timestamp + ":" + body). An
// event not answered 2xx within three seconds is sent again, at most three
// times: at once, after a minute, after five minutes, with
// X-Slack-Retry-Num (1, 2, 3) and X-Slack-Retry-Reason (http_timeout,
// http_error, connection_failed). A timed-out request is not cancelled:
// the retry goes while the app may still be working on it.

// RetryDelays are the Events API's waits before its three retries.
var RetryDelays = []time.Duration{0, time.Minute, 5 * time.Minute}

// HTTPOption changes how UseHTTP delivers.
type HTTPOption func(*httpTarget)

// WithRetryDelays replaces RetryDelays (a test does not wait six minutes);
// it must hold three delays.
func WithRetryDelays(d ...time.Duration) HTTPOption {
	return func(h *httpTarget) { h.delays = d }
}

type httpTarget struct {
	events, interact string
	secret           string
	delays           []time.Duration
	client           *http.Client
}

// Delivery is one POST of an event to the Request URL.
type Delivery struct {
	EventID string
	// RetryNum is 0 for the first attempt; Reason is the retry's
	// X-Slack-Retry-Reason ("" for the first).
	RetryNum int
	Reason   string
	// Status is the HTTP status answered; 0 when none came within three
	// seconds or the connection failed.
	Status int
}

// SigningSecret is the fake app's signing secret.
func (s *Server) SigningSecret() string { return s.signingSecret }

// UseHTTP makes the fake deliver as Slack does to an app without Socket
// Mode: Send's events to eventsURL, its interactions to interactURL, each
// signed with SigningSecret. As Slack does when the Request URL is entered
// in the app's settings, it first sends eventsURL a url_verification and
// wants its challenge back, in a 200 (the body plain, or JSON
// {"challenge": …}); it fails otherwise.
func (s *Server) UseHTTP(ctx context.Context, eventsURL, interactURL string, opts ...HTTPOption) error {
	h := &httpTarget{events: eventsURL, interact: interactURL, secret: s.signingSecret, delays: RetryDelays,
		client: &http.Client{Timeout: time.Minute}}
	for _, o := range opts {
		o(h)
	}
	if len(h.delays) != 3 {
		return fmt.Errorf("slacktest: want 3 retry delays, got %d", len(h.delays))
	}
	challenge := fmt.Sprintf("fakechallenge%d", time.Now().UnixNano())
	body, _ := json.Marshal(map[string]any{"token": "fake-verification-token", "challenge": challenge, "type": "url_verification"})
	status, resp, err := h.post(ctx, eventsURL, "application/json", body, nil)
	if err != nil {
		return fmt.Errorf("slacktest: url_verification of %s: %w", eventsURL, err)
	}
	got := string(bytes.TrimSpace(resp))
	var js struct {
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(resp, &js) == nil && js.Challenge != "" {
		got = js.Challenge
	} else if form, err := url.ParseQuery(got); err == nil && form.Get("challenge") != "" {
		got = form.Get("challenge")
	}
	if status != http.StatusOK || got != challenge {
		return fmt.Errorf("slacktest: url_verification of %s: status %d, body %q: Slack says the URL did not respond with the challenge", eventsURL, status, resp)
	}
	s.mu.Lock()
	s.http = h
	s.mu.Unlock()
	return nil
}

// Deliveries are the POSTs of events made so far, in order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// post makes one signed request; it returns the status and body.
func (h *httpTarget) post(ctx context.Context, u, contentType string, body []byte, header http.Header) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", Sign(h.secret, ts, body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, nil
}

// Sign is X-Slack-Signature for body sent at ts (Unix seconds) with secret.
func Sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// sendHTTP delivers an envelope's payload over HTTP (UseHTTP): an
// interaction once, waiting AckTimeout for its 200 (its body is returned);
// an event with Slack's retries, returning once one attempt got a 2xx, or
// ErrNoAck when the last did not.
func (s *Server) sendHTTP(h *httpTarget, typ string, payload any) (json.RawMessage, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "interactive":
		form := []byte(url.Values{"payload": {string(body)}}.Encode())
		status, resp, err := h.attempt(h.interact, "application/x-www-form-urlencoded", form, nil)
		switch {
		case err != nil:
			return nil, ErrNoAck
		case status != http.StatusOK:
			return nil, fmt.Errorf("slacktest: the interactivity URL answered %d (Slack shows the user an error)", status)
		}
		return resp, nil
	case "events_api":
		var id struct {
			EventID string `json:"event_id"`
		}
		json.Unmarshal(body, &id)
		reason := ""
		for n := 0; n <= len(h.delays); n++ {
			if n > 0 {
				select {
				case <-time.After(h.delays[n-1]):
				case <-s.done:
					return nil, ErrNoAck
				}
			}
			var header http.Header
			if n > 0 {
				header = http.Header{"X-Slack-Retry-Num": {strconv.Itoa(n)}, "X-Slack-Retry-Reason": {reason}}
			}
			status, _, err := h.attempt(h.events, "application/json", body, header)
			s.mu.Lock()
			s.deliveries = append(s.deliveries, Delivery{EventID: id.EventID, RetryNum: n, Reason: header.Get("X-Slack-Retry-Reason"), Status: status})
			s.notify()
			s.mu.Unlock()
			switch {
			case errors.Is(err, errTimeout):
				reason = "http_timeout"
			case err != nil:
				reason = "connection_failed"
			case status < 200 || status > 299:
				reason = "http_error"
			default:
				return nil, nil
			}
		}
		return nil, ErrNoAck
	}
	return nil, fmt.Errorf("slacktest: cannot send %q over HTTP", typ)
}

var errTimeout = errors.New("no answer within 3s")

// attempt posts once and waits AckTimeout for the answer; past it, it
// returns errTimeout and leaves the request running, as Slack does.
func (h *httpTarget) attempt(u, contentType string, body []byte, header http.Header) (int, []byte, error) {
	type result struct {
		status int
		body   []byte
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		st, b, err := h.post(context.Background(), u, contentType, body, header)
		ch <- result{st, b, err}
	}()
	t := time.NewTimer(AckTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.status, r.body, r.err
	case <-t.C:
		return 0, nil, errTimeout
	}
}
