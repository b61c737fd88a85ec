package discordtest

import (
	"encoding/json"
	"net/http"
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

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.conns[c] = true
	s.mu.Unlock()
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
				Token string `json:"token"`
			}
			json.Unmarshal(p.D, &id)
			if id.Token != "Bot "+s.token {
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."), time.Now().Add(time.Second))
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
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."), time.Now().Add(time.Second))
				return
			}
			s.mu.Lock()
			known := s.sessions[res.SessionID]
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
			"resume_gateway_url": s.GatewayURL,
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
