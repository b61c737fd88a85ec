// Package discordtest is a fake Discord for tests: the REST API on an
// httptest server and a gateway websocket that speaks Hello, Identify,
// Ready, Resume, heartbeats and dispatches INTERACTION_CREATE and
// MESSAGE_CREATE.
//
// A discordgo Session talks to it when its HTTP client rewrites
// https://discord.com to Server.URL (the discord surface's Config.APIURL does
// that); the gateway URL comes from the fake's /gateway answer.
//
// Helpers play the people: ClickButton, Select, SubmitModal and Reply send
// what a Discord client would, as a given user with given roles; Messages,
// Message and WaitResponse read what the bot did; Drop cuts the gateway;
// every interaction response records how long after the dispatch it came.
//
// It is as strict as Discord's docs: an interaction's initial response is
// refused (404, 10062) past InteractionDeadline after the click, even when
// the click was queued while the bot was away, and a second one with
// 40060; its follow-ups and edits (404, 10015) past TokenLifetime (Advance
// moves the fake's clock); a session is resumed only on the READY's
// resume_gateway_url (ResumeURL), a RESUME on the gateway URL gets op 9 and
// the events in between are lost; CloseGateway, RefuseGateway and
// DisallowIntents close connections with Discord's close codes (4004,
// 4014…); edits and reactions in an archived thread (ArchiveThread) are
// refused with 50083 until PATCH /channels/{thread} {"archived": false} or
// a new message unarchives it.
//
// It serves only 127.0.0.1 and never logs the bot token.
package discordtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Default identities of the fake.
const (
	GuildID   = "1000000000000000001"
	ChannelID = "1000000000000000002"
	BotUserID = "1000000000000000003"
	AppID     = "1000000000000000004"
	BotName   = "orchestrator-bot"
)

// User is a person clicking in the fake: a user ID, a name and the IDs of
// the roles they hold in the guild.
type User struct {
	ID    string
	Name  string
	Roles []string
}

// Response is what the bot answered to one interaction.
type Response struct {
	InteractionID string
	Type          discordgo.InteractionResponseType
	Data          *discordgo.InteractionResponseData
	// Ephemeral reports a reply only the clicker sees (flag 64).
	Ephemeral bool
	// Latency is the time between the dispatch of the interaction on the
	// gateway and the arrival of this response.
	Latency time.Duration
}

// Followup is a message sent through an interaction's webhook after the
// acknowledgement.
type Followup struct {
	InteractionID string
	// MessageID is the follow-up message's ID (ClickFollowup clicks its
	// buttons; an ephemeral one is in no channel's history).
	MessageID  string
	Content    string
	Ephemeral  bool
	Components []discordgo.MessageComponent
}

// Request is one REST request the fake received.
type Request struct {
	Method string
	// Path is relative to the API version: "/channels/123/messages".
	Path string
	At   time.Time
}

// RateLimit makes the fake answer 429 to the next Count requests whose
// method is Method and whose path (relative to the API version) starts with
// PathPrefix.
type RateLimit struct {
	Method     string
	PathPrefix string
	RetryAfter time.Duration
	Global     bool
	Count      int
}

type interaction struct {
	id, token  string
	messageID  string
	user       User
	dispatched time.Time
	response   *Response
	followups  []Followup
}

type channel struct {
	id, parentID, name string
	typ                discordgo.ChannelType
	messages           []*discordgo.Message
	archived, locked   bool // of a thread
}

// Server is the fake Discord. Its methods are safe for concurrent use.
type Server struct {
	// URL is the REST base that replaces https://discord.com.
	URL string
	// GatewayURL is the websocket URL the fake hands out.
	GatewayURL string
	// ResumeURL is the READY's resume_gateway_url: as on Discord, a
	// session is resumed there; a RESUME sent to GatewayURL is refused
	// (op 9, not resumable) and the session's events in between are lost.
	ResumeURL string

	token string
	http  *httptest.Server
	up    websocket.Upgrader

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every change
	nextID       int64
	seq          int64
	channels     map[string]*channel
	messages     map[string]*discordgo.Message
	interactions map[string]*interaction
	followups    map[string]*discordgo.Message // follow-up messages by ID
	conns        map[*gwConn]bool
	pending      [][]byte // dispatches queued while no session is ready
	sessions     map[string]bool
	lose         bool // discard dispatches until the next READY
	members      map[string]User
	identifies   int
	resumes      int
	dials        map[string]int // gateway connections by path
	disallowed   int            // intents that close an identify with 4014
	closeNext    *closeCode     // the close the next identify gets, if any
	requests     []Request
	limits       []*RateLimit
	hangs        []*hang
	closed       bool
	skew         time.Duration // added to the clock by Advance
	everyone     *int64        // the @everyone role's permissions (guild.go)
}

// Discord's deadlines for interactions.
const (
	// InteractionDeadline is how long after an interaction (the click) its
	// initial response is accepted; later, the callback gets 404 Unknown
	// interaction (10062).
	InteractionDeadline = 3 * time.Second
	// TokenLifetime is how long an interaction's token stays valid for
	// follow-ups and edits of the original response; later they get 404
	// Unknown Webhook (10015).
	TokenLifetime = 15 * time.Minute
)

// now is the fake's clock: the time, moved forward by Advance. Call with
// s.mu held.
func (s *Server) now() time.Time { return time.Now().Add(s.skew) }

// Advance moves the fake's clock forward by d, as if that much time had
// passed for the interactions' deadlines (InteractionDeadline,
// TokenLifetime).
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skew += d
}

type hang struct {
	method, prefix string
	release        chan struct{}
	after          bool // serve the request, hold its response
	once           bool // only the first request matching
}

// Hang holds every REST request whose method is method and whose path
// (relative to the API version) starts with prefix unanswered until release
// is called or its client gives up, as a Discord that accepts the
// connection and never answers. Requests held are served once released.
func (s *Server) Hang(method, prefix string) (release func()) {
	return s.addHang(&hang{method: method, prefix: prefix, release: make(chan struct{})})
}

// addHang holds the requests h matches until the function it returns is
// called.
func (s *Server) addHang(h *hang) (release func()) {
	s.mu.Lock()
	s.hangs = append(s.hangs, h)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.hangs = slices.DeleteFunc(s.hangs, func(x *hang) bool { return x == h })
			s.mu.Unlock()
			close(h.release)
		})
	}
}

// HoldResponse serves the next REST request whose method is method and
// whose path starts with prefix (what it does is seen at once: a message
// posted is there) but holds its response until release is called or its
// client gives up: a client still waiting for a post that Discord made.
// Later requests are served as usual.
func (s *Server) HoldResponse(method, prefix string) (release func()) {
	return s.addHang(&hang{method: method, prefix: prefix, release: make(chan struct{}), after: true, once: true})
}

// held returns the release channel of a hang matching the request, or nil.
func (s *Server) held(method, path string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldLocked(method, path, false)
}

// heldLocked returns the release channel of a hang matching the request
// before (after false) or after it is served, or nil. A hang of one
// request is used up.
func (s *Server) heldLocked(method, path string, after bool) <-chan struct{} {
	for i, h := range s.hangs {
		if h.after == after && h.method == method && strings.HasPrefix(path, h.prefix) {
			if h.once {
				s.hangs = slices.Delete(s.hangs, i, i+1)
			}
			return h.release
		}
	}
	return nil
}

// NewServer starts a fake Discord with one guild and one text channel
// (ChannelID), accepting the bot token Token(). It is closed when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		token:        "fake-token." + strconv.FormatInt(time.Now().UnixNano(), 36) + ".secret",
		changed:      make(chan struct{}),
		nextID:       1100000000000000000,
		channels:     map[string]*channel{},
		messages:     map[string]*discordgo.Message{},
		interactions: map[string]*interaction{},
		followups:    map[string]*discordgo.Message{},
		conns:        map[*gwConn]bool{},
		sessions:     map[string]bool{},
		members:      map[string]User{},
		dials:        map[string]int{},
	}
	s.channels[ChannelID] = &channel{id: ChannelID, name: "questions", typ: discordgo.ChannelTypeGuildText}
	mux := http.NewServeMux()
	mux.HandleFunc("/gateway/", s.serveGateway)
	mux.HandleFunc("/gateway", s.serveGateway)
	mux.HandleFunc("/resume-gateway", s.serveGateway)
	mux.HandleFunc("/resume-gateway/", s.serveGateway)
	mux.HandleFunc("/api/", s.serveAPI)
	s.http = httptest.NewServer(mux)
	s.URL = s.http.URL
	s.GatewayURL = "ws" + strings.TrimPrefix(s.http.URL, "http") + "/gateway"
	s.ResumeURL = "ws" + strings.TrimPrefix(s.http.URL, "http") + "/resume-gateway"
	t.Cleanup(s.Close)
	return s
}

// Token returns the bot token the fake accepts (without the "Bot " prefix).
func (s *Server) Token() string { return s.token }

// Close stops the fake and cuts every gateway connection.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := make([]*gwConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.Close()
	}
	s.http.Close()
}

// notify wakes everyone waiting for a change. Call with s.mu held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait blocks until cond (called with s.mu held) is true or ctx ends.
func (s *Server) wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		if cond() {
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) newID() string {
	s.nextID++
	return strconv.FormatInt(s.nextID, 10)
}

// AddChannel adds a text channel with the given ID to the fake's guild.
func (s *Server) AddChannel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.channels[id] == nil {
		s.channels[id] = &channel{id: id, name: "channel-" + id, typ: discordgo.ChannelTypeGuildText}
	}
}

// Threads returns the IDs of the threads started in channelID, oldest first.
func (s *Server) Threads(channelID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, c := range s.channels {
		if c.parentID == channelID {
			ids = append(ids, c.id)
		}
	}
	slices.SortFunc(ids, cmpID)
	return ids
}

// cmpID orders snowflakes: decimal numbers without leading zeros, so the
// shorter is the smaller.
func cmpID(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

// Messages returns copies of the messages of channelID, oldest first.
func (s *Server) Messages(channelID string) []*discordgo.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channelID]
	if c == nil {
		return nil
	}
	out := make([]*discordgo.Message, 0, len(c.messages))
	for _, m := range c.messages {
		out = append(out, copyMessage(m))
	}
	return out
}

// Message returns a copy of the message with the given ID.
func (s *Server) Message(id string) (*discordgo.Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok {
		return nil, false
	}
	return copyMessage(m), true
}

// WaitMessage waits until a message of channelID satisfies match and
// returns a copy of it.
func (s *Server) WaitMessage(ctx context.Context, channelID string, match func(*discordgo.Message) bool) (*discordgo.Message, error) {
	var found *discordgo.Message
	err := s.wait(ctx, func() bool {
		c := s.channels[channelID]
		if c == nil {
			return false
		}
		for _, m := range c.messages {
			if cp := copyMessage(m); match(cp) {
				found = cp
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("wait for message in channel %s: %w", channelID, err)
	}
	return found, nil
}

// Requests returns every REST request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// CountRequests counts the REST requests with the given method whose path
// starts with prefix.
func (s *Server) CountRequests(method, prefix string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// LimitRate makes upcoming requests matching rl fail with 429.
func (s *Server) LimitRate(rl RateLimit) {
	if rl.Count <= 0 {
		rl.Count = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, &rl)
}

// Identifies returns how many times a client identified (a fresh session).
func (s *Server) Identifies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identifies
}

// Resumes returns how many times a client resumed a session.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// WaitReady waits until at least n sessions have been started or resumed
// in total and one gateway connection is ready for dispatches.
func (s *Server) WaitReady(ctx context.Context, n int) error {
	err := s.wait(ctx, func() bool {
		if s.identifies+s.resumes < n {
			return false
		}
		for c := range s.conns {
			if c.ready {
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("wait for gateway session %d: %w", n, err)
	}
	return nil
}

// Drop cuts every gateway connection without a close frame, as a network
// failure would, and reports how many it cut. Dispatches made while no
// connection is ready are queued and sent after the client resumes.
func (s *Server) Drop() int {
	s.mu.Lock()
	conns := make([]*gwConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
		delete(s.conns, c)
	}
	s.notify()
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.NetConn().Close()
	}
	return len(conns)
}

// DropSession cuts every gateway connection and ends their sessions, as
// when Discord cannot resume: the client must identify again, and what is
// dispatched until it has (messages, clicks) is lost, as it would be.
func (s *Server) DropSession() int {
	s.mu.Lock()
	s.sessions = map[string]bool{}
	s.lose = true
	s.pending = nil
	s.mu.Unlock()
	return s.Drop()
}

// ClickButton clicks, as u, the button of message messageID whose label or
// custom ID is button, and returns the interaction's ID. It fails as a
// Discord client would refuse to: unknown message or button, disabled button.
func (s *Server) ClickButton(u User, messageID, button string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[messageID]
	if !ok {
		return "", fmt.Errorf("click %q: unknown message %s", button, messageID)
	}
	var found *discordgo.Button
	walkComponents(m.Components, func(c discordgo.MessageComponent) {
		if b, ok := c.(*discordgo.Button); ok && found == nil && (b.Label == button || b.CustomID == button) {
			found = b
		}
	})
	if found == nil {
		return "", fmt.Errorf("click %q: message %s has no such button", button, messageID)
	}
	if found.Disabled {
		return "", fmt.Errorf("click %q: button is disabled", button)
	}
	data := map[string]any{"custom_id": found.CustomID, "component_type": discordgo.ButtonComponent}
	return s.interactLocked(u, m, discordgo.InteractionMessageComponent, data)
}

// ClickFollowup clicks, as u, the button labelled (or custom ID) button of
// the follow-up message messageID (Followup.MessageID), and returns the
// interaction's ID. An ephemeral follow-up is clicked only by the user of
// the interaction it follows: nobody else sees it.
func (s *Server) ClickFollowup(u User, messageID, button string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.followups[messageID]
	if !ok {
		return "", fmt.Errorf("click %q: unknown follow-up message %s", button, messageID)
	}
	if m.Flags&discordgo.MessageFlagsEphemeral != 0 && m.Interaction != nil && m.Interaction.User != nil && m.Interaction.User.ID != u.ID {
		return "", fmt.Errorf("click %q: %s cannot see the ephemeral message %s", button, u.Name, messageID)
	}
	var found *discordgo.Button
	walkComponents(m.Components, func(c discordgo.MessageComponent) {
		if b, ok := c.(*discordgo.Button); ok && found == nil && (b.Label == button || b.CustomID == button) {
			found = b
		}
	})
	if found == nil {
		return "", fmt.Errorf("click %q: follow-up %s has no such button", button, messageID)
	}
	if found.Disabled {
		return "", fmt.Errorf("click %q: button is disabled", button)
	}
	data := map[string]any{"custom_id": found.CustomID, "component_type": discordgo.ButtonComponent}
	return s.interactLocked(u, m, discordgo.InteractionMessageComponent, data)
}

// WaitFollowup waits for a follow-up message to interaction id and returns
// the first.
func (s *Server) WaitFollowup(ctx context.Context, id string) (Followup, error) {
	var f Followup
	err := s.wait(ctx, func() bool {
		in := s.interactions[id]
		if in == nil || len(in.followups) == 0 {
			return false
		}
		f = in.followups[0]
		return true
	})
	if err != nil {
		return Followup{}, fmt.Errorf("wait for a follow-up to interaction %s: %w", id, err)
	}
	return f, nil
}

// Select picks, as u, the given options (by label or value) in the first
// select menu of message messageID and returns the interaction's ID.
func (s *Server) Select(u User, messageID string, options ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[messageID]
	if !ok {
		return "", fmt.Errorf("select: unknown message %s", messageID)
	}
	var menu *discordgo.SelectMenu
	walkComponents(m.Components, func(c discordgo.MessageComponent) {
		if sm, ok := c.(*discordgo.SelectMenu); ok && menu == nil {
			menu = sm
		}
	})
	if menu == nil {
		return "", fmt.Errorf("select: message %s has no select menu", messageID)
	}
	if menu.Disabled {
		return "", errors.New("select: menu is disabled")
	}
	values := make([]string, 0, len(options))
	for _, o := range options {
		i := slices.IndexFunc(menu.Options, func(so discordgo.SelectMenuOption) bool { return so.Label == o || so.Value == o })
		if i < 0 {
			return "", fmt.Errorf("select: menu has no option %q", o)
		}
		values = append(values, menu.Options[i].Value)
	}
	minValues := 1
	if menu.MinValues != nil {
		minValues = *menu.MinValues
	}
	maxValues := max(menu.MaxValues, 1)
	if len(values) < minValues || len(values) > maxValues {
		return "", fmt.Errorf("select: %d options chosen, menu takes %d to %d", len(values), minValues, maxValues)
	}
	data := map[string]any{"custom_id": menu.CustomID, "component_type": discordgo.SelectMenuComponent, "values": values}
	return s.interactLocked(u, m, discordgo.InteractionMessageComponent, data)
}

// SubmitModal fills and submits, as u, the modal the bot opened in answer to
// interaction openedBy: values go to its text inputs in order. It returns the
// new interaction's ID.
func (s *Server) SubmitModal(u User, openedBy string, values ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.interactions[openedBy]
	if !ok || in.response == nil {
		return "", fmt.Errorf("submit modal: interaction %s has no response yet", openedBy)
	}
	if in.response.Type != discordgo.InteractionResponseModal || in.response.Data == nil {
		return "", fmt.Errorf("submit modal: interaction %s was answered with type %d, not a modal", openedBy, in.response.Type)
	}
	var rows []map[string]any
	i := 0
	var missing error
	walkComponents(in.response.Data.Components, func(c discordgo.MessageComponent) {
		ti, ok := c.(*discordgo.TextInput)
		if !ok {
			return
		}
		v := ""
		if i < len(values) {
			v = values[i]
		}
		if ti.Required && v == "" {
			missing = fmt.Errorf("submit modal: text input %q is required", ti.CustomID)
		}
		i++
		rows = append(rows, map[string]any{
			"type":       discordgo.ActionsRowComponent,
			"components": []map[string]any{{"type": discordgo.TextInputComponent, "custom_id": ti.CustomID, "value": v}},
		})
	})
	if missing != nil {
		return "", missing
	}
	m := s.messages[in.messageID]
	data := map[string]any{"custom_id": in.response.Data.CustomID, "components": rows}
	return s.interactLocked(u, m, discordgo.InteractionModalSubmit, data)
}

// Reply posts, as u, a message replying to message messageID, and
// dispatches MESSAGE_CREATE. It returns the new message's ID.
func (s *Server) Reply(u User, messageID, content string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref, ok := s.messages[messageID]
	if !ok {
		return "", fmt.Errorf("reply: unknown message %s", messageID)
	}
	s.members[u.ID] = u
	m := &discordgo.Message{
		ChannelID: ref.ChannelID,
		GuildID:   GuildID,
		Content:   content,
		Author:    &discordgo.User{ID: u.ID, Username: u.Name},
		Member:    &discordgo.Member{Roles: slices.Clone(u.Roles)},
		MessageReference: &discordgo.MessageReference{
			MessageID: messageID, ChannelID: ref.ChannelID, GuildID: GuildID,
		},
		Type: discordgo.MessageTypeReply,
	}
	if err := s.addMessageLocked(m); err != nil {
		return "", err
	}
	return m.ID, nil
}

// Responses returns the responses to every interaction so far.
func (s *Server) Responses() []Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Response
	for _, in := range s.interactions {
		if in.response != nil {
			out = append(out, *in.response)
		}
	}
	slices.SortFunc(out, func(a, b Response) int { return cmpID(a.InteractionID, b.InteractionID) })
	return out
}

// WaitResponse waits for the bot's response to interaction id.
func (s *Server) WaitResponse(ctx context.Context, id string) (Response, error) {
	var r Response
	err := s.wait(ctx, func() bool {
		in := s.interactions[id]
		if in == nil || in.response == nil {
			return false
		}
		r = *in.response
		return true
	})
	if err != nil {
		return Response{}, fmt.Errorf("wait for response to interaction %s: %w", id, err)
	}
	return r, nil
}

// Followups returns the follow-up messages sent for interaction id.
func (s *Server) Followups(id string) []Followup {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.interactions[id]; in != nil {
		return slices.Clone(in.followups)
	}
	return nil
}

// AckLatencies returns, for every interaction answered so far, the time
// from its dispatch to the bot's response.
func (s *Server) AckLatencies() []time.Duration {
	var out []time.Duration
	for _, r := range s.Responses() {
		out = append(out, r.Latency)
	}
	return out
}

// AddMember makes u a member of the fake's guild (the users of ClickButton,
// Select, SubmitModal and Reply become members too).
func (s *Server) AddMember(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[u.ID] = u
}

func (s *Server) interactLocked(u User, m *discordgo.Message, typ discordgo.InteractionType, data map[string]any) (string, error) {
	s.members[u.ID] = u
	if m == nil {
		return "", errors.New("the message is gone")
	}
	in := &interaction{id: s.newID(), user: u, messageID: m.ID}
	in.token = "itok" + in.id
	payload := map[string]any{
		"id":             in.id,
		"application_id": AppID,
		"type":           typ,
		"token":          in.token,
		"version":        1,
		"guild_id":       GuildID,
		"channel_id":     m.ChannelID,
		"member": map[string]any{
			"user":  map[string]any{"id": u.ID, "username": u.Name},
			"roles": nonNil(u.Roles),
		},
		"message": wire{m},
		"data":    data,
		"locale":  "en-US",
	}
	s.interactions[in.id] = in
	in.dispatched = s.now()
	if err := s.dispatchLocked("INTERACTION_CREATE", payload); err != nil {
		return "", err
	}
	return in.id, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// addMessageLocked stores m in its channel and dispatches MESSAGE_CREATE.
func (s *Server) addMessageLocked(m *discordgo.Message) error {
	c := s.channels[m.ChannelID]
	if c == nil {
		return fmt.Errorf("unknown channel %s", m.ChannelID)
	}
	m.ID = s.newID()
	m.Timestamp = time.Now().UTC()
	if m.Components == nil {
		m.Components = []discordgo.MessageComponent{}
	}
	if m.Embeds == nil {
		m.Embeds = []*discordgo.MessageEmbed{}
	}
	c.messages = append(c.messages, m)
	s.messages[m.ID] = m
	s.notify()
	return s.dispatchLocked("MESSAGE_CREATE", wire{m})
}

func walkComponents(cs []discordgo.MessageComponent, f func(discordgo.MessageComponent)) {
	for _, c := range cs {
		f(c)
		if row, ok := c.(*discordgo.ActionsRow); ok {
			walkComponents(row.Components, f)
		}
	}
}

// copyMessage deep-copies m through its JSON form, as a client would see it.
func copyMessage(m *discordgo.Message) *discordgo.Message {
	b, err := json.Marshal(wire{m})
	if err != nil {
		panic(fmt.Sprintf("discordtest: marshal message: %v", err))
	}
	var out discordgo.Message
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("discordtest: unmarshal message: %v", err))
	}
	return &out
}

// wire is a message as Discord sends it: discordgo.Message leaves its
// components out when marshalled.
type wire struct{ *discordgo.Message }

func (w wire) MarshalJSON() ([]byte, error) {
	cs := w.Components
	if cs == nil {
		cs = []discordgo.MessageComponent{}
	}
	return json.Marshal(struct {
		*discordgo.Message
		Components []discordgo.MessageComponent `json:"components"`
	}{w.Message, cs})
}
