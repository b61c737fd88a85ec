package discordtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
)

type apiError struct {
	status  int
	code    int
	message string
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	// "/api/v9/channels/1/messages" → "/channels/1/messages"
	path := strings.TrimPrefix(r.URL.Path, "/api")
	if strings.HasPrefix(path, "/v") {
		if i := strings.IndexByte(path[1:], '/'); i >= 0 {
			path = path[1+i:]
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, apiError{http.StatusBadRequest, 50109, "could not read body"})
		return
	}
	if held := s.held(r.Method, path); held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: path, At: time.Now()})
	s.notify()

	if rl := s.takeLimitLocked(r.Method, path); rl != nil {
		secs := rl.RetryAfter.Seconds()
		w.Header().Set("Retry-After", strconv.FormatFloat(secs, 'f', 3, 64))
		w.Header().Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
		if rl.Global {
			w.Header().Set("X-RateLimit-Global", "true")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]any{"message": "You are being rate limited.", "retry_after": secs, "global": rl.Global})
		return
	}

	seg := strings.Split(strings.Trim(path, "/"), "/")
	// Interaction callbacks and webhooks authenticate with the interaction
	// token in the path; everything else needs the bot token.
	if seg[0] != "interactions" && seg[0] != "webhooks" && r.Header.Get("Authorization") != "Bot "+s.token {
		writeError(w, apiError{http.StatusUnauthorized, 0, "401: Unauthorized"})
		return
	}

	var out any
	var aerr *apiError
	switch {
	case r.Method == http.MethodGet && (path == "/gateway" || path == "/gateway/bot"):
		out = map[string]any{"url": s.GatewayURL, "shards": 1, "session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}
	case r.Method == http.MethodGet && path == "/users/@me":
		out = map[string]any{"id": BotUserID, "username": BotName, "bot": true}
	case len(seg) == 2 && seg[0] == "channels" && r.Method == http.MethodGet:
		out, aerr = s.getChannelLocked(seg[1])
	case len(seg) == 2 && seg[0] == "channels" && r.Method == http.MethodPatch:
		out, aerr = s.editChannelLocked(seg[1], body)
	case len(seg) == 3 && seg[0] == "guilds" && seg[2] == "roles" && r.Method == http.MethodGet:
		out, aerr = s.rolesLocked(seg[1]) // guild.go
	case len(seg) == 4 && seg[0] == "guilds" && seg[2] == "members" && r.Method == http.MethodGet:
		out, aerr = s.getMemberLocked(seg[1], seg[3])
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodPost:
		out, aerr = s.createMessageLocked(seg[1], body)
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodGet:
		out, aerr = s.listMessagesLocked(seg[1], r)
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodGet:
		out, aerr = s.getMessageLocked(seg[1], seg[3])
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodPatch:
		out, aerr = s.editMessageLocked(seg[1], seg[3], body)
	case len(seg) == 7 && seg[0] == "channels" && seg[4] == "reactions" && r.Method == http.MethodPut:
		aerr = s.reactLocked(seg[1], seg[3], seg[5])
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "threads" && r.Method == http.MethodPost:
		out, aerr = s.startThreadLocked(seg[1], body)
	case len(seg) == 4 && seg[0] == "interactions" && seg[3] == "callback" && r.Method == http.MethodPost:
		aerr = s.callbackLocked(seg[1], seg[2], body)
	case len(seg) == 3 && seg[0] == "webhooks" && r.Method == http.MethodPost:
		out, aerr = s.followupLocked(seg[2], body)
	case len(seg) == 5 && seg[0] == "webhooks" && seg[3] == "messages" && r.Method == http.MethodPatch:
		out, aerr = s.editOriginalLocked(seg[2], seg[4], body)
	default:
		aerr = &apiError{http.StatusNotFound, 0, "404: Not Found"}
	}
	if held := s.heldLocked(r.Method, path, true); held != nil {
		// Served; the response waits (HoldResponse).
		s.mu.Unlock()
		select {
		case <-held:
		case <-r.Context().Done():
		}
		s.mu.Lock()
	}
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func writeError(w http.ResponseWriter, e apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]any{"code": e.code, "message": e.message})
}

func (s *Server) takeLimitLocked(method, path string) *RateLimit {
	for i, rl := range s.limits {
		if (rl.Method == "" || rl.Method == method) && strings.HasPrefix(path, rl.PathPrefix) {
			rl.Count--
			if rl.Count <= 0 {
				s.limits = slices.Delete(s.limits, i, i+1)
			}
			return rl
		}
	}
	return nil
}

func badBody(err error) *apiError {
	return &apiError{http.StatusBadRequest, 50035, "Invalid Form Body: " + err.Error()}
}

var (
	unknownChannel = &apiError{http.StatusNotFound, 10003, "Unknown Channel"}
	unknownMessage = &apiError{http.StatusNotFound, 10008, "Unknown Message"}
	// archivedThread: Discord refuses edits and reactions in an archived
	// thread (a new message unarchives it).
	archivedThread = &apiError{http.StatusBadRequest, 50083, "Thread is archived"}
)

func (s *Server) createMessageLocked(channelID string, body []byte) (any, *apiError) {
	c := s.channels[channelID]
	if c == nil {
		return nil, unknownChannel
	}
	if c.archived && c.locked {
		return nil, archivedThread
	}
	c.archived = false // a message unarchives its thread
	var m discordgo.Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, badBody(err)
	}
	if err := checkMessage(&m); err != nil {
		return nil, badBody(err)
	}
	m.ChannelID = channelID
	m.GuildID = GuildID
	m.Author = &discordgo.User{ID: BotUserID, Username: BotName, Bot: true}
	m.Type = discordgo.MessageTypeDefault
	if m.MessageReference != nil {
		if _, ok := s.messages[m.MessageReference.MessageID]; !ok {
			return nil, badBody(fmt.Errorf("message_reference: unknown message %s", m.MessageReference.MessageID))
		}
		m.Type = discordgo.MessageTypeReply
	}
	if err := s.addMessageLocked(&m); err != nil {
		return nil, badBody(err)
	}
	return wire{&m}, nil
}

// checkMessage enforces the Discord limits the surface must respect.
func checkMessage(m *discordgo.Message) error {
	if len([]rune(m.Content)) > 2000 {
		return fmt.Errorf("content: %d characters, at most 2000", len([]rune(m.Content)))
	}
	if len(m.Embeds) > 10 {
		return fmt.Errorf("embeds: %d, at most 10", len(m.Embeds))
	}
	for _, e := range m.Embeds {
		if len([]rune(e.Title)) > 256 {
			return fmt.Errorf("embed title: over 256 characters")
		}
		if len([]rune(e.Description)) > 4096 {
			return fmt.Errorf("embed description: over 4096 characters")
		}
		if len(e.Fields) > 25 {
			return fmt.Errorf("embed fields: over 25")
		}
		for _, f := range e.Fields {
			if len([]rune(f.Name)) > 256 || len([]rune(f.Value)) > 1024 || f.Name == "" || f.Value == "" {
				return fmt.Errorf("embed field %q: name must be 1-256 and value 1-1024 characters", f.Name)
			}
		}
	}
	return checkComponents(m.Components, true)
}

func checkComponents(cs []discordgo.MessageComponent, message bool) error {
	if len(cs) > 5 {
		return fmt.Errorf("components: %d rows, at most 5", len(cs))
	}
	ids := map[string]bool{}
	for _, c := range cs {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok {
			return fmt.Errorf("components: top level must be action rows")
		}
		if len(row.Components) == 0 || len(row.Components) > 5 {
			return fmt.Errorf("action row: %d components, 1 to 5", len(row.Components))
		}
		for _, c := range row.Components {
			var id string
			switch c := c.(type) {
			case *discordgo.Button:
				id = c.CustomID
				if len([]rune(c.Label)) > 80 {
					return fmt.Errorf("button label %q: over 80 characters", c.Label)
				}
			case *discordgo.SelectMenu:
				id = c.CustomID
				if len(row.Components) != 1 {
					return fmt.Errorf("select menu must be alone in its row")
				}
				if len(c.Options) == 0 || len(c.Options) > 25 {
					return fmt.Errorf("select menu: %d options, 1 to 25", len(c.Options))
				}
				if c.MaxValues > len(c.Options) {
					return fmt.Errorf("select menu: max_values %d over %d options", c.MaxValues, len(c.Options))
				}
				for _, o := range c.Options {
					if len([]rune(o.Label)) > 100 || len([]rune(o.Value)) > 100 || len([]rune(o.Description)) > 100 {
						return fmt.Errorf("select option %q: label, value and description at most 100 characters", o.Label)
					}
				}
			case *discordgo.TextInput:
				if message {
					return fmt.Errorf("text inputs belong in modals")
				}
				id = c.CustomID
				if len([]rune(c.Label)) > 45 {
					return fmt.Errorf("text input label %q: over 45 characters", c.Label)
				}
			}
			if id == "" || len(id) > 100 {
				return fmt.Errorf("custom_id %q: 1 to 100 characters", id)
			}
			if ids[id] {
				return fmt.Errorf("custom_id %q: duplicate", id)
			}
			ids[id] = true
		}
	}
	return nil
}

func (s *Server) listMessagesLocked(channelID string, r *http.Request) (any, *apiError) {
	c := s.channels[channelID]
	if c == nil {
		return nil, unknownChannel
	}
	q := r.URL.Query()
	limit := 50
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 && l <= 100 {
		limit = l
	}
	after, before := q.Get("after"), q.Get("before")
	out := []wire{}
	if after != "" {
		// Oldest after the given ID first, then returned newest first,
		// as Discord does.
		for _, m := range c.messages {
			if cmpID(m.ID, after) > 0 && len(out) < limit {
				out = append(out, wire{m})
			}
		}
		slices.Reverse(out)
	} else {
		for i := len(c.messages) - 1; i >= 0 && len(out) < limit; i-- {
			if before == "" || cmpID(c.messages[i].ID, before) < 0 {
				out = append(out, wire{c.messages[i]})
			}
		}
	}
	return out, nil
}

func (s *Server) getChannelLocked(id string) (any, *apiError) {
	c := s.channels[id]
	if c == nil {
		return nil, unknownChannel
	}
	return c.wire(), nil
}

func (c *channel) wire() *discordgo.Channel {
	ch := &discordgo.Channel{ID: c.id, GuildID: GuildID, ParentID: c.parentID, Name: c.name, Type: c.typ}
	if isThread(c.typ) {
		ch.ThreadMetadata = &discordgo.ThreadMetadata{Archived: c.archived, Locked: c.locked, AutoArchiveDuration: 10080}
	}
	return ch
}

// editChannelLocked modifies a channel: of a thread, its archived and
// locked flags (what the surface changes); other fields are refused.
func (s *Server) editChannelLocked(id string, body []byte) (any, *apiError) {
	c := s.channels[id]
	if c == nil {
		return nil, unknownChannel
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, badBody(err)
	}
	for k, v := range f {
		var b bool
		switch {
		case (k == "archived" || k == "locked") && !isThread(c.typ):
			return nil, badBody(fmt.Errorf("%s: only a thread has it", k))
		case k == "archived" || k == "locked":
			if err := json.Unmarshal(v, &b); err != nil {
				return nil, badBody(fmt.Errorf("%s: %v", k, err))
			}
			if k == "archived" {
				c.archived = b
			} else {
				c.locked = b
			}
		default:
			return nil, badBody(fmt.Errorf("%s: the fake does not change it", k))
		}
	}
	s.notify()
	return c.wire(), nil
}

// ArchiveThread archives the thread id, as Discord does after its
// auto_archive_duration without activity (or a person does).
func (s *Server) ArchiveThread(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.channels[id]; c != nil && isThread(c.typ) {
		c.archived = true
		s.notify()
	}
}

// Archived reports whether the thread id is archived.
func (s *Server) Archived(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[id]
	return c != nil && c.archived
}

func (s *Server) getMemberLocked(guildID, userID string) (any, *apiError) {
	u, ok := s.members[userID]
	if userID == BotUserID && guildID == GuildID {
		u, ok = User{ID: BotUserID, Name: BotName}, true // the bot is in its guild
	}
	if guildID != GuildID || !ok {
		return nil, &apiError{http.StatusNotFound, 10007, "Unknown Member"}
	}
	return &discordgo.Member{GuildID: GuildID, User: &discordgo.User{ID: u.ID, Username: u.Name}, Roles: nonNil(u.Roles)}, nil
}

func (s *Server) getMessageLocked(channelID, id string) (any, *apiError) {
	m, ok := s.messages[id]
	if !ok || m.ChannelID != channelID {
		return nil, unknownMessage
	}
	return wire{m}, nil
}

// applyEdit applies the fields present in a PATCH body to m.
func applyEdit(m *discordgo.Message, body []byte) *apiError {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return badBody(err)
	}
	var tmp discordgo.Message
	if err := json.Unmarshal(body, &tmp); err != nil {
		return badBody(err)
	}
	if err := checkMessage(&tmp); err != nil {
		return badBody(err)
	}
	if _, ok := f["content"]; ok {
		m.Content = tmp.Content
	}
	if _, ok := f["embeds"]; ok {
		m.Embeds = tmp.Embeds
	}
	if _, ok := f["components"]; ok {
		m.Components = tmp.Components
	}
	t := time.Now().UTC()
	m.EditedTimestamp = &t
	return nil
}

func (s *Server) editMessageLocked(channelID, id string, body []byte) (any, *apiError) {
	m, ok := s.messages[id]
	if !ok || m.ChannelID != channelID {
		return nil, unknownMessage
	}
	if m.Author == nil || m.Author.ID != BotUserID {
		return nil, &apiError{http.StatusForbidden, 50005, "Cannot edit a message authored by another user"}
	}
	if c := s.channels[channelID]; c != nil && c.archived {
		return nil, archivedThread
	}
	if e := applyEdit(m, body); e != nil {
		return nil, e
	}
	s.notify()
	return wire{m}, nil
}

func (s *Server) reactLocked(channelID, id, emoji string) *apiError {
	m, ok := s.messages[id]
	if !ok || m.ChannelID != channelID {
		return unknownMessage
	}
	if c := s.channels[channelID]; c != nil && c.archived {
		return archivedThread
	}
	for _, r := range m.Reactions {
		if r.Emoji != nil && r.Emoji.Name == emoji {
			r.Me = true
			return nil
		}
	}
	m.Reactions = append(m.Reactions, &discordgo.MessageReactions{Count: 1, Me: true, Emoji: &discordgo.Emoji{Name: emoji}})
	s.notify()
	return nil
}

func (s *Server) startThreadLocked(parentID string, body []byte) (any, *apiError) {
	if p := s.channels[parentID]; p == nil || p.typ != discordgo.ChannelTypeGuildText {
		return nil, unknownChannel
	}
	var ts discordgo.ThreadStart
	if err := json.Unmarshal(body, &ts); err != nil {
		return nil, badBody(err)
	}
	if ts.Name == "" || len([]rune(ts.Name)) > 100 {
		return nil, badBody(fmt.Errorf("name: 1 to 100 characters"))
	}
	typ := ts.Type
	if typ == 0 {
		typ = discordgo.ChannelTypeGuildPrivateThread
	}
	c := &channel{id: s.newID(), parentID: parentID, name: ts.Name, typ: typ}
	s.channels[c.id] = c
	s.notify()
	return c.wire(), nil
}

func (s *Server) callbackLocked(id, token string, body []byte) *apiError {
	in, ok := s.interactions[id]
	if !ok || in.token != token {
		return &apiError{http.StatusNotFound, 10062, "Unknown interaction"}
	}
	if in.response != nil {
		return &apiError{http.StatusBadRequest, 40060, "Interaction has already been acknowledged."}
	}
	if s.now().Sub(in.dispatched) > InteractionDeadline {
		// Discord: "you must send an initial response within 3 seconds
		// of receiving the event. If the 3 second deadline is exceeded,
		// the token will be invalidated."
		return &apiError{http.StatusNotFound, 10062, "Unknown interaction"}
	}
	var raw struct {
		Type discordgo.InteractionResponseType `json:"type"`
		Data json.RawMessage                   `json:"data"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return badBody(err)
	}
	resp := &Response{InteractionID: id, Type: raw.Type, Latency: s.now().Sub(in.dispatched)}
	if len(raw.Data) > 0 && string(raw.Data) != "null" {
		d, err := decodeResponseData(raw.Data)
		if err != nil {
			return badBody(err)
		}
		resp.Data = d
		resp.Ephemeral = d.Flags&discordgo.MessageFlagsEphemeral != 0
	}
	switch raw.Type {
	case discordgo.InteractionResponseChannelMessageWithSource,
		discordgo.InteractionResponseDeferredChannelMessageWithSource,
		discordgo.InteractionResponseDeferredMessageUpdate:
	case discordgo.InteractionResponseUpdateMessage:
		if m := s.messages[in.messageID]; m != nil {
			if e := applyEdit(m, raw.Data); e != nil {
				return e
			}
		}
	case discordgo.InteractionResponseModal:
		if resp.Data == nil || resp.Data.CustomID == "" || resp.Data.Title == "" {
			return badBody(fmt.Errorf("modal needs a custom_id and a title"))
		}
		if err := checkComponents(resp.Data.Components, false); err != nil {
			return badBody(err)
		}
	default:
		return badBody(fmt.Errorf("interaction response type %d not valid for a component", raw.Type))
	}
	if resp.Type == discordgo.InteractionResponseChannelMessageWithSource && !resp.Ephemeral && resp.Data != nil {
		m := &discordgo.Message{ChannelID: s.channelOf(in), Content: resp.Data.Content,
			Author: &discordgo.User{ID: BotUserID, Username: BotName, Bot: true}}
		if err := s.addMessageLocked(m); err != nil {
			return badBody(err)
		}
	}
	in.response = resp
	s.notify()
	return nil
}

// interactionByToken returns the interaction whose token is token, while
// the token is valid (TokenLifetime after the interaction).
func (s *Server) interactionByToken(token string) *interaction {
	for _, in := range s.interactions {
		if in.token == token {
			if s.now().Sub(in.dispatched) > TokenLifetime {
				return nil
			}
			return in
		}
	}
	return nil
}

func (s *Server) followupLocked(token string, body []byte) (any, *apiError) {
	in := s.interactionByToken(token)
	if in == nil || in.response == nil {
		return nil, &apiError{http.StatusNotFound, 10015, "Unknown Webhook"}
	}
	// The same fields as a response's data (content, flags, components).
	p, err := decodeResponseData(body)
	if err != nil {
		return nil, badBody(err)
	}
	if p.Content == "" && len(p.Components) == 0 && len(p.Embeds) == 0 {
		return nil, &apiError{http.StatusBadRequest, 50006, "Cannot send an empty message"}
	}
	if err := checkComponents(p.Components, true); err != nil {
		return nil, badBody(err)
	}
	m := &discordgo.Message{ID: s.newID(), ChannelID: s.channelOf(in), Content: p.Content, Flags: p.Flags,
		Components: p.Components, Author: &discordgo.User{ID: BotUserID, Username: BotName, Bot: true},
		Interaction: &discordgo.MessageInteraction{ID: in.id, User: &discordgo.User{ID: in.user.ID, Username: in.user.Name}}}
	s.followups[m.ID] = m
	f := Followup{InteractionID: in.id, MessageID: m.ID, Content: p.Content, Ephemeral: p.Flags&discordgo.MessageFlagsEphemeral != 0, Components: p.Components}
	in.followups = append(in.followups, f)
	s.notify()
	return wire{m}, nil
}

// channelOf is the channel of the message interaction in was on.
func (s *Server) channelOf(in *interaction) string {
	if m := s.messages[in.messageID]; m != nil {
		return m.ChannelID
	}
	if m := s.followups[in.messageID]; m != nil {
		return m.ChannelID
	}
	return ""
}

func (s *Server) editOriginalLocked(token, which string, body []byte) (any, *apiError) {
	in := s.interactionByToken(token)
	if in == nil || in.response == nil || which != "@original" {
		return nil, &apiError{http.StatusNotFound, 10015, "Unknown Webhook"}
	}
	m := s.messages[in.messageID]
	if m == nil {
		return nil, unknownMessage
	}
	if e := applyEdit(m, body); e != nil {
		return nil, e
	}
	s.notify()
	return wire{m}, nil
}

// decodeResponseData decodes interaction response data, components
// included (discordgo.InteractionResponseData cannot decode them itself).
func decodeResponseData(b []byte) (*discordgo.InteractionResponseData, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	comps := f["components"]
	delete(f, "components")
	rest, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	var d discordgo.InteractionResponseData
	if err := json.Unmarshal(rest, &d); err != nil {
		return nil, err
	}
	if len(comps) > 0 {
		var m discordgo.Message
		if err := json.Unmarshal([]byte(`{"components":`+string(comps)+`}`), &m); err != nil {
			return nil, err
		}
		d.Components = m.Components
	}
	return &d, nil
}

func isThread(t discordgo.ChannelType) bool {
	switch t {
	case discordgo.ChannelTypeGuildNewsThread, discordgo.ChannelTypeGuildPublicThread, discordgo.ChannelTypeGuildPrivateThread:
		return true
	}
	return false
}
