// Package slacktest is a fake Slack for tests: the Web API methods the
// Slack surface calls (auth.test, chat.postMessage, chat.update,
// chat.postEphemeral, views.open, conversations.history,
// conversations.info, usergroups.users.list, apps.connections.open) and a
// Socket Mode WebSocket that says hello, pings, delivers events_api and
// interactive envelopes, waits three seconds for their acknowledgement by
// envelope_id, sends disconnect envelopes and drops connections, as Slack
// documents them. For an app without Socket Mode (UseHTTP, http.go) it
// POSTs instead, signed: events to the Events API Request URL (verified
// first with url_verification; retried as Slack retries) and interactions
// to the Interactivity Request URL. It listens on 127.0.0.1 only.
//
// It is strict where Slack is: a bot token (xoxb-) for the Web API, an app
// token (xapp-) for apps.connections.open only, a channel the bot is a
// member of, at most 50 blocks a message, unique block IDs, a trigger ID
// used once and within three seconds, text or blocks on every message.
package slacktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// IDs of the fake workspace.
const (
	TeamID    = "T0FAKE0001"
	AppID     = "A0FAKE0001"
	BotUserID = "U0FAKEB0T1"
	BotID     = "B0FAKE0001"
	ChannelID = "C0FAKE0001"
)

// AckTimeout is how long Slack waits for a Socket Mode acknowledgement.
const AckTimeout = 3 * time.Second

// User is a person of the fake workspace.
type User struct {
	ID   string
	Name string
}

// Message is a message posted in the fake workspace.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
	Metadata json.RawMessage
	// Updates counts chat.update calls on the message.
	Updates int
}

// Ephemeral is a message only one user sees.
type Ephemeral struct {
	Channel, User, Text, ThreadTS string
	// TS is the message_ts chat.postEphemeral returned; Blocks its blocks.
	TS     string
	Blocks json.RawMessage
}

// View is a modal opened with views.open.
type View struct {
	ID        string
	TriggerID string
	User      string
	View      json.RawMessage
}

// Server is the fake Slack. Its methods are safe for concurrent use.
type Server struct {
	URL string // the server's root; APIURL is its Web API root

	t        testing.TB
	srv      *httptest.Server
	botToken string
	appToken string
	// signingSecret signs the requests of UseHTTP (http.go).
	signingSecret string
	done          chan struct{} // closed by Close
	closeOnce     sync.Once

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	nextTS     int64
	messages   []*Message
	ephemerals []Ephemeral
	views      []View
	triggers   map[string]trigger // trigger ID → who and when
	groups     map[string][]string
	members    map[string]bool // channels the bot is in
	calls      map[string]int
	limited    map[string]int // method → 429s still to send
	retryAfter map[string]int // method → Retry-After of its 429s, in seconds (1 when unset)
	failing    map[string]failure
	holds      map[string]chan struct{} // method → its next response waits for the channel to close
	conns      map[int]*conn
	nextConn   int
	nextEnv    int
	acks       map[string]chan json.RawMessage
	opens      int
	refuseOpen bool
	http       *httpTarget // set by UseHTTP: Send goes over HTTP
	deliveries []Delivery
}

// failure is what the next calls of a method answer (Fail).
type failure struct {
	code string
	n    int
}

type trigger struct {
	user string
	at   time.Time
	used bool
}

type conn struct {
	id   int
	ws   *websocket.Conn
	wmu  sync.Mutex
	done chan struct{}
}

// NewServer starts a fake Slack, closed when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{
		t:             t,
		botToken:      "xoxb-1111111111-2222222222-FakeBotTokenForTests0",
		appToken:      "xapp-1-A0FAKE0001-3333333333-fakeapptokenfortests0000000000000000",
		signingSecret: "f4k3516n1n65ecre7f0r7e575000000a",
		done:          make(chan struct{}),
		changed:       make(chan struct{}),
		nextTS:        1700000000,
		triggers:      map[string]trigger{},
		groups:        map[string][]string{},
		members:       map[string]bool{ChannelID: true},
		calls:         map[string]int{},
		limited:       map[string]int{},
		retryAfter:    map[string]int{},
		failing:       map[string]failure{},
		holds:         map[string]chan struct{}{},
		conns:         map[int]*conn{},
		acks:          map[string]chan json.RawMessage{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.api)
	mux.HandleFunc("/link/", s.link)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close drops every connection and stops the server.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.Drop()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// APIURL is the Web API root to configure (api_url).
func (s *Server) APIURL() string { return s.URL + "/api/" }

// BotToken and AppToken are the tokens the fake accepts.
func (s *Server) BotToken() string { return s.botToken }

// AppToken is the Socket Mode app-level token the fake accepts.
func (s *Server) AppToken() string { return s.appToken }

// SetGroup sets the members of user group id.
func (s *Server) SetGroup(id string, users ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[id] = users
}

// RateLimit makes the next n calls of method answer 429 with Retry-After: 1.
func (s *Server) RateLimit(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[method] = n
}

// RateLimitFor is RateLimit with Retry-After: retryAfter (whole seconds).
func (s *Server) RateLimitFor(method string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[method] = n
	s.retryAfter[method] = int(retryAfter / time.Second)
}

// Fail makes the next n calls of method fail as Slack's Web API does:
// HTTP 200 with ok false and error code (e.g. "missing_scope",
// "internal_error").
func (s *Server) Fail(method, code string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[method] = failure{code: code, n: n}
}

// HoldResponse serves the next call of method (what it does is seen at
// once: a message posted is there) but holds its response until release
// is called or its client gives up: a client still waiting for a post
// that Slack made.
func (s *Server) HoldResponse(method string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.holds[method] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.holds[method] == ch {
				delete(s.holds, method)
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Calls returns how many times method was called (429s included).
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Opens returns how many Socket Mode URLs apps.connections.open handed out.
func (s *Server) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// Messages returns a copy of the messages posted, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = *m
	}
	return out
}

// Message returns the message at ts.
func (s *Server) Message(ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.messages {
		if m.TS == ts {
			return *m, true
		}
	}
	return Message{}, false
}

// Ephemerals returns the ephemeral messages posted, oldest first.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephemerals...)
}

// WaitFor waits until cond, called with the server locked out, holds.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitMessage waits for a message that match accepts.
func (s *Server) WaitMessage(ctx context.Context, match func(Message) bool) (Message, error) {
	var found Message
	err := s.WaitFor(ctx, func() bool {
		for _, m := range s.Messages() {
			if match(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found, err
}

// WaitConnected waits until at least n Socket Mode connections are open.
func (s *Server) WaitConnected(ctx context.Context, n int) error {
	return s.WaitFor(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) >= n
	})
}

// Generation returns the ID of the newest connection ever opened: wait
// for Renewed(g) to see every connection open before it replaced.
func (s *Server) Generation() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextConn
}

// Renewed reports whether connections are open and all were opened after
// generation g (the ones before are closed).
func (s *Server) Renewed(g int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) == 0 {
		return false
	}
	for id := range s.conns {
		if id <= g {
			return false
		}
	}
	return true
}

// Connections returns how many Socket Mode connections are open.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) notify() { // s.mu held
	close(s.changed)
	s.changed = make(chan struct{})
}

// --- Web API ---

type apiError string

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	params, err := readParams(r)
	if err != nil {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = str(params["token"])
	}
	s.mu.Lock()
	s.calls[method]++
	if n := s.limited[method]; n > 0 {
		s.limited[method] = n - 1
		retry := max(s.retryAfter[method], 1)
		s.notify()
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		w.WriteHeader(http.StatusTooManyRequests)
		writeJSON(w, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	if f := s.failing[method]; f.n > 0 {
		f.n--
		s.failing[method] = f
		s.notify()
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": false, "error": f.code})
		return
	}
	s.mu.Unlock()
	switch {
	case token == "":
		writeJSON(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	case method == "apps.connections.open":
		if token != s.appToken {
			writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
	case token != s.botToken:
		if token == s.appToken {
			writeJSON(w, map[string]any{"ok": false, "error": "not_allowed_token_type"})
			return
		}
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	var res map[string]any
	var aerr apiError
	s.mu.Lock()
	switch method {
	case "auth.test":
		res = map[string]any{"url": "https://fake.slack.com/", "team": "fake", "user": "orchestrator", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID}
	case "apps.connections.open":
		if s.refuseOpen {
			aerr = "internal_error"
			break
		}
		s.opens++
		u := strings.Replace(s.URL, "http://", "ws://", 1) + "/link/?ticket=" + strconv.Itoa(s.opens)
		res = map[string]any{"url": u}
	case "chat.postMessage":
		res, aerr = s.postMessage(params)
	case "chat.update":
		res, aerr = s.update(params)
	case "chat.postEphemeral":
		res, aerr = s.postEphemeral(params)
	case "views.open":
		res, aerr = s.openView(params)
	case "conversations.history":
		res, aerr = s.history(params)
	case "conversations.replies":
		res, aerr = s.replies(params)
	case "conversations.info":
		res, aerr = s.info(params)
	case "usergroups.users.list":
		users, ok := s.groups[str(params["usergroup"])]
		if !ok {
			aerr = "no_such_subteam"
			break
		}
		res = map[string]any{"users": append([]string{}, users...)}
	default:
		aerr = "unknown_method"
	}
	if aerr == "" {
		s.notify()
	}
	held := s.holds[method]
	delete(s.holds, method)
	s.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}
	if aerr != "" {
		writeJSON(w, map[string]any{"ok": false, "error": string(aerr)})
		return
	}
	res["ok"] = true
	writeJSON(w, res)
}

func readParams(r *http.Request) (map[string]any, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if len(body) == 0 {
			return out, nil
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return nil, err
		}
		return out, nil
	}
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	for k, v := range r.URL.Query() {
		vals[k] = v
	}
	for k, v := range vals {
		out[k] = v[0]
	}
	return out, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// raw returns a JSON parameter given as a string (form) or inline (JSON).
func raw(v any) json.RawMessage {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		if v == "" {
			return nil
		}
		return json.RawMessage(v)
	default:
		b, _ := json.Marshal(v)
		return b
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) ts() string {
	s.nextTS++
	return fmt.Sprintf("%d.%06d", s.nextTS, s.nextTS%1000000)
}

// checkBlocks applies Slack's limits on a message's blocks.
func checkBlocks(b json.RawMessage, max int) apiError {
	if b == nil {
		return ""
	}
	var blocks []map[string]any
	if err := json.Unmarshal(b, &blocks); err != nil {
		return "invalid_blocks_format"
	}
	if len(blocks) > max {
		return "invalid_blocks"
	}
	seen := map[string]bool{}
	for _, bl := range blocks {
		id := str(bl["block_id"])
		if id != "" {
			if seen[id] || len(id) > 255 {
				return "invalid_blocks"
			}
			seen[id] = true
		}
		if els, ok := bl["elements"].([]any); ok && str(bl["type"]) == "actions" && len(els) > 25 {
			return "invalid_blocks"
		}
	}
	return ""
}

func (s *Server) postMessage(p map[string]any) (map[string]any, apiError) {
	ch := str(p["channel"])
	switch {
	case ch == "":
		return nil, "channel_not_found"
	case !s.members[ch]:
		return nil, "not_in_channel"
	}
	blocks := raw(p["blocks"])
	if str(p["text"]) == "" && blocks == nil {
		return nil, "no_text"
	}
	if e := checkBlocks(blocks, 50); e != "" {
		return nil, e
	}
	thread := str(p["thread_ts"])
	if thread != "" && s.find(ch, thread) == nil {
		return nil, "thread_not_found"
	}
	m := &Message{Channel: ch, TS: s.ts(), ThreadTS: thread, Text: str(p["text"]), Blocks: blocks, Metadata: raw(p["metadata"])}
	s.messages = append(s.messages, m)
	return map[string]any{"channel": ch, "ts": m.TS, "message": map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": BotUserID}}, ""
}

func (s *Server) find(ch, ts string) *Message {
	for _, m := range s.messages {
		if m.Channel == ch && m.TS == ts {
			return m
		}
	}
	return nil
}

func (s *Server) update(p map[string]any) (map[string]any, apiError) {
	m := s.find(str(p["channel"]), str(p["ts"]))
	if m == nil {
		return nil, "message_not_found"
	}
	blocks := raw(p["blocks"])
	if e := checkBlocks(blocks, 50); e != "" {
		return nil, e
	}
	if str(p["text"]) == "" && blocks == nil {
		return nil, "no_text"
	}
	m.Text, m.Blocks, m.Updates = str(p["text"]), blocks, m.Updates+1
	return map[string]any{"channel": m.Channel, "ts": m.TS, "text": m.Text}, ""
}

func (s *Server) postEphemeral(p map[string]any) (map[string]any, apiError) {
	ch, user := str(p["channel"]), str(p["user"])
	switch {
	case !s.members[ch]:
		return nil, "not_in_channel"
	case user == "":
		return nil, "user_not_in_channel"
	case str(p["text"]) == "" && raw(p["blocks"]) == nil:
		return nil, "no_text"
	}
	blocks := raw(p["blocks"])
	if blocks != nil {
		if e := checkBlocks(blocks, 50); e != "" {
			return nil, e
		}
	}
	ts := s.ts()
	s.ephemerals = append(s.ephemerals, Ephemeral{Channel: ch, User: user, Text: str(p["text"]), ThreadTS: str(p["thread_ts"]), TS: ts, Blocks: blocks})
	return map[string]any{"message_ts": ts}, ""
}

// ClickEphemeral clicks, as u, the button labelled label on the ephemeral
// message at ts, which only its user sees. The payload is as Slack sends
// it for an ephemeral message: the container says so and there is no
// message.
func (s *Server) ClickEphemeral(u User, ts, label string) (string, error) {
	s.mu.Lock()
	var e *Ephemeral
	for i := range s.ephemerals {
		if s.ephemerals[i].TS == ts {
			e = &s.ephemerals[i]
		}
	}
	var m Ephemeral
	if e != nil {
		m = *e
	}
	s.mu.Unlock()
	switch {
	case e == nil:
		return "", fmt.Errorf("slacktest: no ephemeral message %s", ts)
	case m.User != u.ID:
		return "", fmt.Errorf("slacktest: %s cannot see the ephemeral message %s of %s", u.ID, ts, m.User)
	}
	b, el, ok := findElement(Message{Blocks: m.Blocks}, func(e element) bool { return e.Type == "button" && e.Text.Text == label })
	if !ok {
		return "", fmt.Errorf("slacktest: no button %q on ephemeral message %s", label, ts)
	}
	tr := s.newTrigger(u.ID)
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel, "is_ephemeral": true}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	payload := map[string]any{
		"type": "block_actions", "api_app_id": AppID, "token": "verification-token-unused",
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": TeamID},
		"team":       map[string]any{"id": TeamID, "domain": "fake"},
		"container":  container,
		"trigger_id": tr,
		"channel":    map[string]any{"id": m.Channel, "name": "orchestrator"},
		"actions": []any{map[string]any{"type": "button", "action_id": el.ActionID, "block_id": b.BlockID, "value": el.Value,
			"text": map[string]any{"type": "plain_text", "text": label}, "action_ts": fmt.Sprintf("%d.000001", time.Now().Unix())}},
	}
	_, err := s.Send("interactive", payload, false)
	return tr, err
}

func (s *Server) openView(p map[string]any) (map[string]any, apiError) {
	id := str(p["trigger_id"])
	tr, ok := s.triggers[id]
	switch {
	case !ok:
		return nil, "invalid_trigger_id"
	case tr.used || time.Since(tr.at) > 3*time.Second:
		return nil, "expired_trigger_id"
	}
	tr.used = true
	s.triggers[id] = tr
	v := raw(p["view"])
	var view map[string]any
	if err := json.Unmarshal(v, &view); err != nil || str(view["type"]) != "modal" {
		return nil, "invalid_arguments"
	}
	if title, _ := view["title"].(map[string]any); title == nil || len([]rune(str(title["text"]))) > 24 {
		return nil, "invalid_arguments"
	}
	if e := checkBlocks(raw(view["blocks"]), 100); e != "" {
		return nil, e
	}
	vw := View{ID: fmt.Sprintf("V%08d", len(s.views)+1), TriggerID: id, User: tr.user, View: v}
	s.views = append(s.views, vw)
	return map[string]any{"view": map[string]any{"id": vw.ID}}, ""
}

func (s *Server) history(p map[string]any) (map[string]any, apiError) {
	ch := str(p["channel"])
	if !s.members[ch] {
		return nil, "not_in_channel"
	}
	var msgs []map[string]any
	for i := len(s.messages) - 1; i >= 0; i-- {
		m := s.messages[i]
		if m.Channel != ch || m.ThreadTS != "" {
			continue
		}
		msgs = append(msgs, listed(m, p))
	}
	return map[string]any{"messages": msgs, "has_more": false}, ""
}

// listed is m as conversations.history and .replies list it: with its
// metadata only when include_all_metadata is set.
func listed(m *Message, p map[string]any) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": BotUserID, "bot_id": BotID}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if v := p["include_all_metadata"]; (v == "true" || v == "1" || v == true) && m.Metadata != nil {
		out["metadata"] = m.Metadata
	}
	return out
}

func (s *Server) replies(p map[string]any) (map[string]any, apiError) {
	ch, ts := str(p["channel"]), str(p["ts"])
	if !s.members[ch] {
		return nil, "not_in_channel"
	}
	if s.find(ch, ts) == nil {
		return nil, "thread_not_found"
	}
	var msgs []map[string]any
	for _, m := range s.messages {
		if m.Channel == ch && (m.TS == ts || m.ThreadTS == ts) {
			msgs = append(msgs, listed(m, p))
		}
	}
	return map[string]any{"messages": msgs, "has_more": false}, ""
}

func (s *Server) info(p map[string]any) (map[string]any, apiError) {
	ch := str(p["channel"])
	if !strings.HasPrefix(ch, "C") && !strings.HasPrefix(ch, "G") {
		return nil, "channel_not_found"
	}
	return map[string]any{"channel": map[string]any{"id": ch, "name": "orchestrator", "is_channel": true, "is_member": s.members[ch]}}, ""
}

// SetMember sets whether the bot is a member of channel ch.
func (s *Server) SetMember(ch string, member bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[ch] = member
}

// --- Socket Mode ---

// upgrader takes connections from any origin: clients send Slack's own
// (https://api.slack.com).
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) link(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	n, err := strconv.Atoi(ticket)
	s.mu.Lock()
	valid := err == nil && n >= 1 && n <= s.opens
	s.mu.Unlock()
	if !valid {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.nextConn++
	c := &conn{id: s.nextConn, ws: ws, done: make(chan struct{})}
	s.conns[c.id] = c
	num := len(s.conns)
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c.id)
		s.notify()
		s.mu.Unlock()
		ws.Close()
	}()
	c.write(map[string]any{"type": "hello", "num_connections": num,
		"debug_info":      map[string]any{"host": "applink-fake", "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": AppID}})
	go c.pinger()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			close(c.done)
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		ch := s.acks[ack.EnvelopeID]
		delete(s.acks, ack.EnvelopeID)
		s.mu.Unlock()
		if ch != nil {
			ch <- ack.Payload
		}
	}
}

func (c *conn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

func (c *conn) pinger() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.wmu.Lock()
			err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second))
			c.wmu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// ErrNotConnected is what a user would see as "this app is not responding":
// no Socket Mode connection took the envelope.
var ErrNotConnected = errors.New("slacktest: no Socket Mode connection (Slack shows the user an error)")

// ErrNoAck is Slack's three seconds passing without an acknowledgement (the
// user sees an error).
var ErrNoAck = errors.New("slacktest: the envelope was not acknowledged within 3s (Slack shows the user an error)")

// Send delivers an envelope of type typ ("interactive", "events_api") with
// payload on one open connection (the newest) and waits AckTimeout for its
// acknowledgement. It returns the acknowledgement's payload.
//
// After UseHTTP, it POSTs instead, as Slack does to an app without Socket
// Mode (http.go).
func (s *Server) Send(typ string, payload any, acceptsResponse bool) (json.RawMessage, error) {
	s.mu.Lock()
	if h := s.http; h != nil {
		s.mu.Unlock()
		return s.sendHTTP(h, typ, payload)
	}
	var c *conn
	for _, x := range s.conns {
		if c == nil || x.id > c.id {
			c = x
		}
	}
	s.nextEnv++
	env := fmt.Sprintf("env-%06d", s.nextEnv)
	ch := make(chan json.RawMessage, 1)
	if c != nil {
		s.acks[env] = ch
	}
	s.mu.Unlock()
	if c == nil {
		return nil, ErrNotConnected
	}
	if err := c.write(map[string]any{"envelope_id": env, "type": typ, "payload": payload, "accepts_response_payload": acceptsResponse, "retry_attempt": 0, "retry_reason": ""}); err != nil {
		return nil, ErrNotConnected
	}
	t := time.NewTimer(AckTimeout)
	defer t.Stop()
	select {
	case p := <-ch:
		return p, nil
	case <-t.C:
		s.mu.Lock()
		delete(s.acks, env)
		s.mu.Unlock()
		return nil, ErrNoAck
	}
}

// Disconnect sends every connection a disconnect envelope with reason
// ("refresh_requested", "link_disabled", "warning"), then closes them as
// Slack does.
func (s *Server) Disconnect(reason string) {
	for _, c := range s.connList() {
		c.write(map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "applink-fake"}})
		c.wmu.Lock()
		c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		c.wmu.Unlock()
		c.ws.Close()
	}
}

// Drop closes every connection without a word (a network failure).
func (s *Server) Drop() {
	for _, c := range s.connList() {
		c.ws.Close()
	}
}

func (s *Server) connList() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	return out
}

// --- interactions ---

func (s *Server) newTrigger(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("%d.%d.fake%d", s.nextTS, len(s.triggers)+1, len(s.triggers)+1)
	s.triggers[id] = trigger{user: user, at: time.Now()}
	return id
}

type element struct {
	Type     string `json:"type"`
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
	Text     struct {
		Text string `json:"text"`
	} `json:"text"`
	Options []struct {
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
		Value string `json:"value"`
	} `json:"options"`
}

type block struct {
	Type     string    `json:"type"`
	BlockID  string    `json:"block_id"`
	Elements []element `json:"elements"`
}

// findElement finds in message m an interactive element accepted by match.
func findElement(m Message, match func(element) bool) (block, element, bool) {
	var blocks []block
	json.Unmarshal(m.Blocks, &blocks)
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if match(e) {
				return b, e, true
			}
		}
	}
	return block{}, element{}, false
}

func (s *Server) blockActions(u User, m Message, b block, action map[string]any) (string, error) {
	tr := s.newTrigger(u.ID)
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	action["block_id"] = b.BlockID
	action["action_ts"] = fmt.Sprintf("%d.000001", time.Now().Unix())
	payload := map[string]any{
		"type": "block_actions", "api_app_id": AppID, "token": "verification-token-unused",
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": TeamID},
		"team":       map[string]any{"id": TeamID, "domain": "fake"},
		"container":  container,
		"trigger_id": tr,
		"channel":    map[string]any{"id": m.Channel, "name": "orchestrator"},
		"message":    map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": BotUserID, "blocks": m.Blocks},
		"actions":    []any{action},
	}
	_, err := s.Send("interactive", payload, false)
	return tr, err
}

// ClickButton clicks, as u, the button labelled label on the message at ts.
// It returns the interaction's trigger ID once Slack had the
// acknowledgement, or ErrNotConnected / ErrNoAck.
func (s *Server) ClickButton(u User, ts, label string) (string, error) {
	m, ok := s.Message(ts)
	if !ok {
		return "", fmt.Errorf("slacktest: no message %s", ts)
	}
	b, e, ok := findElement(m, func(e element) bool { return e.Type == "button" && e.Text.Text == label })
	if !ok {
		return "", fmt.Errorf("slacktest: no button %q on message %s", label, ts)
	}
	return s.blockActions(u, m, b, map[string]any{"type": "button", "action_id": e.ActionID, "value": e.Value, "text": map[string]any{"type": "plain_text", "text": label}})
}

// Choose picks, as u, the options labelled labels in the select menu
// (static_select, or multi_static_select) of the message at ts.
func (s *Server) Choose(u User, ts string, labels ...string) (string, error) {
	m, ok := s.Message(ts)
	if !ok {
		return "", fmt.Errorf("slacktest: no message %s", ts)
	}
	b, e, ok := findElement(m, func(e element) bool { return e.Type == "static_select" || e.Type == "multi_static_select" })
	if !ok {
		return "", fmt.Errorf("slacktest: no select menu on message %s", ts)
	}
	var picked []map[string]any
	for _, l := range labels {
		found := false
		for _, o := range e.Options {
			if o.Text.Text == l {
				picked = append(picked, map[string]any{"text": map[string]any{"type": "plain_text", "text": l}, "value": o.Value})
				found = true
			}
		}
		if !found {
			return "", fmt.Errorf("slacktest: no option %q in the menu of %s", l, ts)
		}
	}
	action := map[string]any{"type": e.Type, "action_id": e.ActionID}
	if e.Type == "static_select" {
		if len(picked) != 1 {
			return "", errors.New("slacktest: a static_select takes one option")
		}
		action["selected_option"] = picked[0]
	} else {
		action["selected_options"] = picked
	}
	return s.blockActions(u, m, b, action)
}

// WaitView waits for the modal opened with trigger ID tr.
func (s *Server) WaitView(ctx context.Context, tr string) (View, error) {
	var v View
	err := s.WaitFor(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, x := range s.views {
			if x.TriggerID == tr {
				v = x
				return true
			}
		}
		return false
	})
	return v, err
}

// SubmitView submits, as u, the modal v with text in each of its
// plain_text_input elements. It returns the acknowledgement's payload.
func (s *Server) SubmitView(u User, v View, text string) (json.RawMessage, error) {
	var view map[string]any
	if err := json.Unmarshal(v.View, &view); err != nil {
		return nil, err
	}
	values := map[string]any{}
	blocks, _ := view["blocks"].([]any)
	for _, b := range blocks {
		bm, _ := b.(map[string]any)
		el, _ := bm["element"].(map[string]any)
		if str(bm["type"]) == "input" && str(el["type"]) == "plain_text_input" {
			values[str(bm["block_id"])] = map[string]any{str(el["action_id"]): map[string]any{"type": "plain_text_input", "value": text}}
		}
	}
	view["id"] = v.ID
	view["state"] = map[string]any{"values": values}
	payload := map[string]any{
		"type": "view_submission", "api_app_id": AppID, "token": "verification-token-unused",
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": TeamID},
		"team":       map[string]any{"id": TeamID, "domain": "fake"},
		"trigger_id": s.newTrigger(u.ID),
		"view":       view,
	}
	return s.Send("interactive", payload, true)
}

// --- events ---

// PostAsUser posts text in the channel as u, in thread ("" at the top
// level), as a person does in Slack's client, and returns the message.
func (s *Server) PostAsUser(u User, thread, text string) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if thread != "" && s.find(ChannelID, thread) == nil {
		s.t.Errorf("slacktest: PostAsUser in thread %s: no such message", thread)
	}
	m := &Message{Channel: ChannelID, TS: s.ts(), ThreadTS: thread, Text: text}
	s.messages = append(s.messages, m)
	s.notify()
	return *m
}

// AppMention is the events_api payload of the app_mention event Slack
// sends when m, posted by u, mentions the bot: an event_callback with
// eventID, as the Events API documents it. Set botID to make it a bot's.
func AppMention(eventID string, u User, m Message, botID string) map[string]any {
	ev := map[string]any{"type": "app_mention", "user": u.ID, "text": m.Text, "ts": m.TS, "channel": m.Channel, "event_ts": m.TS}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
	}
	if botID != "" {
		ev["bot_id"] = botID
	}
	return map[string]any{
		"token": "fake-verification-token", "team_id": TeamID, "api_app_id": AppID, "type": "event_callback",
		"event": ev, "event_id": eventID, "event_time": 1700000000, "event_context": "4-fake",
		"authorizations": []map[string]any{{"team_id": TeamID, "user_id": BotUserID, "is_bot": true}},
	}
}
