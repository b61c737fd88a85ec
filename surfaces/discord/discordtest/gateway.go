package discordtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// heartbeatInterval is what the fake's Hello asks for, in milliseconds.
const heartbeatInterval = 41250

type gwConn struct {
	ws      *websocket.Conn
	wmu     sync.Mutex
	ready   bool   // guarded by Server.mu
	session string // guarded by Server.mu
}

func (c *gwConn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

type gwPayload struct {
	Op   int             `json:"op"`
	D    json.RawMessage `json:"d"`
	S    *int64          `json:"s,omitempty"`
	Type string          `json:"t,omitempty"`
}

// closeCode is a gateway close frame's code and reason.
type closeCode struct {
	code int
	text string
}

// Intents Discord treats as privileged (DisallowIntents).
const (
	IntentGuildMembers   = 1 << 1
	IntentGuildPresences = 1 << 8
	IntentMessageContent = 1 << 15
)

// DisallowIntents makes every identify asking for one of intents (a bit
// mask: IntentMessageContent…) closed with 4014 "Disallowed intent(s).",
// as Discord does for a privileged intent not enabled in the developer
// portal.
func (s *Server) DisallowIntents(intents int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disallowed = intents
}

// CloseGateway closes every gateway connection with a close frame of the
// given code and reason (4004, 4014, 4000…) and reports how many it
// closed.
func (s *Server) CloseGateway(code int, text string) int {
	s.mu.Lock()
	conns := make([]*gwConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(code, text)
	}
	return len(conns)
}

// RefuseGateway makes every later identify or resume closed with the given
// code and reason, as after a token reset (4004).
func (s *Server) RefuseGateway(code int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeNext = &closeCode{code, text}
}

// Dials returns how many gateway connections were opened on path
// ("/gateway", "/resume-gateway"; "" for all).
func (s *Server) Dials(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if path != "" {
		return s.dials[path]
	}
	n := 0
	for _, v := range s.dials {
		n += v
	}
	return n
}

// close sends a close frame and closes the connection.
func (c *gwConn) close(code int, text string) {
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	c.wmu.Unlock()
	c.ws.Close()
}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	path := strings.TrimSuffix(r.URL.Path, "/")
	onResumeURL := path == "/resume-gateway"
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.conns[c] = true
	s.dials[path]++
	s.notify()
	s.mu.Unlock()
	// refuse closes c with the close Discord would send, if any is due.
	refuse := func(intents int) bool {
		s.mu.Lock()
		cc := s.closeNext
		if cc == nil && intents&s.disallowed != 0 {
			cc = &closeCode{4014, "Disallowed intent(s)."}
		}
		s.mu.Unlock()
		if cc == nil {
			return false
		}
		c.close(cc.code, cc.text)
		return true
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.notify()
		s.mu.Unlock()
		ws.Close()
	}()

	if err := c.write(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": heartbeatInterval}}); err != nil {
		return
	}
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var p gwPayload
		if err := json.Unmarshal(msg, &p); err != nil {
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4002, "decode error"), time.Now().Add(time.Second))
			return
		}
		switch p.Op {
		case 1: // heartbeat
			if err := c.write(map[string]any{"op": 11}); err != nil {
				return
			}
		case 2: // identify
			var id struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			json.Unmarshal(p.D, &id)
			if id.Token != "Bot "+s.token {
				c.close(4004, "Authentication failed.")
				return
			}
			if refuse(id.Intents) {
				return
			}
			if !s.ready(c, "", "READY") {
				return
			}
		case 6: // resume
			var res struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
			}
			json.Unmarshal(p.D, &res)
			if res.Token != "Bot "+s.token {
				c.close(4004, "Authentication failed.")
				return
			}
			if refuse(0) {
				return
			}
			s.mu.Lock()
			known := s.sessions[res.SessionID]
			if known && !onResumeURL {
				// Discord: resume on the READY's resume_gateway_url. A
				// RESUME elsewhere ends the session, and what was
				// dispatched meanwhile is lost.
				delete(s.sessions, res.SessionID)
				s.pending = nil
				s.lose = true
				known = false
			}
			s.mu.Unlock()
			if !known {
				// Invalid session, not resumable: the client identifies again.
				if c.write(map[string]any{"op": 9, "d": false}) != nil {
					return
				}
				continue
			}
			if !s.ready(c, res.SessionID, "RESUMED") {
				return
			}
		}
	}
}

// ready starts (session == "") or resumes a session on c, sends READY or
// RESUMED, then the dispatches queued while no session was ready.
func (s *Server) ready(c *gwConn, session, event string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d any
	if session == "" {
		s.identifies++
		s.lose = false
		session = "session" + s.newID()
		s.sessions[session] = true
		d = map[string]any{
			"v":                  9,
			"session_id":         session,
			"resume_gateway_url": s.ResumeURL,
			"user":               map[string]any{"id": BotUserID, "username": BotName, "bot": true},
			"application":        map[string]any{"id": AppID},
			"guilds":             []any{map[string]any{"id": GuildID, "unavailable": true}},
			"private_channels":   []any{},
		}
	} else {
		s.resumes++
		d = map[string]any{}
	}
	s.seq++
	if err := c.write(map[string]any{"op": 0, "t": event, "s": s.seq, "d": d}); err != nil {
		return false
	}
	c.session = session
	c.ready = true
	for _, p := range s.pending {
		if err := c.writeRaw(p); err != nil {
			return false
		}
	}
	s.pending = nil
	s.notify()
	return true
}

func (c *gwConn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// dispatchLocked sends an event to every ready connection, or queues it
// when there is none. Call with s.mu held.
func (s *Server) dispatchLocked(event string, data any) error {
	d, err := json.Marshal(data)
	if err != nil {
		return err
	}
	s.seq++
	b, err := json.Marshal(gwPayload{Op: 0, D: d, S: &s.seq, Type: event})
	if err != nil {
		return err
	}
	sent := false
	for c := range s.conns {
		if !c.ready {
			continue
		}
		if err := c.writeRaw(b); err != nil {
			c.ws.NetConn().Close()
			continue
		}
		sent = true
	}
	if !sent && !s.lose {
		s.pending = append(s.pending, b)
	}
	return nil
}
