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
	"unicode"
	"unicode/utf8"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Who signed in and how.
const (
	viaToken   = "token"   // Authorization: Bearer
	viaSession = "session" // the cookie the sign-in form set
	viaProxy   = "proxy"   // a trusted proxy's ProxyHeader
)

// Defaults of Config.ProxyHeader and Config.ProxySecretHeader.
const (
	DefaultProxyHeader       = "X-Forwarded-Email"
	DefaultProxySecretHeader = "X-Orchestrator-Proxy-Secret"
)

// SessionCookie is the name of the session cookie.
const SessionCookie = "orchestrator_session"

// TokenPrefix starts every token `orchestrator web token` prints.
const TokenPrefix = "orw_"

type identity struct {
	Name string
	Via  string
	Role Role // what they may do beyond answering (start.go)
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
		return identity{Name: name, Via: viaToken, Role: s.roles[name], csrf: s.sign(viaToken + ":" + name)}, true, nil
	}
	if s.fromTrustedProxy(r) {
		// One header says who it is: the one that was allowed is the one
		// recorded as the answerer.
		vals := r.Header.Values(s.cfg.ProxyHeader)
		if len(vals) > 1 {
			return identity{}, false, fmt.Errorf("the proxy sent %s %d times", s.cfg.ProxyHeader, len(vals))
		}
		if len(vals) == 1 && strings.TrimSpace(vals[0]) != "" {
			// The name is shown on every surface as the answerer's.
			name := strings.Join(strings.Fields(questions.Printable(vals[0])), " ")
			if len(name) > maxNameBytes || name == "" || !s.allowed(name) {
				return identity{}, false, errNotAllowed
			}
			return identity{Name: name, Via: viaProxy, Role: s.cfg.ProxyRole, csrf: s.sign(viaProxy + ":" + name)}, true, nil
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
			return identity{Name: ss.user, Via: viaSession, Role: s.roles[ss.user], csrf: ss.csrf}, true, nil
		}
	}
	return identity{}, false, nil
}

// fromTrustedProxy reports whether r comes from a trusted proxy: from one
// of its addresses and, when a proxy secret is configured, with it.
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	if len(s.cfg.TrustedProxies) == 0 {
		return false
	}
	if s.cfg.ProxySecret != "" {
		got := r.Header.Values(s.cfg.ProxySecretHeader)
		if len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), []byte(s.cfg.ProxySecret)) != 1 {
			return false
		}
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

// allowed reports whether serve.web.allow lets name (the proxy header's
// value) in.
func (s *Server) allowed(name string) bool {
	for _, a := range s.cfg.Allow {
		a = strings.TrimSpace(a)
		if a == "*" || strings.EqualFold(a, name) {
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

// safeNext returns next if it is a path on this site, else "/": it must
// start with one "/" (not "//" or "/\\", which browsers read as another
// host), hold no control character, space or backslash anywhere (browsers
// drop tabs and newlines from a URL, so "/\t/evil.example" is
// "//evil.example" to them) and parse as a path without a scheme or host.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || !utf8.ValidString(next) {
		return "/"
	}
	for _, r := range next {
		if r <= ' ' || r == 0x7f || r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
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
