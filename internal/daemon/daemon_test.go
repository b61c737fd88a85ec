package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// wait is the generous bound of every wait in these tests (a slow, loaded
// machine); the tests never take that long when they pass.
const wait = 60 * time.Second

// fakeRuns stands in for the runner: Create stores a run, Drive announces
// itself on drives and blocks until the test finishes it or ctx ends, as
// the runner does while a turn runs or a question waits.
type fakeRuns struct {
	st      *store.Store
	observe func(runner.Event)
	// status is what Drive sets while it blocks: store.RunWaiting for a
	// run waiting on a question, store.RunRunning for a running turn;
	// empty keeps the run's status.
	status  store.RunStatus
	hold    chan struct{} // when set, a cancelled Drive waits for it to close
	creates atomic.Int64
	drives  chan *driveCall
}

type driveCall struct {
	runID     string
	finish    chan store.RunStatus // the test sends the final status
	cancelled chan struct{}        // closed when Drive sees ctx end
	returned  chan struct{}        // closed when Drive returns
}

func newFakeRuns(st *store.Store, status store.RunStatus) *fakeRuns {
	return &fakeRuns{st: st, status: status, observe: func(runner.Event) {}, drives: make(chan *driveCall)}
}

func (f *fakeRuns) Create(ctx context.Context, n runner.NewRun) (store.Run, error) {
	id := fmt.Sprintf("run%d", f.creates.Add(1))
	return f.st.CreateRun(ctx, store.Run{ID: id, Spec: n.Spec, Prompt: n.Prompt, Surfaces: n.Surfaces})
}

func (f *fakeRuns) Drive(ctx context.Context, runID string) (store.Run, error) {
	run, err := f.st.Run(ctx, runID)
	if err != nil {
		return store.Run{}, err
	}
	lock, err := f.st.LockRun(runID)
	if err != nil {
		return run, fmt.Errorf("run %s: %w", runID, err)
	}
	defer lock.Unlock()
	bg := context.WithoutCancel(ctx)
	if f.status != "" {
		if err := f.st.UpdateRun(ctx, runID, store.RunUpdate{Status: f.status}); err != nil {
			return run, err
		}
	}
	c := &driveCall{runID: runID, finish: make(chan store.RunStatus, 1), cancelled: make(chan struct{}), returned: make(chan struct{})}
	defer close(c.returned)
	select {
	case f.drives <- c:
	case <-ctx.Done():
		close(c.cancelled)
		return run, ctx.Err()
	}
	select {
	case st := <-c.finish:
		if err := f.st.UpdateRun(bg, runID, store.RunUpdate{Status: st}); err != nil {
			return run, err
		}
		run, _ = f.st.Run(bg, runID)
		f.observe(runner.Event{Kind: runner.EventRunEnded, RunID: runID, Run: &run})
		return run, nil
	case <-ctx.Done():
		close(c.cancelled)
		if f.hold != nil {
			<-f.hold
		}
		if run, _ = f.st.Run(bg, runID); run.Status == store.RunRunning {
			f.st.UpdateRun(bg, runID, store.RunUpdate{Status: store.RunInterrupted})
		}
		run, _ = f.st.Run(bg, runID)
		return run, ctx.Err()
	}
}

func (f *fakeRuns) next(t *testing.T) *driveCall {
	t.Helper()
	select {
	case c := <-f.drives:
		return c
	case <-time.After(wait):
		t.Fatal("no run was driven")
		return nil
	}
}

// logRecorder is a slog handler that keeps the messages, for tests that
// wait for something to be logged.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
	seen chan struct{} // receives (without blocking) after each message
}

func newLogRecorder() *logRecorder { return &logRecorder{seen: make(chan struct{}, 1)} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	select {
	case l.seen <- struct{}{}:
	default:
	}
	return nil
}

func (l *logRecorder) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

// waitFor waits until substr was logged n times.
func (l *logRecorder) waitFor(t *testing.T, substr string, n int) {
	t.Helper()
	deadline := time.After(wait)
	for l.count(substr) < n {
		select {
		case <-l.seen:
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("%q logged %d times, want %d; the log:\n%s", substr, l.countLocked(substr), n, strings.Join(l.msgs, "\n"))
		}
	}
}

func (l *logRecorder) dump() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

func (l *logRecorder) countLocked(substr string) int {
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func specRun(sp specs.Spec, _ []byte) (runner.NewRun, error) {
	return runner.NewRun{Prompt: sp.Body}, nil
}

// started runs d until the test ends or stop is called; stop returns Run's
// error.
type started struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, d *Daemon) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- d.Run(ctx) }()
	t.Cleanup(func() { s.stop(t) })
	select {
	case <-d.Ready():
	case err := <-s.done:
		s.done <- err
		t.Fatalf("Run: %v", err)
	case <-time.After(wait):
		t.Fatal("the daemon did not get ready")
	}
	return s
}

func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(wait):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func health(t *testing.T, d *Daemon) (int, Health) {
	t.Helper()
	code, body := get(t, "http://"+d.Addr()+"/healthz")
	var h Health
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("healthz body %q: %v", body, err)
	}
	return code, h
}

// scrape reads /metrics in the text exposition format.
func scrape(t *testing.T, d *Daemon) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, "http://"+d.Addr()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value is the value of the metric name with exactly labels (a histogram's
// sample count); -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; match && i+1 < len(labels); i += 2 {
			match = got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
	}
	return -1
}

func TestScheduledSpecSkipsTicksWhileWaiting(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	m := NewMetrics(st)
	f := newFakeRuns(st, store.RunWaiting) // every run waits on a question until finished
	f.observe = m.Observe
	logs := newLogRecorder()
	d, err := New(Config{
		Specs:   []specs.Spec{{Name: "tick", Schedule: "@every 1s", Body: "Do the thing."}},
		Runs:    f,
		Store:   st,
		NewRun:  specRun,
		Listen:  "127.0.0.1:0",
		Metrics: m,
		Logger:  slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)

	first := f.next(t)
	// While the run waits on its question, the next ticks are skipped.
	logs.waitFor(t, "run skipped: the previous run of the spec is still active", 2)
	if n := f.creates.Load(); n != 1 {
		t.Fatalf("%d runs created while the first one waits, want 1", n)
	}
	run, err := st.Run(context.Background(), first.runID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Spec != "tick" || run.Prompt != "Do the thing." || run.Status != store.RunWaiting {
		t.Fatalf("run = %+v", run)
	}
	code, h := health(t, d)
	if code != http.StatusOK || h.Status != "ok" || h.Driving != 1 || h.Waiting != 1 {
		t.Fatalf("healthz = %d %+v", code, h)
	}
	if code, body := get(t, "http://"+d.Addr()+"/statusz"); code != http.StatusOK {
		t.Fatalf("/statusz while ok = %d %s", code, body)
	}

	// Answered: the run finishes, and the next tick starts a new run.
	first.finish <- store.RunDone
	second := f.next(t)
	if second.runID == first.runID {
		t.Fatalf("the second tick drove %s again", first.runID)
	}
	if n := f.creates.Load(); n != 2 {
		t.Fatalf("%d runs created, want 2", n)
	}
	fams := scrape(t, d)
	if v := value(fams, "orchestrator_runs_total", "outcome", "done"); v != 1 {
		t.Errorf("orchestrator_runs_total{outcome=done} = %v, want 1", v)
	}
	if v := value(fams, "orchestrator_runs_in_progress"); v != 1 {
		t.Errorf("orchestrator_runs_in_progress = %v, want 1", v)
	}
	if last, ok, err := st.LastScheduled(context.Background(), "tick"); err != nil || !ok || last.IsZero() {
		t.Errorf("LastScheduled = %v, %v, %v", last, ok, err)
	}

	if err := s.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-second.cancelled:
	default:
		t.Error("the second run was not cancelled by the shutdown")
	}
	if run, _ := st.Run(context.Background(), second.runID); run.Status != store.RunWaiting {
		t.Errorf("after shutdown the waiting run is %s, want waiting", run.Status)
	}
}

func createRun(t *testing.T, st *store.Store, id, spec string, status store.RunStatus) {
	t.Helper()
	if _, err := st.CreateRun(context.Background(), store.Run{ID: id, Spec: spec, Prompt: "p", Status: status}); err != nil {
		t.Fatal(err)
	}
}

func TestTakesUpStoredRuns(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	createRun(t, st, "waiting", "s", store.RunWaiting)
	createRun(t, st, "interrupted", "", store.RunInterrupted)
	createRun(t, st, "orphan", "", store.RunRunning)
	createRun(t, st, "elsewhere", "", store.RunRunning)
	createRun(t, st, "done", "s", store.RunDone)
	createRun(t, st, "failed", "", store.RunFailed)
	createRun(t, st, "cancelled", "", store.RunCancelled)
	// Another process drives "elsewhere".
	lock, err := st.LockRun("elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()

	f := newFakeRuns(st, "")
	logs := newLogRecorder()
	d, err := New(Config{
		Specs:  []specs.Spec{{Name: "s", Schedule: "@every 1s", Body: "S"}},
		Runs:   f,
		Store:  st,
		NewRun: specRun,
		Listen: "127.0.0.1:0",
		Logger: slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)
	var got []string
	for range 2 {
		got = append(got, f.next(t).runID)
	}
	slices.Sort(got)
	// A run waiting on a question is parked: the ask room asks it, and
	// it is driven once answered.
	if want := []string{"interrupted", "orphan"}; !slices.Equal(got, want) {
		t.Fatalf("taken up %v, want %v", got, want)
	}
	if want := []string{"interrupted", "orphan"}; !slices.Equal(d.Running(), want) {
		t.Fatalf("Running() = %v, want %v", d.Running(), want)
	}
	// The spec's waiting run makes its ticks skip.
	logs.waitFor(t, "run skipped: a run of the spec is active or waiting on a question", 2)
	if n := f.creates.Load(); n != 0 {
		t.Fatalf("%d runs of the busy spec created", n)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(d.Running()) != 0 {
		t.Fatalf("still driving %v after Run returned", d.Running())
	}
}

func TestSecondDaemonFailsFast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := openStore(t, dir)
	d1, err := New(Config{Runs: newFakeRuns(st, ""), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d1)

	st2 := openStore(t, dir) // as another process would
	d2, err := New(Config{Runs: newFakeRuns(st2, ""), Store: st2, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err = d2.Run(ctx)
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "another `orchestrator serve` uses this state directory") {
		t.Fatalf("second Run = %v, want a clear ErrLocked", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the second daemon did not fail fast")
	}
	if err := d2.Run(ctx); err == nil || !strings.Contains(err.Error(), "already run") {
		t.Fatalf("Run twice = %v", err)
	}

	if err := s.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	lock, err := st2.LockDaemon()
	if err != nil {
		t.Fatalf("the daemon lock was not released: %v", err)
	}
	lock.Unlock()
}

func TestShutdownCancelsRunsAndKeepsThemResumable(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	createRun(t, st, "old", "", store.RunInterrupted)
	f := newFakeRuns(st, store.RunRunning) // a turn is running
	f.hold = make(chan struct{})
	d, err := New(Config{
		Specs:  []specs.Spec{{Name: "tick", Schedule: "@every 1s", Body: "T"}},
		Runs:   f,
		Store:  st,
		NewRun: specRun,
		Listen: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)
	calls := []*driveCall{f.next(t), f.next(t)} // the taken-up run and a scheduled one
	ids := []string{calls[0].runID, calls[1].runID}
	slices.Sort(ids)
	if ids[0] != "old" || ids[1] != "run1" {
		t.Fatalf("driven %v, want old and run1", ids)
	}

	s.cancel()
	for _, c := range calls {
		select {
		case <-c.cancelled:
		case <-time.After(wait):
			t.Fatalf("run %s was not cancelled", c.runID)
		}
	}
	// The runs are still stopping: /healthz says so.
	if code, h := health(t, d); code != http.StatusServiceUnavailable || h.Status != "shutting down" {
		t.Fatalf("healthz while shutting down = %d %+v", code, h)
	}
	close(f.hold)
	if err := s.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, id := range ids {
		run, err := st.Run(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != store.RunInterrupted {
			t.Errorf("run %s is %s after shutdown, want interrupted", id, run.Status)
		}
	}
	if _, err := http.Get("http://" + d.Addr() + "/healthz"); err == nil {
		t.Error("the HTTP server still answers after Run returned")
	}
}

func TestShutdownIsBounded(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	createRun(t, st, "stuck", "", store.RunInterrupted)
	f := newFakeRuns(st, "")
	f.hold = make(chan struct{}) // Drive ignores the cancel until released
	d, err := New(Config{Runs: f, Store: st, ShutdownTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)
	c := f.next(t)
	err = s.stop(t)
	if err == nil || !strings.Contains(err.Error(), "1 run(s) did not stop within 50ms: stuck") {
		t.Fatalf("Run = %v, want the runs that did not stop", err)
	}
	close(f.hold)
	select {
	case <-c.returned:
	case <-time.After(wait):
		t.Fatal("Drive did not return")
	}
}

func TestHealthzAndMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	set := newWaitingRun(t, st, "rq", "qa", "qb")
	m := NewMetrics(st)

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	client := &http.Client{Transport: m.InstrumentTransport("github", api.Client().Transport)}
	for _, p := range []string{"/ok", "/ok", "/missing"} {
		resp, err := client.Get(api.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	f := newFakeRuns(st, "")
	webhook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hook") })
	d, err := New(Config{Runs: f, Store: st, Listen: "127.0.0.1:0", Metrics: m,
		Handlers: map[string]http.Handler{"POST /webhooks/github": webhook}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	// "rq" waits parked: nothing drives it.

	code, h := health(t, d)
	if code != http.StatusOK || h.Status != "ok" || h.Waiting != 1 || h.Driving != 0 {
		t.Fatalf("healthz = %d %+v", code, h)
	}
	resp, err := http.Post("http://"+d.Addr()+"/webhooks/github", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hook" {
		t.Fatalf("webhook handler answered %q", b)
	}

	// The runner's events of a run: a question, a failed turn, the
	// answer, and the run's end.
	m.Observe(runner.Event{Kind: runner.EventQuestion, RunID: "rq", Set: &set})
	m.Observe(runner.Event{Kind: runner.EventQuestion, RunID: "rq", Set: &set}) // asked again (escalated): one set
	m.Observe(runner.Event{Kind: runner.EventReminder, RunID: "rq", Set: &set})
	m.Observe(runner.Event{Kind: runner.EventTurnFinished, RunID: "rq", Outcome: &executor.Outcome{Category: executor.CategoryRateLimit, CostUSD: 0.25, TurnCostUSD: 0.25}})
	fams := scrape(t, d)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"orchestrator_questions_pending", nil, 2},
		{"orchestrator_questions_asked_total", nil, 1},
		{"orchestrator_question_reminders_total", nil, 1},
		{"orchestrator_agent_errors_total", []string{"category", "rate_limit"}, 1},
		{"orchestrator_agent_cost_usd_total", nil, 0.25},
		{"orchestrator_runs_in_progress", nil, 0},
		{"orchestrator_runs_total", []string{"outcome", "done"}, 0},
		{"orchestrator_surface_api_requests_total", []string{"surface", "github", "code", "200"}, 2},
		{"orchestrator_surface_api_requests_total", []string{"surface", "github", "code", "404"}, 1},
		{"orchestrator_surface_api_request_duration_seconds", []string{"surface", "github"}, 3},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	resp1 := questions.Response{SetID: set.ID, By: "@octocat", Surface: "github", At: time.Now(),
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}, {QuestionID: "qb", Labels: []string{"B"}}}}
	if _, err := st.RecordAnswer(ctx, resp1); err != nil {
		t.Fatal(err)
	}
	m.Observe(runner.Event{Kind: runner.EventAnswer, RunID: "rq", Set: &set, Response: &resp1})
	m.Observe(runner.Event{Kind: runner.EventAnswer, RunID: "rq", Set: &set, Response: &resp1}) // once per set
	failed := store.Run{ID: "rq", Status: store.RunFailed}
	m.Observe(runner.Event{Kind: runner.EventRunEnded, RunID: "rq", Run: &failed})
	fams = scrape(t, d)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"orchestrator_questions_pending", nil, 0},
		{"orchestrator_answers_total", []string{"surface", "github"}, 1},
		{"orchestrator_answer_latency_seconds", []string{"surface", "github"}, 1},
		{"orchestrator_runs_total", []string{"outcome", "failed"}, 1},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// newWaitingRun stores a run whose first turn asked a set of the given
// questions.
func newWaitingRun(t *testing.T, st *store.Store, runID string, qids ...string) questions.Set {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateRun(ctx, store.Run{ID: runID, Prompt: "do it", Surfaces: []string{"terminal"}}); err != nil {
		t.Fatal(err)
	}
	turn, err := st.BeginTurn(ctx, store.Turn{RunID: runID, Kind: store.TurnStart, Prompt: "do it", SessionID: "sess-1"})
	if err != nil {
		t.Fatal(err)
	}
	set := questions.Set{ID: runID + "-s1", RunID: runID, Turn: turn.Seq}
	for _, id := range qids {
		set.Questions = append(set.Questions, questions.Question{ID: id, Text: "Which " + id + "?",
			Options: []questions.Option{{Label: "A"}, {Label: "B"}}})
	}
	if err := st.FinishTurn(ctx, runID, turn.Seq, store.TurnResult{Status: "success", SessionID: "sess-1"}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
	return set
}

func TestMetricsWithoutStore(t *testing.T) {
	t.Parallel()
	m := NewMetrics(nil)
	set := questions.Set{ID: "s1", RunID: "r1", Questions: []questions.Question{{ID: "qa", Text: "A?"}, {ID: "qb", Text: "B?"}}}
	partial := questions.Response{SetID: "s1", Surface: "spec", Answers: []questions.Answer{{QuestionID: "qa", Text: "x"}}}
	full := questions.Response{SetID: "s1", Surface: "terminal", At: time.Now().Add(time.Hour),
		Answers: []questions.Answer{{QuestionID: "qa", Text: "x"}, {QuestionID: "qb", Text: "y"}}}
	m.Observe(runner.Event{Kind: runner.EventAnswer, RunID: "r1", Set: &set, Response: &partial}) // a preset for qa
	m.Observe(runner.Event{Kind: runner.EventQuestion, RunID: "r1", Set: &set})
	if got := m.pendingQuestions(); got != 1 {
		t.Fatalf("pending = %v, want 1 set", got)
	}
	m.Observe(runner.Event{Kind: runner.EventAnswer, RunID: "r1", Set: &set, Response: &full})
	if got := m.pendingQuestions(); got != 0 {
		t.Fatalf("pending after the answer = %v", got)
	}
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	if v := value(byName, "orchestrator_answers_total", "surface", "terminal"); v != 1 {
		t.Errorf("answers{terminal} = %v", v)
	}
	if v := value(byName, "orchestrator_answers_total", "surface", "spec"); v != -1 {
		t.Errorf("a partial preset answer counted: %v", v)
	}
	h := byName["orchestrator_answer_latency_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() < 3000 {
		t.Errorf("latency = %d samples, sum %v; want 1 of about an hour", h.GetSampleCount(), h.GetSampleSum())
	}
	m.Observe(runner.Event{Kind: runner.EventRunEnded, RunID: "r1", Run: &store.Run{ID: "r1", Status: store.RunWaiting}})
	m.mu.Lock()
	n := len(m.sets)
	m.mu.Unlock()
	if n != 0 {
		t.Errorf("%d sets remembered after the run ended", n)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	f := newFakeRuns(st, "")
	ok := http.NotFoundHandler()
	for _, c := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"nothing", Config{}, []string{"no Runs", "no Store"}},
		{"specs without NewRun", Config{Runs: f, Store: st, Specs: []specs.Spec{{Name: "a"}}}, []string{"no NewRun"}},
		{"bad catch-up and limit", Config{Runs: f, Store: st, CatchUp: "twice", MaxConcurrent: -1}, []string{"serve.catch_up", "serve.max_concurrent_runs"}},
		{"bad schedule, duplicate name", Config{Runs: f, Store: st, NewRun: specRun, Specs: []specs.Spec{
			{Name: "a", Path: "a.md", Schedule: "every day"}, {Name: "b", Path: "b.md"}, {Name: "b", Path: "c.md"}}},
			[]string{"a.md", "every day", "c.md", `"b" is used twice`}},
		{"handler clashes with healthz", Config{Runs: f, Store: st, Handlers: map[string]http.Handler{"/healthz": ok}}, []string{`handler "/healthz"`}},
		{"bad pattern", Config{Runs: f, Store: st, Handlers: map[string]http.Handler{"/a/{x": ok}}, []string{`handler "/a/{x"`}},
		{"nil handler", Config{Runs: f, Store: st, Handlers: map[string]http.Handler{"/hook": nil}}, []string{`handler "/hook": nil`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, err := New(c.cfg)
			if err == nil {
				t.Fatalf("New = %v, want an error", d)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestListenError(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	d, err := New(Config{Runs: newFakeRuns(st, ""), Store: st, Listen: "127.0.0.1:notaport"})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listen on 127.0.0.1:notaport") {
		t.Fatalf("Run = %v", err)
	}
	lock, err := st.LockDaemon()
	if err != nil {
		t.Fatalf("the daemon lock was not released: %v", err)
	}
	lock.Unlock()
}

// TestAdoptsRunsNoProcessDrives: a run left waiting or interrupted by a
// process that exited after the daemon started is adopted; a run another
// process drives, and a run just created (status running, fresh), are not.
func TestAdoptsRunsNoProcessDrives(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	f := newFakeRuns(st, "")
	d, err := New(Config{Runs: f, Store: st, AdoptEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	lock, err := st.LockRun("elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	createRun(t, st, "elsewhere", "", store.RunWaiting)
	createRun(t, st, "fresh", "", store.RunRunning)
	createRun(t, st, "left-waiting", "", store.RunWaiting)
	createRun(t, st, "left-interrupted", "", store.RunInterrupted)
	createRun(t, st, "submitted", "", store.RunQueued) // `orchestrator submit`
	got := []string{f.next(t).runID, f.next(t).runID}
	slices.Sort(got)
	// left-waiting is parked: the ask room asks it; it is driven once
	// answered (TestAnswerResumesARunLeftWaitingWhileServing).
	if want := []string{"left-interrupted", "submitted"}; !slices.Equal(got, want) {
		t.Fatalf("adopted %v, want %v", got, want)
	}
	time.Sleep(100 * time.Millisecond) // a few more looks
	if want := []string{"left-interrupted", "submitted"}; !slices.Equal(d.Running(), want) {
		t.Fatalf("Running() = %v, want %v", d.Running(), want)
	}
}

// failingRuns fails every drive at once, as a store error would.
type failingRuns struct {
	fakeRuns
	drives atomic.Int64
}

func (f *failingRuns) Drive(ctx context.Context, runID string) (store.Run, error) {
	f.drives.Add(1)
	run, _ := f.st.Run(ctx, runID)
	return run, errors.New("database is locked")
}

// TestHealthzReportsUndrivenRuns: a run whose drive keeps failing is
// adopted again after a backoff, and meanwhile /healthz says "degraded"
// naming it and orchestrator_runs_undriven counts it.
func TestHealthzReportsUndrivenRuns(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	createRun(t, st, "stuck", "", store.RunInterrupted)
	f := &failingRuns{fakeRuns: *newFakeRuns(st, "")}
	d, err := New(Config{Runs: f, Store: st, Listen: "127.0.0.1:0", AdoptEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	deadline := time.Now().Add(wait)
	// The run is adopted again every time its backoff ends, so /healthz and
	// the gauge are read until both say so one right after the other.
	for {
		code, h := health(t, d)
		degraded := code == http.StatusOK && h.Status == "degraded" && slices.Equal(h.Undriven, []string{"stuck"})
		if degraded {
			// Monitoring's endpoint tells degraded apart by its code; the
			// load balancer's (/healthz) stays 200.
			if scode, body := get(t, "http://"+d.Addr()+"/statusz"); scode != http.StatusServiceUnavailable || !strings.Contains(body, `"degraded"`) {
				if scode != http.StatusOK { // the run may have been adopted again meanwhile
					t.Fatalf("/statusz while degraded = %d %s, want 503", scode, body)
				}
			} else if got := value(scrape(t, d), "orchestrator_runs_undriven"); got == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz = %d %+v, want degraded naming the stuck run, with orchestrator_runs_undriven = 1", code, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for f.drives.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the failed run was never driven again")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMetricsByKind: the kinds of question set are counted apart.
func TestMetricsByKind(t *testing.T) {
	t.Parallel()
	m := NewMetrics(nil)
	marker := questions.Set{ID: "s1", RunID: "r1", Questions: []questions.Question{{ID: "qa", Text: "A?"}}}
	approval := questions.ApprovalSet("r1", 1, questions.ToolCall{ToolUseID: "t1", Tool: "Bash", Input: []byte(`{"command":"touch x"}`)})
	for _, set := range []*questions.Set{&marker, &approval} {
		m.Observe(runner.Event{Kind: runner.EventQuestion, RunID: "r1", Set: set})
	}
	a, _ := questions.ParseQuestionAnswer(approval.Questions[0], "Allow once")
	resp := questions.Response{SetID: approval.ID, Surface: "terminal", Answers: []questions.Answer{a}}
	m.Observe(runner.Event{Kind: runner.EventAnswer, RunID: "r1", Set: &approval, Response: &resp})
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	for _, c := range []struct {
		name, kind string
		want       float64
	}{
		{"orchestrator_questions_asked_by_kind_total", "marker", 1},
		{"orchestrator_questions_asked_by_kind_total", "approval", 1},
		{"orchestrator_questions_asked_by_kind_total", "ask_tool", 0},
		{"orchestrator_answers_by_kind_total", "approval", 1},
		{"orchestrator_answers_by_kind_total", "marker", 0},
	} {
		if v := value(byName, c.name, "kind", c.kind); v != c.want {
			t.Errorf("%s{kind=%s} = %v, want %v", c.name, c.kind, v, c.want)
		}
	}
}

func TestShutdownClosesAStreamLeftOpen(t *testing.T) {
	t.Parallel()
	st := openStore(t, t.TempDir())
	f := newFakeRuns(st, "")
	streaming := make(chan struct{})
	// Like the web inbox's live run view: the response streams until the
	// client goes away.
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": open\n\n")
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done()
	})
	d, err := New(Config{Runs: f, Store: st, Listen: "127.0.0.1:0",
		Handlers: map[string]http.Handler{"GET /events": stream}})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, d)
	resp, err := http.Get("http://" + d.Addr() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming
	if err := s.stop(t); err != nil {
		t.Errorf("Run = %v, want nil: a stream left open is closed, not a failure", err)
	}
	// The server closed the connection: reading the stream ends instead
	// of hanging.
	io.ReadAll(resp.Body)
}
