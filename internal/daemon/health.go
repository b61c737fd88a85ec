package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Health is the body of /healthz.
type Health struct {
	Status string `json:"status"` // "ok", "shutting down" or "error"
	// Driving counts the runs this daemon drives now.
	Driving int `json:"driving"`
	// Leader: this instance leads (asks the waiting runs' questions,
	// polls GitHub, holds the Discord gateway); always true on SQLite.
	Leader bool `json:"leader"`
	// Running and Waiting count the store's runs in those states (all
	// processes).
	Running int `json:"running"`
	Waiting int `json:"waiting"`
	// Undriven lists the active runs that no process drove at the
	// daemon's last look (their drive failed; adopted again after a
	// backoff); Status is then "degraded".
	Undriven []string `json:"undriven,omitempty"`
	// SpecProblems lists the files of the specs folder that do not
	// validate (or cannot be read) at the last rescan; each keeps its last
	// good version scheduled when it had one (kept). Status is then
	// "degraded".
	SpecProblems []SpecProblem `json:"spec_problems,omitempty"`
	// SurfaceProblems lists the surfaces whose service does not serve
	// them now (a request not answered in time, polls refused); Status is
	// then "degraded".
	SurfaceProblems []SurfaceProblem `json:"surface_problems,omitempty"`
	// Files, when set, says that the process is near or at its open-file
	// limit ("open files: 4,090 of 4,096"; files.go); Status is then
	// "degraded", Error says so too and /healthz is 503: whatever needs a
	// descriptor (a connection, the store, the specs folder) fails soon.
	Files string `json:"files,omitempty"`
	Error string `json:"error,omitempty"`
}

// healthz answers 200 with Health while serving (status "ok", or
// "degraded" with runs no process drives or spec files that do not
// validate); 503 while shutting down, when the store cannot be read, or
// when the process is near its open-file limit (files.go).
func (d *Daemon) healthz(w http.ResponseWriter, r *http.Request) {
	h, code := d.health(r.Context())
	writeHealth(w, h, code)
}

// statusz is /healthz for monitoring: the same body, and 200 only when
// the status is "ok" (503 when degraded too). A load balancer checks
// /healthz, which stays 200 while degraded: a spec that does not validate
// must not take the only webhook receiver out of it.
func (d *Daemon) statusz(w http.ResponseWriter, r *http.Request) {
	h, code := d.health(r.Context())
	if h.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeHealth(w, h, code)
}

func writeHealth(w http.ResponseWriter, h Health, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(h)
}

// health is what /healthz and /statusz say, and /healthz's status code.
func (d *Daemon) health(ctx context.Context) (Health, int) {
	d.mu.Lock()
	h := Health{Status: "ok", Driving: len(d.driving), Leader: d.leader, Undriven: slices.Clone(d.undriven), SpecProblems: slices.Clone(d.specProblems)}
	stopping := d.stopping
	d.mu.Unlock()
	code := http.StatusOK
	h.SurfaceProblems = d.cfg.Metrics.surfaceHealth.problems()
	if len(h.Undriven) > 0 || len(h.SpecProblems) > 0 || len(h.SurfaceProblems) > 0 {
		h.Status = "degraded"
	}
	if stopping {
		h.Status, code = "shutting down", http.StatusServiceUnavailable
	}
	runs, err := d.cfg.Store.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.RunRunning, store.RunWaiting}})
	switch {
	case err != nil && ctx.Err() == nil:
		d.store.failed("healthz: list runs", err) // one line an outage (outage.go)
		since, _, _ := d.store.down()
		// Why, not the driver's words (hosts, users): the log has them.
		h.Status, h.Error, code = "degraded", "store unreachable since "+since.UTC().Format(time.RFC3339), http.StatusServiceUnavailable
	case err == nil:
		d.store.ok()
	}
	if p := fileProblem(); p != "" {
		h.Files, code = p, http.StatusServiceUnavailable
		if !stopping {
			h.Status = "degraded"
		}
		if h.Error != "" {
			h.Error += "; "
		}
		h.Error += p
	}
	for _, run := range runs {
		switch run.Status {
		case store.RunRunning:
			h.Running++
		case store.RunWaiting:
			h.Waiting++
		}
	}
	return h, code
}
