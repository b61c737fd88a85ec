package daemon

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// SurfaceHealthFunc says, for each surface built (by name), whether its
// service serves it: nil, or why not (surfaces.HealthReporter). It makes no
// request.
type SurfaceHealthFunc func() map[string]error

// SurfaceProblem is a surface whose service does not serve it now, as
// /healthz lists it.
type SurfaceProblem struct {
	Surface string `json:"surface"`
	Problem string `json:"problem"`
}

var surfaceUpDesc = prometheus.NewDesc("orchestrator_surface_up",
	"1 while the surface's service serves it (its requests get answers, its polls are not refused), 0 while not (see /healthz).",
	[]string{"surface"}, nil)

// surfaceHealth is the daemon's view of its surfaces' health.
type surfaceHealth struct {
	mu sync.Mutex
	fn SurfaceHealthFunc
}

func (h *surfaceHealth) set(fn SurfaceHealthFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fn = fn
}

// problems lists the surfaces that are not served now, by name.
func (h *surfaceHealth) problems() []SurfaceProblem {
	h.mu.Lock()
	fn := h.fn
	h.mu.Unlock()
	if fn == nil {
		return nil
	}
	var out []SurfaceProblem
	for name, err := range fn() {
		if err != nil {
			out = append(out, SurfaceProblem{Surface: name, Problem: err.Error()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Surface < out[j].Surface })
	return out
}

func (h *surfaceHealth) Describe(ch chan<- *prometheus.Desc) { ch <- surfaceUpDesc }

func (h *surfaceHealth) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	fn := h.fn
	h.mu.Unlock()
	if fn == nil {
		return
	}
	for name, err := range fn() {
		up := 1.0
		if err != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(surfaceUpDesc, prometheus.GaugeValue, up, name)
	}
}

// SetSurfaceHealth has orchestrator_surface_up{surface} report fn.
func (m *Metrics) SetSurfaceHealth(fn SurfaceHealthFunc) {
	m.surfaceHealth.set(fn)
}
