package web

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Schedules lists the scheduled specs and pauses or resumes them (a spec
// whose runs failed pauses itself; internal/daemon). The serve wiring
// implements it on top of the store. Optional: without it the inbox shows
// no schedules. Safe for concurrent use.
type Schedules interface {
	// Schedules lists the scheduled specs, by name.
	Schedules(ctx context.Context) ([]Schedule, error)
	// SetPaused pauses or resumes spec's schedule on behalf of by; an
	// unknown spec wraps ErrNotFound.
	SetPaused(ctx context.Context, spec string, paused bool, by string) error
}

// Schedule is a scheduled spec and whether its schedule is paused.
type Schedule struct {
	Spec     string
	Schedule string // the cron expression
	Paused   bool
	Reason   string // why it is paused: "failures" or "by_hand"
	Detail   string // the failures' errors, or who paused it
	PausedAt time.Time
}

func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request) {
	s.schedulesPageWith(w, r, http.StatusOK, "", "")
}

func (s *Server) schedulesPageWith(w http.ResponseWriter, r *http.Request, status int, flash, errMsg string) {
	list, err := s.cfg.Schedules.Schedules(r.Context())
	if err != nil {
		s.backendError(w, r, "schedules", err)
		return
	}
	s.render(w, r, status, "schedules", pageData{Title: "Schedules", Schedules: list, Flash: flash, Error: errMsg})
}

func (s *Server) pauseForm(w http.ResponseWriter, r *http.Request) { s.setPausedForm(w, r, true) }
func (s *Server) resumeScheduleForm(w http.ResponseWriter, r *http.Request) {
	s.setPausedForm(w, r, false)
}

func (s *Server) setPausedForm(w http.ResponseWriter, r *http.Request, paused bool) {
	spec := r.PathValue("spec")
	if err := s.cfg.Schedules.SetPaused(r.Context(), spec, paused, who(r).Name); err != nil {
		if errors.Is(err, ErrNotFound) {
			s.schedulesPageWith(w, r, http.StatusNotFound, "", err.Error())
			return
		}
		s.backendError(w, r, "schedule "+spec, err)
		return
	}
	verb, flash := "resumed", "Schedule of "+spec+" resumed: it runs from its next tick."
	if paused {
		verb, flash = "paused", "Schedule of "+spec+" paused: its ticks start no run."
	}
	s.log.Info("schedule "+verb+" on the web", "spec", spec, "by", who(r).Name)
	s.schedulesPageWith(w, r, http.StatusOK, flash, "")
}

// apiSchedule is a schedule in the JSON API.
type apiSchedule struct {
	Spec     string     `json:"spec"`
	Schedule string     `json:"schedule"`
	Paused   bool       `json:"paused"`
	Reason   string     `json:"reason,omitempty"`
	Detail   string     `json:"detail,omitempty"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
}

func toAPISchedule(sc Schedule) apiSchedule {
	a := apiSchedule{Spec: sc.Spec, Schedule: sc.Schedule, Paused: sc.Paused, Reason: sc.Reason, Detail: sc.Detail}
	if sc.Paused && !sc.PausedAt.IsZero() {
		t := sc.PausedAt.UTC()
		a.PausedAt = &t
	}
	return a
}

func (s *Server) apiSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Schedules.Schedules(r.Context())
	if err != nil {
		s.backendError(w, r, "schedules", err)
		return
	}
	out := make([]apiSchedule, 0, len(list))
	for _, sc := range list {
		out = append(out, toAPISchedule(sc))
	}
	s.writeJSON(w, http.StatusOK, struct {
		V         int           `json:"v"`
		Schedules []apiSchedule `json:"schedules"`
	}{1, out})
}

func (s *Server) apiPause(w http.ResponseWriter, r *http.Request) { s.apiSetPaused(w, r, true) }
func (s *Server) apiResumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.apiSetPaused(w, r, false)
}

func (s *Server) apiSetPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	spec := r.PathValue("spec")
	if err := s.cfg.Schedules.SetPaused(r.Context(), spec, paused, who(r).Name); err != nil {
		s.backendError(w, r, "schedule "+spec, err)
		return
	}
	list, err := s.cfg.Schedules.Schedules(r.Context())
	if err != nil {
		s.backendError(w, r, "schedules", err)
		return
	}
	for _, sc := range list {
		if sc.Spec == spec {
			s.writeJSON(w, http.StatusOK, struct {
				V        int         `json:"v"`
				Schedule apiSchedule `json:"schedule"`
			}{1, toAPISchedule(sc)})
			return
		}
	}
	s.backendError(w, r, "schedule "+spec, ErrNotFound)
}
