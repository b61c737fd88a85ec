package web

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Remembered decisions on the web (docs/rules.md): the answer form offers
// to keep an answer as a rule, and /rules lists the rules and revokes
// them. A person signed in here may answer every run, so they may make a
// rule of any scope, as `orchestrator answer --remember` does.

// RuleBook is the remembered decisions, when the serve wiring offers them
// (Config.Rules). Safe for concurrent use.
type RuleBook interface {
	// Rules lists every rule, newest first (revoked and expired ones too).
	Rules(ctx context.Context) ([]RuleView, error)
	// Revoke revokes a rule on behalf of by; an unknown one wraps
	// ErrNotFound.
	Revoke(ctx context.Context, id, by string) error
	// Remember keeps by's answer to a set as a rule, remember being the
	// scope and lifetime chosen ("spec:7d"), and says what was kept. Its
	// error is a refusal to show the person, or a failure.
	Remember(ctx context.Context, setID, by, remember string) (string, error)
}

// RuleView is a rule as the page lists it.
type RuleView struct {
	ID      string
	Scope   string // "spec nightly", "repo /srv/app", "every run"
	Decides string // what it answers, to which question
	MadeBy  string
	Surface string
	FromRun string
	State   string // active, revoked, expired
	Uses    int
	Created time.Time
	Expires time.Time
}

// RememberChoices are the answer form's choices of a rule ("" keeps none).
var RememberChoices = []struct{ Value, Label string }{
	{"", "Do not remember"},
	{"spec:7d", "Remember for this spec, 7 days"},
	{"spec:30d", "Remember for this spec, 30 days"},
	{"repo:7d", "Remember for this repository, 7 days"},
	{"all:7d", "Remember for every run, 7 days"},
}

func (s *Server) rulesPage(w http.ResponseWriter, r *http.Request) {
	s.rulesPageWith(w, r, http.StatusOK, "", "")
}

func (s *Server) rulesPageWith(w http.ResponseWriter, r *http.Request, status int, flash, errMsg string) {
	rules, err := s.cfg.Rules.Rules(r.Context())
	if err != nil {
		s.backendError(w, r, "rules", err)
		return
	}
	s.render(w, r, status, "rules", pageData{Title: "Rules", Rules: rules, Flash: flash, Error: errMsg})
}

func (s *Server) revokeRuleForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.cfg.Rules.Revoke(r.Context(), id, who(r).Name); err != nil {
		if errors.Is(err, ErrNotFound) {
			s.backendError(w, r, "rule "+id, err)
			return
		}
		s.rulesPageWith(w, r, http.StatusConflict, "", err.Error())
		return
	}
	s.log.Info("rule revoked on the web", "rule", id, "by", who(r).Name)
	s.rulesPageWith(w, r, http.StatusOK, "Rule "+id+" revoked: its question is asked again.", "")
}

// remember keeps the answer just taken as a rule, when the form asked to;
// it returns what to add to the flash.
func (s *Server) remember(r *http.Request, setID, remember string) (flash, errMsg string) {
	if remember == "" || s.cfg.Rules == nil {
		return "", ""
	}
	text, err := s.cfg.Rules.Remember(r.Context(), setID, who(r).Name, remember)
	if err != nil {
		return "", "The answer was recorded, but not remembered: " + err.Error()
	}
	return " " + text + ".", ""
}
