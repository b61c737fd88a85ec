package daemon

import (
	"context"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// QuestionStore is what Metrics reads from the store: the aggregates of
// runs and pending questions (for the gauges of every process's runs, by
// spec), and when a set was asked and a run's spec (for the answer latency
// and the per-spec cost of the runs this process drives). *store.Store
// satisfies it.
type QuestionStore interface {
	RunCounts(ctx context.Context, f store.AggFilter) ([]store.RunCount, error)
	PendingCounts(ctx context.Context, f store.AggFilter) ([]store.PendingCount, error)
	QuestionSet(ctx context.Context, id string) (store.SetRecord, error)
	Run(ctx context.Context, id string) (store.Run, error)
	// SetFeedHead moves with every change of a question set and of its
	// run's status: sums read at the same head are the same (aggCache).
	SetFeedHead(ctx context.Context) (int64, error)
}

// Metrics are the daemon's Prometheus metrics, in a registry of their own
// (never the global one). Feed it the runner's progress events with
// Observe, and wrap the surfaces' HTTP clients with InstrumentTransport.
// It is safe for concurrent use.
type Metrics struct {
	// Registry holds every metric below, plus the Go runtime and process
	// collectors.
	Registry *prometheus.Registry

	st QuestionStore

	runs        *prometheus.CounterVec
	inProgress  prometheus.Gauge
	undriven    prometheus.Gauge
	leader      prometheus.Gauge
	specProbs   prometheus.Gauge
	asked       prometheus.Counter
	askedKind   *prometheus.CounterVec
	answers     *prometheus.CounterVec
	answersKind *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	reminders   prometheus.Counter
	escalations prometheus.Counter
	agentErrors *prometheus.CounterVec
	turns       prometheus.Counter
	cost        prometheus.Counter
	apiRequests *prometheus.CounterVec
	apiDuration *prometheus.HistogramVec
	specRuns    *prometheus.CounterVec
	specCost    *prometheus.CounterVec
	healthOnce  sync.Once // watchHealth (schedhealth.go)

	surfaceHealth surfaceHealth // orchestrator_surface_up

	agg *aggCache // the store's aggregates, nil without a store (storeCollector)

	mu       sync.Mutex
	sets     map[string]*seenSet // question sets of runs this process drives, by set ID
	runSpecs map[string]string   // run ID → spec name, for the runs seen until they end
}

type seenSet struct {
	runID    string
	askedAt  time.Time
	answered bool
}

// Label values of orchestrator_runs_total{outcome} that exist from the start.
var runOutcomes = []store.RunStatus{store.RunDone, store.RunFailed, store.RunCancelled, store.RunStopped}

// NewMetrics returns the metrics in a new registry. With st, the pending
// questions gauge counts the store's unanswered questions (all processes),
// and answer latency is measured from when the store says a set was asked;
// with st nil, both come from the events seen by this process only.
func NewMetrics(st QuestionStore) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		st:       st,
		sets:     map[string]*seenSet{},
		runSpecs: map[string]string{},
	}
	if st != nil {
		m.agg = newAggCache(st)
	}
	m.newRunMetrics()
	m.newQuestionMetrics()
	m.newAgentMetrics()
	m.newSurfaceMetrics()
	m.register()
	m.initLabels()
	return m
}

// newRunMetrics makes the metrics of runs: by outcome and by spec, those
// driven and not, leadership and the specs folder's problems.
func (m *Metrics) newRunMetrics() {
	m.specRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_spec_runs_total",
		Help: "Runs that reached a final state in this process, by spec (empty for a run of a prompt) and outcome (done, failed, cancelled).",
	}, []string{"spec", "outcome"})
	m.specCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_spec_cost_usd_total",
		Help: "Cost in USD reported by the agent CLI for the turns this process ran, by spec (empty for a run of a prompt).",
	}, []string{"spec"})
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_runs_total",
		Help: "Runs that reached a final state, by outcome (done, failed, cancelled).",
	}, []string{"outcome"})
	m.inProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orchestrator_runs_in_progress",
		Help: "Runs this daemon is driving now; a run waiting on a question is parked, not driven (orchestrator_questions_pending counts those).",
	})
	m.undriven = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orchestrator_runs_undriven",
		Help: "Active runs (waiting, interrupted, running) that no process drove at the daemon's last look.",
	})
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orchestrator_leader",
		Help: "1 while this instance leads (asks the waiting runs' questions, polls GitHub, holds the Discord gateway); always 1 on SQLite.",
	})
	m.specProbs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orchestrator_spec_problems",
		Help: "Files of the specs folder that do not validate at the last rescan (each keeps its last good version scheduled, if any; see /healthz).",
	})
}

// newQuestionMetrics makes the metrics of questions: asked, answered (by
// kind and surface), the answer latency, reminders and escalations.
func (m *Metrics) newQuestionMetrics() {
	m.asked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orchestrator_questions_asked_total",
		Help: "Question sets asked on surfaces by this process.",
	})
	m.askedKind = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_questions_asked_by_kind_total",
		Help: "Question sets asked on surfaces by this process, by kind (marker, ask_tool, approval).",
	}, []string{"kind"})
	m.answersKind = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_answers_by_kind_total",
		Help: "Question sets answered in full, by kind (marker, ask_tool, approval).",
	}, []string{"kind"})
	m.answers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_answers_total",
		Help: "Question sets answered in full, by the surface the (last) answer came from.",
	}, []string{"surface"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "orchestrator_answer_latency_seconds",
		Help: "Time from a question set being asked to its complete answer, by surface.",
		// 1s … ~4.5 days.
		Buckets: prometheus.ExponentialBuckets(1, 3, 12),
	}, []string{"surface"})
	m.reminders = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orchestrator_question_reminders_total",
		Help: "Reminders sent for unanswered questions.",
	})
	m.escalations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orchestrator_question_escalations_total",
		Help: "Questions escalated to another surface.",
	})
}

// newAgentMetrics makes the metrics of the agent CLI's turns: how many,
// their errors and their cost.
func (m *Metrics) newAgentMetrics() {
	m.agentErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_agent_errors_total",
		Help: "Agent CLI turns that did not succeed, by error category.",
	}, []string{"category"})
	m.turns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orchestrator_agent_turns_total",
		Help: "Agent CLI turns finished.",
	})
	m.cost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orchestrator_agent_cost_usd_total",
		Help: "Cost in USD reported by the agent CLI for finished turns.",
	})
}

// newSurfaceMetrics makes the metrics of the surfaces' HTTP requests to
// their APIs (InstrumentTransport).
func (m *Metrics) newSurfaceMetrics() {
	m.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orchestrator_surface_api_requests_total",
		Help: "HTTP requests of the surfaces to their APIs, by surface and status code.",
	}, []string{"surface", "code"})
	m.apiDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "orchestrator_surface_api_request_duration_seconds",
		Help:    "Duration of the surfaces' HTTP requests to their APIs.",
		Buckets: prometheus.DefBuckets,
	}, []string{"surface"})
}

// register puts every metric made above in m.Registry, with the store's
// aggregates (storeCollector: the pending questions, the per-spec gauges),
// the surface health collector, and the Go runtime and process collectors.
func (m *Metrics) register() {
	m.Registry.MustRegister(
		// go_memstats_*, and the live heap as of the last GC
		// (go_gc_heap_live_bytes): what a leak makes grow.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.runs, m.inProgress, m.undriven, m.leader, m.specProbs, m.asked, m.askedKind, m.answers, m.answersKind, m.latency, m.reminders, m.escalations,
		m.agentErrors, m.turns, m.cost, m.apiRequests, m.apiDuration,
		m.specRuns, m.specCost, storeCollector{m}, &m.surfaceHealth,
	)
}

// initLabels makes the series of every run outcome and question kind
// exist at zero, so that they are scraped before the first of each.
func (m *Metrics) initLabels() {
	for _, o := range runOutcomes {
		m.runs.WithLabelValues(string(o))
	}
	for _, k := range []string{questions.KindMarker, questions.KindAskTool, questions.KindApproval, questions.KindSecrets, questions.KindLimit, questions.KindCap} {
		m.askedKind.WithLabelValues(k)
		m.answersKind.WithLabelValues(k)
	}
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// InstrumentTransport wraps rt (http.DefaultTransport when nil) so that
// every request counts in orchestrator_surface_api_requests_total{surface,
// code} and orchestrator_surface_api_request_duration_seconds{surface}.
// Put it into the GitHub and Discord clients' http.Client.
func (m *Metrics) InstrumentTransport(surface string, rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	l := prometheus.Labels{"surface": surface}
	return promhttp.InstrumentRoundTripperCounter(m.apiRequests.MustCurryWith(l),
		promhttp.InstrumentRoundTripperDuration(m.apiDuration.MustCurryWith(l), rt))
}

// pendingQuestions is the value of orchestrator_questions_pending: the
// store's count (every process's questions) when it has one, else the
// questions this process asked and saw no answer to.
func (m *Metrics) pendingQuestions() float64 {
	if m.agg != nil {
		if a := m.agg.get(); a != nil {
			return float64(a.pendingQuestions())
		}
		// The store never answered: fall back to what this process saw.
	}
	return m.seenPending()
}

// seenPending counts the sets this process asked and saw no answer to.
func (m *Metrics) seenPending() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.sets {
		if !s.answered {
			n++
		}
	}
	return float64(n)
}

func unansweredIDs(set questions.Set, resp questions.Response) []string {
	var out []string
	for _, q := range set.Questions {
		if _, ok := resp.Answer(q.ID); !ok {
			out = append(out, q.ID)
		}
	}
	return out
}

// Observe counts a progress event of the runner; chain it into the
// runner's Observe function. It does not block for long (at most a store
// read, for an answer's latency).
func (m *Metrics) Observe(ev runner.Event) {
	if m.agg != nil {
		m.agg.changed() // the next scrape reads the sums again
	}
	switch ev.Kind {
	case runner.EventQuestion:
		if ev.Set == nil {
			return
		}
		m.mu.Lock()
		if _, ok := m.sets[ev.Set.ID]; !ok {
			m.sets[ev.Set.ID] = &seenSet{runID: ev.RunID, askedAt: time.Now()}
			m.asked.Inc()
			m.askedKind.WithLabelValues(questions.KindOf(*ev.Set)).Inc()
		}
		m.mu.Unlock()
	case runner.EventAnswer:
		m.observeAnswer(ev)
	case runner.EventReminder:
		m.reminders.Inc()
	case runner.EventEscalated:
		m.escalations.Inc()
	case runner.EventTurnFinished:
		if ev.Outcome == nil {
			return
		}
		m.turns.Inc()
		if ev.Outcome.Category != "" {
			m.agentErrors.WithLabelValues(string(ev.Outcome.Category)).Inc()
		}
		// The turn's own cost: the CLI's total_cost_usd (Outcome.CostUSD)
		// counts a resumed session's earlier turns again.
		if c := ev.Outcome.TurnCostUSD; c > 0 {
			m.cost.Add(c)
			m.specCost.WithLabelValues(m.specOf(ev.RunID)).Add(c)
		}
	case runner.EventRunEnded:
		if ev.Run != nil && ev.Run.Status.Final() {
			m.runs.WithLabelValues(string(ev.Run.Status)).Inc()
			m.specRuns.WithLabelValues(ev.Run.Spec, string(ev.Run.Status)).Inc()
		}
		// Forget the run's sets and spec: a run driven again re-registers them.
		m.mu.Lock()
		for id, s := range m.sets {
			if s.runID == ev.RunID {
				delete(m.sets, id)
			}
		}
		delete(m.runSpecs, ev.RunID)
		m.mu.Unlock()
	}
}

// observeAnswer counts a complete answer once per set, with its latency.
func (m *Metrics) observeAnswer(ev runner.Event) {
	if ev.Set == nil || ev.Response == nil || len(unansweredIDs(*ev.Set, *ev.Response)) > 0 {
		return // a partial answer (a preset for some questions): the rest is still asked
	}
	m.mu.Lock()
	s, ok := m.sets[ev.Set.ID]
	if !ok {
		s = &seenSet{runID: ev.RunID}
		m.sets[ev.Set.ID] = s
	}
	if s.answered {
		m.mu.Unlock()
		return
	}
	s.answered = true
	asked := s.askedAt
	m.mu.Unlock()

	surface := ev.Response.Surface
	if surface == "" {
		surface = "unknown"
	}
	m.answers.WithLabelValues(surface).Inc()
	m.answersKind.WithLabelValues(questions.KindOf(*ev.Set)).Inc()
	if m.st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec, err := m.st.QuestionSet(ctx, ev.Set.ID)
		cancel()
		if err == nil && !rec.CreatedAt.IsZero() {
			asked = rec.CreatedAt
		}
	}
	if asked.IsZero() {
		return // asked before this process started, and no store to tell when
	}
	at := ev.Response.At
	if at.IsZero() {
		at = time.Now()
	}
	d := at.Sub(asked)
	if d < 0 {
		d = 0
	}
	m.latency.WithLabelValues(surface).Observe(d.Seconds())
}

// driving adds n to the runs in progress.
func (m *Metrics) driving(n int) { m.inProgress.Add(float64(n)) }

func (m *Metrics) setUndriven(n int) { m.undriven.Set(float64(n)) }

func (m *Metrics) setLeader(on bool) {
	if on {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

func (m *Metrics) setSpecProblems(n int) { m.specProbs.Set(float64(n)) }

// specOf returns the spec of a run ("" for a prompt, or when the store
// cannot tell), read from the store once per run while it is driven.
func (m *Metrics) specOf(runID string) string {
	m.mu.Lock()
	spec, ok := m.runSpecs[runID]
	m.mu.Unlock()
	if ok || m.st == nil {
		return spec
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	run, err := m.st.Run(ctx, runID)
	if err != nil {
		return ""
	}
	m.mu.Lock()
	m.runSpecs[runID] = run.Spec
	m.mu.Unlock()
	return run.Spec
}

// The gauges read from the store: what every process's runs and questions
// add up to, by spec. A scrape never walks the runs: the store sums them
// (store.RunCounts, store.PendingCounts: three GROUP BY statements on
// indexes, whatever the number waiting), and the sums are kept between
// scrapes (aggCache). Counters kept as runs change state would be cheaper
// still, but each instance of a cluster sees only its own events, and
// restarts lose them: the store's sums are the same for every instance and
// every restart.
var (
	specLastSuccessDesc = prometheus.NewDesc("orchestrator_spec_last_success_timestamp_seconds",
		"When the last run of the spec that ended done (in the store, by any process) ended, as a Unix time; absent for a spec with no such run.",
		[]string{"spec"}, nil)
	specPendingDesc = prometheus.NewDesc("orchestrator_spec_questions_pending",
		"Questions asked and not answered yet (in the store, by any process), by the spec of their run (empty for a run of a prompt).",
		[]string{"spec"}, nil)
	pendingDesc = prometheus.NewDesc("orchestrator_questions_pending",
		"Questions asked and not answered yet (in the store, by any process; without a store, those this process asked).",
		nil, nil)
	storeRunsDesc = prometheus.NewDesc("orchestrator_store_runs",
		"Runs in the store (of every process), by spec (empty for a run of a prompt) and status.",
		[]string{"spec", "status"}, nil)
	storeCostDesc = prometheus.NewDesc("orchestrator_store_cost_usd",
		"What the runs in the store (of every process) cost, in USD, by spec (empty for a run of a prompt).",
		[]string{"spec"}, nil)
	storeSetsDesc = prometheus.NewDesc("orchestrator_store_question_sets_pending",
		"Question sets waiting for an answer (in the store, by any process), by the spec of their run and their kind.",
		[]string{"spec", "kind"}, nil)
	oldestPendingDesc = prometheus.NewDesc("orchestrator_spec_oldest_pending_age_seconds",
		"How long the oldest question set of the spec's runs still waiting for an answer has waited, in seconds.",
		[]string{"spec"}, nil)
	aggAgeDesc = prometheus.NewDesc("orchestrator_store_aggregates_age_seconds",
		"How old the store's sums this scrape shows are (the gauges of orchestrator_store_*, orchestrator_spec_* and orchestrator_questions_pending): near 0 when read for this scrape, growing while the store is slow or down.",
		nil, nil)
	aggUpDesc = prometheus.NewDesc("orchestrator_store_aggregates_up",
		"1 when the last read of the store's sums succeeded, 0 when it failed or timed out (the gauges then keep their last values).",
		nil, nil)
	aggErrorsDesc = prometheus.NewDesc("orchestrator_store_aggregates_errors_total",
		"Reads of the store's sums that failed or timed out.",
		nil, nil)
	aggDurationDesc = prometheus.NewDesc("orchestrator_store_aggregates_read_seconds",
		"How long the last read of the store's sums took.",
		nil, nil)
)

// storeCollector collects the gauges read from the store at each scrape
// (aggCache): they survive restarts and count the runs of every process.
// Their labels are spec names, statuses and kinds: bounded by the specs
// there are, never by runs or questions. A store that is slow or down does
// not make them vanish: they keep their last values, and
// orchestrator_store_aggregates_age_seconds and _up say so.
type storeCollector struct{ m *Metrics }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{specLastSuccessDesc, specPendingDesc, pendingDesc, storeRunsDesc, storeCostDesc,
		storeSetsDesc, oldestPendingDesc, aggAgeDesc, aggUpDesc, aggErrorsDesc, aggDurationDesc} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	agg := c.m.agg
	if agg == nil {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, c.m.seenPending())
		return
	}
	a := agg.get()
	now := time.Now()
	st := agg.state()
	up := 0.0
	if st.ok {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(aggUpDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(aggErrorsDesc, prometheus.CounterValue, float64(st.errors))
	if a == nil { // the store never answered
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, c.m.seenPending())
		return
	}
	ch <- prometheus.MustNewConstMetric(aggAgeDesc, prometheus.GaugeValue, max(0, now.Sub(a.at).Seconds()))
	ch <- prometheus.MustNewConstMetric(aggDurationDesc, prometheus.GaugeValue, a.took.Seconds())
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(a.pendingQuestions()))
	cost := map[string]float64{}
	for _, r := range a.runs {
		ch <- prometheus.MustNewConstMetric(storeRunsDesc, prometheus.GaugeValue, float64(r.Runs), r.Spec, string(r.Status))
		cost[r.Spec] += r.CostUSD
		if r.Status == store.RunDone && !r.LastUpdated.IsZero() {
			ch <- prometheus.MustNewConstMetric(specLastSuccessDesc, prometheus.GaugeValue, float64(r.LastUpdated.UnixNano())/1e9, r.Spec)
		}
	}
	for spec, usd := range cost {
		ch <- prometheus.MustNewConstMetric(storeCostDesc, prometheus.GaugeValue, usd, spec)
	}
	questions, oldest := map[string]int{}, map[string]time.Time{}
	for _, p := range a.pending {
		ch <- prometheus.MustNewConstMetric(storeSetsDesc, prometheus.GaugeValue, float64(p.Sets), p.Spec, p.Kind)
		questions[p.Spec] += p.Questions
		if o, ok := oldest[p.Spec]; !ok || p.Oldest.Before(o) {
			oldest[p.Spec] = p.Oldest
		}
	}
	for spec, n := range questions {
		if n > 0 {
			ch <- prometheus.MustNewConstMetric(specPendingDesc, prometheus.GaugeValue, float64(n), spec)
		}
	}
	for spec, at := range oldest {
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, max(0, now.Sub(at).Seconds()), spec)
	}
}

// aggregates are the store's sums as read at one time.
type aggregates struct {
	runs    []store.RunCount
	pending []store.PendingCount
	at      time.Time     // when the read started
	took    time.Duration // how long it took
}

func (a *aggregates) pendingQuestions() int {
	n := 0
	for _, p := range a.pending {
		n += p.Questions
	}
	return n
}

// aggCache reads the store's sums for the scrapes, one read at a time
// whatever the number of scrapes, and keeps the last ones read.
//
// A scrape starts a read (or joins the one in flight) and waits for it:
// up to wait (5 s) while reads are quick, so that a scrape shows the store
// as it is; but once a read took longer than slow (100 ms: the sums of very
// many runs on a loaded database), scrapes wait at most slowWait (50 ms)
// and otherwise show the last values while the read goes on, so a scrape
// answers in milliseconds whatever is waiting. A read that fails or passes
// its timeout (30 s) leaves the last values in place: the gauges go on,
// older (orchestrator_store_aggregates_age_seconds), with
// orchestrator_store_aggregates_up at 0.
//
// While nothing happens in this process (no runner event since the last
// read: thousands of runs waiting, a scrape every few seconds), a read that
// took longer than costly (20 ms) is not made again before duty (1/100)
// of the time since it ended allows: /metrics then costs serve at most 1%
// of a core whatever is waiting, and its values are at most that old (the
// age gauge says how old: 7 s at 10,000 waiting on SQLite). An event of
// this process's runs makes the next scrape read again; a change made by
// another process shows at the next read. And while the store's set feed
// stays where it was at the last read (SetFeedHead, one indexed look), the
// sums are kept up to quietFor (a minute): what else changes them (a run of
// another process starting or ending without a question) shows that late
// at most.
type aggCache struct {
	st QuestionStore

	wait, slow, slowWait, timeout time.Duration
	costly                        time.Duration
	duty                          float64
	dirty                         bool      // a runner event since the last read
	ended                         time.Time // when the last read ended
	quietFor                      time.Duration
	head                          int64 // the set feed's head at the last read

	mu       sync.Mutex
	last     *aggregates   // nil until a read succeeds
	inflight chan struct{} // closed when the read in flight ends; nil when none
	lastTook time.Duration // of the last read that ended, whether it succeeded or not
	ok       bool          // the last read that ended succeeded
	errors   int
}

func newAggCache(st QuestionStore) *aggCache {
	return &aggCache{st: st, wait: 5 * time.Second, slow: 100 * time.Millisecond, slowWait: 50 * time.Millisecond, timeout: 30 * time.Second,
		costly: 20 * time.Millisecond, duty: 0.01, quietFor: time.Minute}
}

// feedHead is the set feed's head now, 0 when it cannot be read. Called
// with c.mu held: one indexed look, bounded.
func (c *aggCache) feedHead() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), c.slowWait)
	defer cancel()
	head, err := c.st.SetFeedHead(ctx)
	if err != nil {
		return 0
	}
	return head
}

// changed notes that this process's runs moved: the next scrape reads.
func (c *aggCache) changed() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
}

// aggState is how the reads of an aggCache went.
type aggState struct {
	ok     bool
	errors int
}

func (c *aggCache) state() aggState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return aggState{ok: c.ok, errors: c.errors}
}

// get returns the sums for a scrape: read now, or the last ones when the
// read takes too long (see aggCache); nil when none was ever read.
func (c *aggCache) get() *aggregates {
	c.mu.Lock()
	if c.last != nil && c.inflight == nil && !c.dirty {
		age := time.Since(c.ended)
		reuse := c.lastTook > c.costly && age < time.Duration(float64(c.lastTook)/c.duty) // reading again would cost more than duty
		if !reuse && age < c.quietFor && c.ok {
			head, head0 := c.feedHead(), c.head
			reuse = head == head0 && head != 0 // nothing of the sets moved
		}
		if reuse {
			last := c.last
			c.mu.Unlock()
			return last
		}
	}
	if c.inflight == nil {
		c.inflight = make(chan struct{})
		c.dirty = false
		go c.read(c.inflight)
	}
	done := c.inflight
	wait := c.wait
	if c.last != nil && c.lastTook > c.slow {
		wait = c.slowWait
	}
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// read reads the sums once and closes done.
func (c *aggCache) read(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := time.Now()
	head, herr := c.st.SetFeedHead(ctx) // before the sums: a change in between reads them again
	runs, err := c.st.RunCounts(ctx, store.AggFilter{})
	var pending []store.PendingCount
	if err == nil {
		pending, err = c.st.PendingCounts(ctx, store.AggFilter{})
	}
	took := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastTook, c.ok, c.ended = took, err == nil, time.Now()
	c.head = head
	if herr != nil {
		c.head = 0 // unknown: the next scrape reads
	}
	if err != nil {
		c.errors++
	} else {
		c.last = &aggregates{runs: runs, pending: pending, at: start, took: took}
	}
	c.inflight = nil
	close(done)
}
