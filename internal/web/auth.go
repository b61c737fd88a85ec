package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Who signed in and how.
const (
	viaToken   = "token"   // Authorization: Bearer
	viaSession = "session" // the cookie the sign-in form set
	viaProxy   = "proxy"   // a trusted proxy's X-Forwarded-User/-Email
)

// SessionCookie is the name of the session cookie.
const SessionCookie = "orchestrator_session"

// TokenPrefix starts every token `orchestrator web token` prints.
const TokenPrefix = "orw_"

type identity struct {
	Name string
	Via  string
	csrf string
}

type session struct {
	user    string
	csrf    string
	expires time.Time
}

type ctxKey struct{}

func who(r *http.Request) identity {
	id, _ := r.Context().Value(ctxKey{}).(identity)
	return id
}

// NewToken returns a new random token and the hex SHA-256 to configure.
func NewToken() (token, sha string) {
	b := make([]byte, 32)
	rand.Read(b)
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken is the hex SHA-256 of a token, as serve.web.users keeps it.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

func parseUsers(users []User) (map[[32]byte]string, error) {
	m := make(map[[32]byte]string, len(users))
	for i, u := range users {
		b, err := hex.DecodeString(strings.TrimSpace(u.TokenSHA256))
		if err != nil || len(b) != 32 || strings.TrimSpace(u.Name) == "" {
			return nil, fmt.Errorf("web: users[%d]: want a name and the 64 hex digits of a token's SHA-256", i)
		}
		m[[32]byte(b)] = strings.TrimSpace(u.Name)
	}
	return m, nil
}

// userOf finds the user a token belongs to. Tokens are compared by their
// SHA-256 (a map lookup on a hash leaks nothing useful about the token).
func (s *Server) userOf(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	name, ok := s.users[sha256.Sum256([]byte(token))]
	return name, ok
}

// maxNameBytes bounds the name a proxy gives.
const maxNameBytes = 100

// errNotAllowed: a trusted proxy vouches for someone serve.web.allow does
// not list.
var errNotAllowed = errors.New("not allowed here (serve.web.allow)")

// authenticate finds who sent r. A bad bearer token is an error (never a
// fall back to another way in); no credentials at all is ok == false.
func (s *Server) authenticate(r *http.Request) (id identity, ok bool, err error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return identity{}, false, errors.New("unsupported Authorization scheme (want Bearer)")
		}
		name, ok := s.userOf(strings.TrimSpace(token))
		if !ok {
			return identity{}, false, errors.New("unknown token")
		}
		return identity{Name: name, Via: viaToken, csrf: s.sign(viaToken + ":" + name)}, true, nil
	}
	if s.fromTrustedProxy(r) {
		user := strings.TrimSpace(r.Header.Get("X-Forwarded-User"))
		email := strings.TrimSpace(r.Header.Get("X-Forwarded-Email"))
		if user != "" || email != "" {
			if !s.allowed(user, email) {
				return identity{}, false, errNotAllowed
			}
			name := user
			if name == "" {
				name = email
			}
			// The name is shown on every surface as the answerer's.
			name = strings.Join(strings.Fields(questions.Printable(name)), " ")
			if len(name) > maxNameBytes {
				name = strings.ToValidUTF8(name[:maxNameBytes], "")
			}
			return identity{Name: name, Via: viaProxy, csrf: s.sign(viaProxy + ":" + name)}, true, nil
		}
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.mu.Lock()
		ss, ok := s.sessions[c.Value]
		if ok && s.cfg.Now().After(ss.expires) {
			delete(s.sessions, c.Value)
			ok = false
		}
		s.mu.Unlock()
		if ok {
			return identity{Name: ss.user, Via: viaSession, csrf: ss.csrf}, true, nil
		}
	}
	return identity{}, false, nil
}

func (s *Server) fromTrustedProxy(r *http.Request) bool {
	if len(s.cfg.TrustedProxies) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return slices.ContainsFunc(s.cfg.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

func (s *Server) allowed(user, email string) bool {
	for _, a := range s.cfg.Allow {
		a = strings.TrimSpace(a)
		if a == "*" || (user != "" && strings.EqualFold(a, user)) || (email != "" && strings.EqualFold(a, email)) {
			return true
		}
	}
	return false
}

func (s *Server) sign(msg string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// authed serves h only to someone signed in. A page asked for without
// credentials redirects to the sign-in form; the API and every POST get 401
// and nothing else. A POST also needs the CSRF token: in the form's "csrf"
// field, or the X-CSRF-Token header; requests with a bearer token are
// exempt on the API (a browser never adds that header by itself, and the
// cross-origin protection in front refuses cross-site requests anyway).
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok, err := s.authenticate(r)
		if err != nil || !ok {
			if err == nil && r.Method == http.MethodGet && !isAPI(r) {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="orchestrator"`)
			msg := "sign in first: a bearer token or the sign-in form"
			status := http.StatusUnauthorized
			if err != nil {
				msg = err.Error()
				if errors.Is(err, errNotAllowed) {
					status = http.StatusForbidden
				}
			}
			s.fail(w, r, status, msg)
			return
		}
		if r.Method == http.MethodPost && !(id.Via == viaToken && isAPI(r)) {
			got := r.Header.Get("X-CSRF-Token")
			if got == "" {
				r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
				got = r.PostFormValue("csrf")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(id.csrf)) != 1 {
				s.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, id)))
	}
}

// maxFormBytes bounds a form or JSON body.
const maxFormBytes = 1 << 20

func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func (s *Server) signinPage(w http.ResponseWriter, r *http.Request) {
	if _, ok, _ := s.authenticate(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "signin", pageData{Title: "Sign in", Next: safeNext(r.URL.Query().Get("next"))})
}

func (s *Server) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	next := safeNext(r.PostFormValue("next"))
	name, ok := s.userOf(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		s.log.Warn("web sign-in refused", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusUnauthorized, "signin", pageData{Title: "Sign in", Next: next, Error: "That token is not valid."})
		return
	}
	b := make([]byte, 32)
	rand.Read(b)
	sid := base64.RawURLEncoding.EncodeToString(b)
	rand.Read(b)
	ss := session{user: name, csrf: base64.RawURLEncoding.EncodeToString(b), expires: s.cfg.Now().Add(s.cfg.SessionTTL)}
	s.mu.Lock()
	now := s.cfg.Now()
	for k, v := range s.sessions {
		if now.After(v.expires) {
			delete(s.sessions, k)
		}
	}
	s.sessions[sid] = ss
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sid, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.secure(r), MaxAge: int(s.cfg.SessionTTL / time.Second)})
	s.log.Info("web sign-in", "user", name)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) signout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.secure(r), MaxAge: -1})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// secure reports whether the browser reached us over TLS: directly, or
// through a trusted proxy that says so.
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || (s.fromTrustedProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}
