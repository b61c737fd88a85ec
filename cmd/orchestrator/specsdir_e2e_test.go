package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// servingMain is an in-process `orchestrator serve` of a test.
type servingMain struct {
	base string // http://addr
	out  *lockedBuffer
	stop func() int // shuts serve down and returns its exit code
}

// startServe starts `serve` with the e2e's config; its terminal never gets
// input.
func startServe(t *testing.T, e *e2e) *servingMain {
	t.Helper()
	stdin, stdinW := io.Pipe()
	t.Cleanup(func() { stdinW.Close() })
	out := &lockedBuffer{}
	addr := make(chan string, 1)
	m := &Main{Stdin: stdin, Stdout: out, Stderr: out, Dir: filepath.Join(e.dir, "work"),
		LookupEnv: func(string) (string, bool) { return "", false }, serveReady: func(a string) { addr <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- m.Exec(ctx, []string{"--config", e.config, "serve"}) }()
	s := &servingMain{out: out}
	stopped := -1
	s.stop = func() int {
		if stopped >= 0 {
			return stopped
		}
		cancel()
		select {
		case stopped = <-code:
		case <-time.After(time.Minute):
			t.Fatal("serve did not stop")
		}
		return stopped
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("serve output:\n%s", out.String())
		}
	})
	select {
	case a := <-addr:
		s.base = "http://" + a
	case c := <-code:
		stopped = c
		t.Fatalf("serve exited %d at start:\n%s", c, out.String())
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	return s
}

func (s *servingMain) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric is the value of the sample of name with exactly labels in
// /metrics; -1 when there is none.
func (s *servingMain) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	code, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
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
		if match {
			return sampleValue(m)
		}
	}
	return -1
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func writeSpec(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp" // saved as editors do: never half a file
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func runsOf(t *testing.T, st *store.Store, spec string, status ...store.RunStatus) []store.Run {
	t.Helper()
	runs, err := st.ListRuns(context.Background(), store.RunFilter{Spec: spec, Status: status})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestServeWithoutSpecsFolderStarts: serve starts with no specs folder,
// says so, and serves /healthz.
func TestServeWithoutSpecsFolderStarts(t *testing.T) {
	t.Parallel()
	tm := newTestMain(t)
	tm.write(t, DefaultConfigFile, "state_dir: state\nsurfaces:\n  terminal:\n    enabled: false\nserve:\n  listen: 127.0.0.1:0\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var health string
	tm.serveReady = func(addr string) {
		defer cancel()
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			health = err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		health = string(b)
	}
	if code := tm.Exec(ctx, []string{"serve"}); code != exitOK {
		t.Fatalf("serve without a specs folder: exit %d\n%s", code, tm.stderr.String())
	}
	if !strings.Contains(health, `"status":"ok"`) {
		t.Errorf("/healthz = %s", health)
	}
	if want := "no specs folder"; !strings.Contains(tm.stderr.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, tm.stderr.String())
	}
}

// TestServeSpecAddedWhileServingTicks: serve starts without a specs
// folder; a spec put there ticks every second and its runs finish;
// /metrics has the spec's runs, cost and last success; the spec edited to
// be invalid is reported on /healthz with file:line and its last good
// version keeps ticking; removed, it ticks no more.
func TestServeSpecAddedWhileServingTicks(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeapi.Rule{When: "Nightly check", Reply: fakeapi.Reply{Text: "All green."}})
	specDir := filepath.Join(e.dir, "specs")
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n  min_schedule_interval: 1s\n", specDir))
	s := startServe(t, e)
	st := e.store()

	spec := filepath.Join(specDir, "nightly.md")
	writeSpec(t, spec, "---\nname: nightly\nschedule: \"@every 1s\"\nsurfaces: [terminal]\n---\nNightly check\n")
	waitFor(t, "a run of the added spec to finish", func() bool { return len(runsOf(t, st, "nightly", store.RunDone)) >= 1 })
	if r := runsOf(t, st, "nightly", store.RunDone)[0]; r.FinalText != "All green." {
		t.Fatalf("run = %+v", r)
	}
	if v := s.metric(t, "orchestrator_spec_runs_total", "spec", "nightly", "outcome", "done"); v < 1 {
		t.Errorf(`orchestrator_spec_runs_total{spec="nightly",outcome="done"} = %v`, v)
	}
	if v := s.metric(t, "orchestrator_spec_cost_usd_total", "spec", "nightly"); v < 0 {
		t.Errorf(`orchestrator_spec_cost_usd_total{spec="nightly"} missing`)
	}
	last := s.metric(t, "orchestrator_spec_last_success_timestamp_seconds", "spec", "nightly")
	if now := float64(time.Now().Unix()); last < now-120 || last > now+1 {
		t.Errorf(`orchestrator_spec_last_success_timestamp_seconds{spec="nightly"} = %v, now %v`, last, now)
	}

	// Edited to be invalid: reported with file:line, the last good
	// version keeps ticking.
	writeSpec(t, spec, "---\nname: nightly\nschedule: \"@every 1s\"\nsurfaces: [terminal]\nmodle: opus\n---\nNightly check, edited\n")
	waitFor(t, "/healthz to report the invalid spec", func() bool {
		_, body := s.get(t, "/healthz")
		return strings.Contains(body, `"status":"degraded"`) && strings.Contains(body, "nightly.md:5: modle")
	})
	before := len(runsOf(t, st, "nightly", store.RunDone))
	waitFor(t, "the last good version to tick again", func() bool { return len(runsOf(t, st, "nightly", store.RunDone)) > before })
	for _, r := range runsOf(t, st, "nightly") {
		if r.Prompt != "Nightly check" {
			t.Fatalf("run %s has prompt %q: the invalid version ran", r.ID, r.Prompt)
		}
	}
	if v := s.metric(t, "orchestrator_spec_problems"); v != 1 {
		t.Errorf("orchestrator_spec_problems = %v, want 1", v)
	}

	// Removed: no more runs once the one in flight, if any, ended.
	if err := os.Remove(spec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removal to be seen", func() bool { return strings.Contains(s.out.String(), "spec file removed") })
	waitFor(t, "no run in flight", func() bool { return len(runsOf(t, st, "nightly", store.RunRunning, store.RunWaiting)) == 0 })
	n := len(runsOf(t, st, "nightly"))
	time.Sleep(3 * time.Second)
	if m := len(runsOf(t, st, "nightly")); m > n+1 {
		t.Errorf("%d runs started after the spec was removed", m-n)
	}
	if code, body := s.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz after the removal = %d %s", code, body)
	}
	if c := s.stop(); c != exitOK {
		t.Fatalf("serve exited %d after shutdown, want 0", c)
	}
}

// TestServeAdoptsStrayAnsweredRun: a foreground `run` exits 3 with its
// question waiting (its terminal's input ended) while serve runs; the
// question is answered with `orchestrator answer`; serve drives the run to
// its end without anyone typing `resume`, and the model gets the answer
// once. The run, of a prompt, counts under spec="" in /metrics.
func TestServeAdoptsStrayAnsweredRun(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\nserve:\n  listen: 127.0.0.1:0\n", filepath.Join(e.dir, "no-specs")))
	s := startServe(t, e)
	if code, _, _ := e.run("", "run", "--prompt", "Implement spec X"); code != exitWaiting {
		t.Fatalf("run: exit %d, want %d (waiting)", code, exitWaiting)
	}
	run := e.onlyRun()
	sets, err := e.store().QuestionSets(context.Background(), store.SetFilter{RunID: run.ID, State: []store.SetState{store.SetPending}})
	if err != nil || len(sets) != 1 {
		t.Fatalf("pending sets = %+v, %v", sets, err)
	}
	if code, _, _ := e.run("", "answer", sets[0].Set.Questions[0].ID, "2"); code != exitOK {
		t.Fatalf("answer: exit %d", code)
	}
	st := e.store()
	waitFor(t, "serve to finish the run", func() bool {
		r, err := st.Run(context.Background(), run.ID)
		return err == nil && r.Status == store.RunDone
	})
	if r, _ := st.Run(context.Background(), run.ID); r.FinalText != "Implemented with JWT." {
		t.Errorf("final text %q", r.FinalText)
	}
	if n := e.answerRequests(); n != 1 {
		t.Errorf("answers sent %d times, want 1", n)
	}
	if !strings.Contains(s.out.String(), "adopting a run no process drives") && !strings.Contains(s.out.String(), "taking up run") {
		t.Errorf("serve did not log adopting the run")
	}
	// The run is counted when its drive ends, just after it is recorded
	// done.
	waitFor(t, `orchestrator_spec_runs_total{spec="",outcome="done"} = 1`, func() bool {
		return s.metric(t, "orchestrator_spec_runs_total", "spec", "", "outcome", "done") == 1
	})
}

// TestRunSpecByName: `run NAME` runs the spec of that name in specs.dir;
// an unknown name is an error listing the known ones.
func TestRunSpecByName(t *testing.T) {
	t.Parallel()
	e := newE2E(t, standardRules(0)...)
	specDir := filepath.Join(e.dir, "specs")
	writeSpec(t, filepath.Join(specDir, "auth.md"), "---\nname: add-auth\nsurfaces: [terminal]\n---\nImplement spec X\n")
	writeSpec(t, filepath.Join(specDir, "docs.md"), "---\n---\nWrite the docs\n")
	e.writeConfig(fmt.Sprintf("specs:\n  dir: %q\n", specDir))
	code, out, _ := e.run("2\n", "run", "add-auth")
	if code != exitOK || !strings.Contains(out, "Implemented with JWT.") {
		t.Fatalf("run add-auth: exit %d", code)
	}
	if r := e.onlyRun(); r.Spec != "add-auth" || r.Status != store.RunDone {
		t.Fatalf("run = %+v", r)
	}
	code, _, errs := e.run("", "run", "add-oauth")
	if code != exitUsage || !strings.Contains(errs, `no spec named "add-oauth"`) || !strings.Contains(errs, "known specs: add-auth, docs") {
		t.Fatalf("run add-oauth: exit %d, stderr %q; want 2 and the known names", code, errs)
	}
}
