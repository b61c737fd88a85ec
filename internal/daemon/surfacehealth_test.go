package daemon

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A surface whose service does not serve it makes /healthz degraded, naming
// it and why, and its orchestrator_surface_up 0; once served again, ok and
// 1.
func TestHealthzReportsSurfaceProblems(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	var down atomic.Bool
	d, err := New(Config{Runs: newFakeRuns(st, ""), Store: st, Listen: "127.0.0.1:0",
		SurfaceHealth: func() map[string]error {
			if down.Load() {
				return map[string]error{"github": errors.New("GitHub did not answer GET /repos/acme/app/issues/comments"), "discord": nil}
			}
			return map[string]error{"github": nil, "discord": nil}
		}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	if code, h := health(t, d); code != http.StatusOK || h.Status != "ok" || len(h.SurfaceProblems) != 0 {
		t.Fatalf("healthz = %d %+v, want ok", code, h)
	}
	if v := value(scrape(t, d), "orchestrator_surface_up", "surface", "github"); v != 1 {
		t.Errorf("orchestrator_surface_up{github} = %v, want 1", v)
	}
	down.Store(true)
	code, h := health(t, d)
	if code != http.StatusOK || h.Status != "degraded" || len(h.SurfaceProblems) != 1 ||
		h.SurfaceProblems[0].Surface != "github" || !strings.Contains(h.SurfaceProblems[0].Problem, "did not answer") {
		t.Fatalf("healthz = %d %+v, want degraded naming github and why", code, h)
	}
	fams := scrape(t, d)
	if v := value(fams, "orchestrator_surface_up", "surface", "github"); v != 0 {
		t.Errorf("orchestrator_surface_up{github} = %v, want 0", v)
	}
	if v := value(fams, "orchestrator_surface_up", "surface", "discord"); v != 1 {
		t.Errorf("orchestrator_surface_up{discord} = %v, want 1", v)
	}
}
