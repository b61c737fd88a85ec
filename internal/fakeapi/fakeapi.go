// Package fakeapi is a scripted stand-in for the Anthropic Messages API, good
// enough for the real Claude Code CLI to run against it offline.
//
// The CLI calls exactly one endpoint, POST /v1/messages (with ?beta=true), and
// always streams: the server answers with Server-Sent Events in the order the
// real API uses (message_start, ping, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop).
//
// Replies are scripted with rules keyed on the text of the last user message
// (see [Rule]); a request no rule matches gets a plain "OK." text reply. Every
// request is logged and can be inspected with [Server.Requests].
//
// A Server is an http.Handler, ready for httptest.NewServer; [Server.Start]
// runs it on a real port instead, which is how `orchestrator rehearse` runs
// the CLI against the built-in [Rehearsal] script. [OfflineEnv] is the
// environment that keeps the CLI on loopback.
package fakeapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultText is the reply to a request no rule matches.
const DefaultText = "OK."

// maxBody caps the size of a request body the server reads.
const maxBody = 64 << 20

// Rule scripts the reply to the requests it matches.
type Rule struct {
	// When is a substring of the request's Request.LastUserText; "" matches
	// any request.
	When string
	// Reply is the reply, unless Respond is set.
	Reply Reply
	// Respond, when set, computes the reply from the request instead.
	Respond func(Request) Reply
	// Times is how many requests the rule answers; 0 is unlimited. A used-up
	// rule no longer matches.
	Times int
}

// Reply is what the server answers to one request.
type Reply struct {
	// Text is the assistant's text. With Status set, it is the error
	// message instead.
	Text string
	// ToolUse, when set, is a tool call emitted after Text; the message then
	// stops with stop_reason "tool_use" instead of "end_turn".
	ToolUse *ToolUse
	// MoreToolUses are further tool calls of the same message, after
	// ToolUse (the model calling several tools at once).
	MoreToolUses []ToolUse
	// Status, when non-zero, makes the reply an HTTP error with an
	// Anthropic-shaped JSON body, no stream: 429 rate_limit_error (with a
	// retry-after header), 401 authentication_error, 500 api_error,
	// 529 overloaded_error, and so on.
	Status int
	// ChunkDelay is the pause before each text delta: a slow stream.
	// A client that goes away during the pause ends the reply.
	ChunkDelay time.Duration
	// Chunks is how many text_delta pieces Text is sent in (at least one,
	// at most one per character).
	Chunks int
}

// ToolUse is a tool call of the model.
type ToolUse struct {
	// ID is the tool_use block's id; empty gets a fresh "toolu_fake_…" id.
	ID   string
	Name string
	// Input is the tool's input, sent as JSON.
	Input map[string]any
}

// Server is a fake Messages API. It is safe for concurrent use.
type Server struct {
	mu       sync.Mutex
	rules    []Rule
	used     []int // used[i]: how many requests rules[i] answered
	requests []Request
	arrived  chan struct{} // closed and replaced when a request is logged

	ctx    context.Context // ends on Close, ending in-flight streams
	cancel context.CancelFunc
	srv    *http.Server // set by Start
}

// New returns a server that answers with rules: the first rule that matches a
// request wins, and a request no rule matches gets the text [DefaultText].
func New(rules ...Rule) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		rules:   append([]Rule(nil), rules...),
		used:    make([]int, len(rules)),
		arrived: make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// Requests returns a copy of the log of requests to POST /v1/messages, oldest
// first, including those answered with an error.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// WaitRequests blocks until at least n requests have been logged, and
// returns them, or returns ctx's error when ctx ends first.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		if len(s.requests) >= n {
			reqs := append([]Request(nil), s.requests...)
			s.mu.Unlock()
			return reqs, nil
		}
		arrived := s.arrived
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %d requests: %w", n, ctx.Err())
		}
	}
}

// Start serves s on addr (such as "127.0.0.1:0") until Close, and returns
// the base URL to give the CLI as ANTHROPIC_BASE_URL. A server starts at
// most once, and not after Close.
func (s *Server) Start(addr string) (baseURL string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.mu.Lock()
	switch {
	case s.srv != nil:
		s.mu.Unlock()
		ln.Close()
		return "", errors.New("fakeapi: server already started")
	case s.ctx.Err() != nil: // Close cancels before it looks at s.srv
		s.mu.Unlock()
		ln.Close()
		return "", errors.New("fakeapi: server closed")
	}
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln) //nolint:errcheck // Serve always returns ErrServerClosed after Close.
	return "http://" + ln.Addr().String(), nil
}

// Close ends the streams in flight and, after Start, stops listening. It
// is safe to call more than once. Behind an httptest.Server, call it before
// the httptest server's Close, which waits for replies in flight: a slow
// stream would hold it up.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("close fake api server: %w", err)
	}
	return nil
}

// ServeHTTP answers POST /v1/messages (any query, such as ?beta=true) with
// a stream, whatever the request's "stream" says; any other path gets a 404
// and any other method a 405, both with an Anthropic-shaped error body. A
// body that is not a Messages API request gets a 400, and is still logged.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("fakeapi: no endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Sprintf("fakeapi: method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("fakeapi: request body over %d bytes", maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("fakeapi: read request body: %v", err))
		return
	}
	req, perr := parseRequest(body)
	req.Time = time.Now()
	reply, i := s.record(req, perr == nil)
	defer s.ended(i)
	if perr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "fakeapi: "+perr.Error())
		return
	}
	if reply.Status != 0 {
		writeErrorReply(w, reply)
		return
	}
	ctx, cancel := mergeDone(r.Context(), s.ctx)
	defer cancel()
	model := req.Model
	if model == "" {
		model = "claude-fake"
	}
	// The error is the client going away or Close: nothing to answer to.
	_ = stream(ctx, w, model, reply)
}

// ended records when the answer to request i was over (Request.Ended).
func (s *Server) ended(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < len(s.requests) {
		s.requests[i].Ended = time.Now()
	}
}

// record logs req and, when scriptable, picks its reply, both under the lock
// so that Times counts are exact under concurrent requests; it returns the
// request's index too.
func (s *Server) record(req Request, scriptable bool) (Reply, int) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	i := len(s.requests) - 1
	close(s.arrived)
	s.arrived = make(chan struct{})
	var rule *Rule
	if scriptable {
		for i := range s.rules {
			r := &s.rules[i]
			if r.Times > 0 && s.used[i] >= r.Times {
				continue
			}
			if strings.Contains(req.LastUserText, r.When) {
				s.used[i]++
				rule = r
				break
			}
		}
	}
	s.mu.Unlock()

	switch {
	case rule == nil:
		return Reply{Text: DefaultText}, i
	case rule.Respond != nil:
		return rule.Respond(req), i
	default:
		return rule.Reply, i
	}
}

// mergeDone returns a context that ends when a or b ends.
func mergeDone(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// errorType returns the API's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

// writeErrorReply answers with the HTTP error reply describes.
func writeErrorReply(w http.ResponseWriter, reply Reply) {
	if reply.Status < 400 || reply.Status > 599 {
		writeError(w, http.StatusInternalServerError, "api_error",
			fmt.Sprintf("fakeapi: Reply.Status %d is not an HTTP error status (400-599)", reply.Status))
		return
	}
	typ := errorType(reply.Status)
	msg := reply.Text
	if msg == "" {
		msg = fmt.Sprintf("fake %d error", reply.Status)
	}
	if reply.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, reply.Status, typ, msg)
}

// writeError answers with an Anthropic-shaped error body.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	body, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", newID("req_fake_"))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // nothing to do when the client is gone
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}
