package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
)

// Role says what a person may do on the web beyond answering questions
// and cancelling or resuming runs, which everyone let in may do.
type Role string

// The roles, each allowing what the one before does.
const (
	RoleAnswer Role = "answer" // answer questions, cancel and resume runs (the default)
	RoleRun    Role = "run"    // also start a run of a spec of specs.dir
	RolePrompt Role = "prompt" // also start a run of a prompt of their own
)

// Roles lists the roles, from the least to the most allowed.
var Roles = []Role{RoleAnswer, RoleRun, RolePrompt}

func (r Role) level() int {
	for i, x := range Roles {
		if r == x {
			return i
		}
	}
	return -1
}

// may reports whether someone of role r may do what role want allows.
func (r Role) may(want Role) bool { return r.level() >= want.level() }

// ParseRole reads a role; "" is RoleAnswer.
func ParseRole(s string) (Role, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return RoleAnswer, nil
	}
	if r := Role(s); r.level() >= 0 {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want answer, run or prompt)", s)
}

// setRoles reads the users' roles and the proxy's.
func (s *Server) setRoles() error {
	s.roles = map[string]Role{}
	for i, u := range s.cfg.Users {
		r, err := ParseRole(string(u.Role))
		if err != nil {
			return fmt.Errorf("web: users[%d].role: %w", i, err)
		}
		s.roles[strings.TrimSpace(u.Name)] = r
	}
	r, err := ParseRole(string(s.cfg.ProxyRole))
	if err != nil {
		return fmt.Errorf("web: proxy role: %w", err)
	}
	s.cfg.ProxyRole = r
	return nil
}

// StartRequest is a run to start on behalf of By: a spec of specs.dir by
// name, or a prompt.
type StartRequest struct {
	Spec   string
	Prompt string
	By     string
	// Key is the request's Idempotency-Key ("" for none): one run per
	// person and key. BodySHA256 tells a retry (the same request) from
	// another request that reuses the key.
	Key        string
	BodySHA256 string
}

// Started is what Start did: the run, and whether it was made before for
// the same key (a retry).
type Started struct {
	RunID    string
	Replayed bool
}

// ErrUnknownSpec is what Starter.Start returns (wrapped) for a spec that
// is not in specs.dir; ErrKeyReused for an Idempotency-Key used before
// with another request.
var (
	ErrUnknownSpec = errors.New("no such spec in specs.dir")
	ErrKeyReused   = errors.New("this Idempotency-Key was used for another request")
)

// Starter starts runs for the web. The serve wiring implements it: a run
// started so is an ordinary queued run that serve takes. Safe for
// concurrent use.
type Starter interface {
	// Specs lists the names of the specs a run may be started of.
	Specs(ctx context.Context) ([]string, error)
	// Start queues the run of req. With req.Key it makes one run per
	// person and key: a retry returns the first (Replayed), another
	// request with the key wraps ErrKeyReused. An unknown spec wraps
	// ErrUnknownSpec.
	Start(ctx context.Context, req StartRequest) (Started, error)
}

// maxIdempotencyKey bounds an Idempotency-Key, as Stripe does.
const maxIdempotencyKey = 255

// apiStartRequest is the body of POST /api/runs: a spec or a prompt.
type apiStartRequest struct {
	Spec   string `json:"spec,omitempty"`
	Prompt string `json:"prompt,omitempty"`
}

// start checks what who(r) asks and starts it. It returns the run, or the
// HTTP status and the message of the refusal.
func (s *Server) start(r *http.Request, req apiStartRequest, key string) (Started, int, string) {
	id := who(r)
	req.Spec = strings.TrimSpace(req.Spec)
	switch {
	case req.Spec != "" && strings.TrimSpace(req.Prompt) != "":
		return Started{}, http.StatusBadRequest, "give a spec or a prompt, not both"
	case req.Spec == "" && strings.TrimSpace(req.Prompt) == "":
		return Started{}, http.StatusBadRequest, "give a spec (its name in specs.dir) or a prompt"
	}
	want, what := RoleRun, "start a run of a spec"
	if req.Spec == "" {
		want, what = RolePrompt, "start a run of a prompt of their own"
	}
	if !id.Role.may(want) {
		return Started{}, http.StatusForbidden, fmt.Sprintf("%s may not %s: their role is %q and this needs %q (serve.web.users[].role, serve.web.proxy_role)", id.Name, what, id.Role, want)
	}
	if len(key) > maxIdempotencyKey || strings.ContainsFunc(key, func(c rune) bool { return !unicode.IsPrint(c) || c > unicode.MaxASCII }) {
		return Started{}, http.StatusBadRequest, fmt.Sprintf("Idempotency-Key: want at most %d printable ASCII characters", maxIdempotencyKey)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "spec=%q prompt=%q", req.Spec, req.Prompt))
	st, err := s.cfg.Start.Start(r.Context(), StartRequest{Spec: req.Spec, Prompt: req.Prompt, By: id.Name, Key: key, BodySHA256: hex.EncodeToString(sum[:])})
	switch {
	case errors.Is(err, ErrUnknownSpec):
		return Started{}, http.StatusUnprocessableEntity, fmt.Sprintf("spec %q: %v", p(req.Spec), ErrUnknownSpec)
	case errors.Is(err, ErrKeyReused):
		return Started{}, http.StatusUnprocessableEntity, ErrKeyReused.Error() + ": use a new key for a new request"
	case err != nil:
		s.log.Error("web: start a run", "spec", req.Spec, "by", id.Name, "err", err)
		return Started{}, http.StatusInternalServerError, "the run could not be started; see the server's log"
	}
	if !st.Replayed {
		s.log.Info("run started on the web", "run", st.RunID, "spec", req.Spec, "by", id.Name)
	}
	return st, 0, ""
}

// apiStart is POST /api/runs: {"spec": NAME} or {"prompt": TEXT}, with an
// optional Idempotency-Key header. 201 with the run; a retry with the same
// key and body 200 with the same run (Idempotent-Replayed: true); the same
// key with another body 422.
func (s *Server) apiStart(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBytes))
	if err != nil {
		s.fail(w, r, http.StatusRequestEntityTooLarge, "body: "+err.Error())
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req apiStartRequest
	if err := dec.Decode(&req); err != nil {
		s.fail(w, r, http.StatusBadRequest, `body: want {"spec": NAME} or {"prompt": TEXT}: `+err.Error())
		return
	}
	st, status, msg := s.start(r, req, r.Header.Get("Idempotency-Key"))
	if status != 0 {
		s.fail(w, r, status, msg)
		return
	}
	d, err := s.cfg.Backend.Run(r.Context(), st.RunID)
	if err != nil {
		s.backendError(w, r, "run "+st.RunID, err)
		return
	}
	status = http.StatusCreated
	if st.Replayed {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Location", "/api/runs/"+st.RunID)
	s.writeJSON(w, status, struct {
		V   int    `json:"v"`
		Run apiRun `json:"run"`
	}{1, toAPIRun(d.Run)})
}

// startForm is the inbox's "Start a run" form: spec or prompt, and a key
// made when the form was shown, so that sending it twice starts one run.
func (s *Server) startForm(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	req := apiStartRequest{Spec: r.PostForm.Get("spec"), Prompt: r.PostForm.Get("prompt")}
	st, status, msg := s.start(r, req, r.PostForm.Get("key"))
	if status != 0 {
		s.inboxWith(w, r, status, "", "", msg)
		return
	}
	http.Redirect(w, r, "/runs/"+st.RunID, http.StatusSeeOther)
}

// startData is the inbox's "Start a run" form, for someone who may.
type startData struct {
	Specs  []string
	Prompt bool   // they may start a prompt of their own
	Key    string // this form's Idempotency-Key
}

// startFor returns the start form for who(r), nil when they may not start
// runs.
func (s *Server) startFor(r *http.Request) *startData {
	id := who(r)
	if s.cfg.Start == nil || !id.Role.may(RoleRun) {
		return nil
	}
	names, err := s.cfg.Start.Specs(r.Context())
	if err != nil {
		s.log.Warn("web: list the specs", "err", err)
	}
	b := make([]byte, 18)
	rand.Read(b)
	return &startData{Specs: names, Prompt: id.Role.may(RolePrompt), Key: "form-" + base64.RawURLEncoding.EncodeToString(b)}
}
