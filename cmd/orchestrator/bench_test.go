package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// The whole-program benchmarks: the orchestrator as a separate process (this
// test binary, see TestMain), the real Claude Code CLI, the fake Messages API
// on loopback. `make bench` runs them; the targets they measure against are
// in the doc comment of each.
//
// They read /proc, so they run on Linux only. Memory is read from
// /proc/<pid>/status of the orchestrator process itself: VmHWM is its own
// peak resident set, which its CLI children never count in (unlike
// ru_maxrss after Wait4, which includes the reaped children).

// benchPrompt is a task the fake answers with plain text: one turn, no
// question.
const benchPrompt = "Say hello and stop"

// benchTimeout bounds each step of a benchmark; generous for a loaded machine.
const benchTimeout = 3 * time.Minute

// benchEnv is the fake API, a configuration pointing the agent at it, and a
// state directory: newE2E's world for benchmarks.
type benchEnv struct {
	tb     testing.TB
	fake   *fakeapi.Server
	cliEnv map[string]string // the CLI's environment; its HOME is shared by every CLI run here
	dir    string
	config string
	state  string
	work   string // the agent's working directory
	// shellEnv and claude are the bare CLI's environment and path (bareCLI).
	shellEnv []string
	// exec is the executor of the configuration (sameCLICmd).
	exec   *executor.Executor
	claude string
}

// benchEnvOptions are the knobs of newBenchEnv.
type benchEnvOptions struct {
	// Command is agent.command; "" is the real CLI.
	Command string
	// Extra is more YAML appended to the configuration.
	Extra string
}

func newBenchEnv(tb testing.TB, o benchEnvOptions, rules ...fakeapi.Rule) *benchEnv {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	claude := clitest.Claude(tb)
	if o.Command == "" {
		o.Command = claude
	}
	f := fakeapi.New(rules...)
	url, err := f.Start("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	dir := tb.TempDir()
	e := &benchEnv{tb: tb, fake: f, cliEnv: clitest.Env(tb, url), dir: dir,
		config: filepath.Join(dir, "orchestrator.yaml"), state: filepath.Join(dir, "state")}
	// The bare CLI of clitest.Command runs in $HOME/project: so does the
	// orchestrator's, for a fair comparison.
	e.work = filepath.Join(e.cliEnv["HOME"], "project")
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "state_dir: %q\nagent:\n  command: %q\n  timeout: 2m\n  workdir: %q\n  env:\n", e.state, o.Command, e.work)
	for k, v := range e.cliEnv {
		fmt.Fprintf(&b, "    %s: %q\n", k, v)
	}
	b.WriteString("run:\n  rate_limit_backoff: 1s\nsurfaces:\n  terminal:\n    enabled: true\n")
	b.WriteString(o.Extra)
	if err := os.WriteFile(e.config, []byte(b.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return e
}

// child returns the orchestrator as a separate process (this test binary)
// running args; its output goes to out.
func (e *benchEnv) child(out io.Writer, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"--config", e.config}, args...)...)
	cmd.Dir = e.work
	cmd.Env = append(os.Environ(), envChild+"=1")
	cmd.Stdout, cmd.Stderr = out, out
	return cmd
}

// bareCLI runs the CLI without the orchestrator: a print-mode stream-json
// run of prompt on the same fake, started the way a person would start it
// from the same shell — with the environment the orchestrator hands its CLI
// (the shell's, plus the fake's variables). A minimal environment would not
// be a fair comparison: on this machine the CA-bundle variables alone cost
// the CLI ~20 ms at start.
func (e *benchEnv) bareCLI(prompt string) time.Duration {
	e.tb.Helper()
	if e.shellEnv == nil {
		m := &Main{Stderr: io.Discard, Dir: e.work, LookupEnv: func(string) (string, bool) { return "", false }, configFlag: e.config}
		if err := m.loadConfig(true); err != nil {
			e.tb.Fatal(err)
		}
		ex, err := executor.New(m.executorConfig(nil, nil))
		if err != nil {
			e.tb.Fatal(err)
		}
		e.shellEnv, e.claude = ex.Environ(), m.Config.Agent.Command
	}
	cmd := exec.Command(e.claude, "-p", "--output-format", "stream-json", "--verbose", "--", prompt)
	cmd.Env, cmd.Dir = e.shellEnv, e.work
	return e.time(cmd)
}

// time runs a CLI command, returns its wall time, and fails on a bad exit
// or a missing result.
func (e *benchEnv) time(cmd *exec.Cmd) time.Duration {
	e.tb.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		e.tb.Fatalf("CLI %q: %v\n%s", cmd.Args, err, out.String())
	}
	clitest.Result(e.tb, out.Bytes())
	return took
}

// orchestratorRun runs `orchestrator run --prompt prompt` as a child
// process and returns its wall time and its own peak resident set in bytes.
func (e *benchEnv) orchestratorRun(prompt string) (time.Duration, int64) {
	e.tb.Helper()
	var out bytes.Buffer
	cmd := e.child(&out, "run", "--prompt", prompt)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		e.tb.Fatal(err)
	}
	mem := watchMemory(cmd.Process.Pid)
	err := cmd.Wait()
	took := time.Since(start)
	peak := mem.stop()
	if err != nil {
		e.tb.Fatalf("orchestrator run: %v\n%s", err, out.String())
	}
	return took, peak.hwm
}

// procMemory is what watchMemory saw of a process: the highest VmHWM and VmRSS
// read from /proc/<pid>/status, in bytes.
type procMemory struct{ hwm, rss int64 }

type memoryWatch struct {
	done chan struct{}
	got  chan procMemory
}

// watchMemory samples a process's memory every few milliseconds until stop.
// VmHWM is the kernel's own high-water mark of the process, so sampling only
// has to catch its last value before the process exits.
func watchMemory(pid int) *memoryWatch {
	w := &memoryWatch{done: make(chan struct{}), got: make(chan procMemory, 1)}
	go func() {
		var peak procMemory
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := readMemory(pid); err == nil {
				peak.hwm, peak.rss = max(peak.hwm, m.hwm), max(peak.rss, m.rss)
			}
			select {
			case <-w.done:
				w.got <- peak
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *memoryWatch) stop() procMemory {
	close(w.done)
	return <-w.got
}

// readMemory reads VmHWM and VmRSS of a process. A process that has exited
// (a zombie has no memory lines) is an error.
func readMemory(pid int) (procMemory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, err
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus reads the VmHWM and VmRSS lines ("VmHWM:   12345 kB") of a
// /proc/<pid>/status file.
func parseStatus(r io.Reader) (procMemory, error) {
	var m procMemory
	var seen int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return procMemory{}, fmt.Errorf("proc status: %s: unexpected value %q", name, value)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return procMemory{}, fmt.Errorf("proc status: %s: %w", name, err)
		}
		if name == "VmHWM" {
			m.hwm = kb << 10
		} else {
			m.rss = kb << 10
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		return procMemory{}, fmt.Errorf("proc status: %w", err)
	}
	if seen != 2 {
		return procMemory{}, errors.New("proc status: no VmHWM and VmRSS (has the process exited?)")
	}
	return m, nil
}

func mebibytes(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkRunVsBareCLI compares the wall time of `orchestrator run` (one
// turn, no question) with the bare `claude -p` it wraps, on the same fake,
// and reads the orchestrator's own peak resident set meanwhile.
//
// Targets: orchestrator/bare ≤ 1.05; orchestrator-peak-RSS-MB ≤ 30.
//
// One op is runRounds rounds of three runs, in rotating order so that none
// always runs on a warmer machine: the bare CLI (`claude -p --output-format
// stream-json --verbose -- PROMPT` in clitest's environment), the CLI started
// exactly as the orchestrator starts it (its question protocol as
// --append-system-prompt, --session-id, --permission-mode, and the
// environment it builds: "same-args"), and `orchestrator run`.
// On a shared machine single runs vary a lot: the times reported are
// medians, and the ratios those of the medians. overhead-ms is the
// orchestrator's wall time minus the span of its CLI turn as its store
// recorded it (process start, configuration, store, exit):
// orchestrator/same-args is the orchestrator's own cost, same-args/bare
// the cost of how it starts the CLI.
func BenchmarkRunVsBareCLI(b *testing.B) {
	e := newBenchEnv(b, benchEnvOptions{})
	sameCLI := e.sameCLI(benchPrompt)
	// Warm the page cache for both programs before measuring.
	e.bareCLI(benchPrompt)
	e.orchestratorRun(benchPrompt)
	b.ResetTimer()
	var bare, same, orch, overhead []time.Duration
	var peak int64
	steps := []func(){
		func() { bare = append(bare, e.bareCLI(benchPrompt)) },
		func() { same = append(same, sameCLI()) },
		func() {
			d, hwm := e.orchestratorRun(benchPrompt)
			orch = append(orch, d)
			overhead = append(overhead, d-e.lastTurnSpan())
			peak = max(peak, hwm)
		},
	}
	for i := 0; i < b.N; i++ {
		for round := range runRounds {
			for k := range steps {
				steps[(round+k)%len(steps)]()
			}
		}
	}
	b.StopTimer()
	b.Logf("bare CLI runs: %v", bare)
	b.Logf("same-args CLI runs: %v", same)
	b.Logf("orchestrator runs: %v", orch)
	b.Logf("orchestrator overhead: %v", overhead)
	medBare, medSame, medOrch := percentile(bare, 50), percentile(same, 50), percentile(orch, 50)
	b.ReportMetric(millis(medBare), "bare-ms")
	b.ReportMetric(millis(medSame), "same-args-ms")
	b.ReportMetric(millis(medOrch), "orchestrator-ms")
	b.ReportMetric(float64(medOrch)/float64(medBare), "orchestrator/bare")
	b.ReportMetric(float64(medOrch)/float64(medSame), "orchestrator/same-args")
	b.ReportMetric(millis(percentile(overhead, 50)), "overhead-ms")
	b.ReportMetric(mebibytes(peak), "orchestrator-peak-RSS-MB")
}

// sameCLI returns a function that runs the CLI exactly as the orchestrator
// starts a run's first turn of prompt — its arguments and environment, from
// its own wiring (executor.Args, executor.Environ) — each time with a new
// session ID, and returns the wall time.
func (e *benchEnv) sameCLI(prompt string) func() time.Duration {
	e.tb.Helper()
	m := &Main{Stderr: io.Discard, Dir: e.work, LookupEnv: func(string) (string, bool) { return "", false }, configFlag: e.config}
	if err := m.loadConfig(true); err != nil {
		e.tb.Fatal(err)
	}
	ex, err := executor.New(m.executorConfig(nil, nil))
	if err != nil {
		e.tb.Fatal(err)
	}
	env := ex.Environ()
	return func() time.Duration {
		e.tb.Helper()
		var id [16]byte
		rand.Read(id[:]) //nolint:errcheck // crypto/rand.Read never fails
		id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
		h := hex.EncodeToString(id[:])
		session := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		cmd := exec.Command(m.Config.Agent.Command, ex.Args(executor.Request{Prompt: prompt, SessionID: session, WorkDir: e.work})...)
		cmd.Env, cmd.Dir = env, e.work
		return e.time(cmd)
	}
}

// runRounds is how many rounds of runs BenchmarkRunVsBareCLI makes per op.
const runRounds = 8

// lastTurnSpan returns how long the newest run's last turn took, from its
// start (just before the CLI is spawned) to its end (stored after the CLI
// exited).
func (e *benchEnv) lastTurnSpan() time.Duration {
	e.tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, e.state)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListRuns(ctx, store.RunFilter{Limit: 1})
	if err != nil || len(runs) != 1 {
		e.tb.Fatalf("newest run: %v, %v", runs, err)
	}
	t, ok, err := st.LastTurn(ctx, runs[0].ID)
	if err != nil || !ok || !t.Finished {
		e.tb.Fatalf("last turn of run %s: %+v, %v", runs[0].ID, t, err)
	}
	return t.FinishedAt.Sub(t.StartedAt)
}

// percentile returns the p-th percentile (0..100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// answerRounds is how many questions BenchmarkAnswerToResume answers per op,
// within one run (each answer's reply asks the next question).
const answerRounds = 10

// spawnLog is the wrapper script the agent command is replaced with: it
// appends the time it started to a file, then execs the real CLI. bash's
// EPOCHREALTIME costs no extra process; without bash, date(1) does. The
// version check a run makes of a new binary (--version) is no spawn.
func spawnLog(tb testing.TB, claude string) (script, log string) {
	tb.Helper()
	dir := tb.TempDir()
	script, log = filepath.Join(dir, "claude-wrapper"), filepath.Join(dir, "spawns")
	var body string
	if bash, err := exec.LookPath("bash"); err == nil {
		body = fmt.Sprintf("#!%s\n[ \"$1\" = --version ] || echo \"$EPOCHREALTIME\" >> %s\nexec %s \"$@\"\n", bash, shellQuote(log), shellQuote(claude))
	} else {
		body = fmt.Sprintf("#!/bin/sh\n[ \"$1\" = --version ] || date +%%s.%%N >> %s\nexec %s \"$@\"\n", shellQuote(log), shellQuote(claude))
	}
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		tb.Fatal(err)
	}
	return script, log
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// readSpawns reads the start times the wrapper logged.
func readSpawns(log string) ([]time.Time, error) {
	data, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for _, line := range strings.Fields(string(data)) {
		t, err := parseEpoch(line)
		if err != nil {
			return nil, fmt.Errorf("spawn log %s: %w", log, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseEpoch parses a time the wrapper logged: Unix seconds, a dot and a
// fraction of 6 (EPOCHREALTIME) or 9 (date %N) digits.
func parseEpoch(v string) (time.Time, error) {
	sec, frac, _ := strings.Cut(v, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns, err2 := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("bad time %q", v)
	}
	return time.Unix(s, ns), nil
}

// BenchmarkAnswerToResume measures how long after `orchestrator answer`
// starts the waiting orchestrator process has spawned the resumed CLI.
//
// Target: answer-to-spawn p50 ≤ 100 ms.
//
// An orchestrator child runs a task whose every turn asks a question; its
// terminal stays open and is never answered. Each round, once the question
// is pending and shown, `answer QID 2` runs in this process (Main.Exec, as
// the command would, minus the process start) and the clock stops when the
// agent command — a wrapper that logs its start time, then execs the real
// CLI — starts. One op is answerRounds rounds.
//
// Metrics: p50-ms and p90-ms, answer start → resumed CLI started;
// claimed-p50-ms, answer start → the answer turn's row (the set claimed,
// written just before the spawn); answer-cmd-p50-ms, the answer command
// alone. The waiting process notices an answer from another process by the
// poke the answer's commit writes under <state>/wake (store/wait.go), the
// slow poll being only the fallback.
func BenchmarkAnswerToResume(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	script, log := spawnLog(b, clitest.Claude(b))
	var latencies, claims, answerCmd []time.Duration
	var peak int64
	for i := 0; i < b.N; i++ {
		if err := os.Remove(log); err != nil && !errors.Is(err, os.ErrNotExist) {
			b.Fatal(err)
		}
		lat, claim, cmdTimes, hwm := answerRoundsOnce(b, script, log)
		latencies = append(latencies, lat...)
		claims = append(claims, claim...)
		answerCmd = append(answerCmd, cmdTimes...)
		peak = max(peak, hwm)
	}
	b.StopTimer()
	b.Logf("answer → resumed CLI spawned: %v", latencies)
	b.ReportMetric(millis(percentile(latencies, 50)), "p50-ms")
	b.ReportMetric(millis(percentile(latencies, 90)), "p90-ms")
	b.ReportMetric(millis(percentile(answerCmd, 50)), "answer-cmd-p50-ms")
	b.ReportMetric(millis(percentile(claims, 50)), "claimed-p50-ms")
	b.ReportMetric(mebibytes(peak), "orchestrator-peak-RSS-MB")
}

// answerRoundsOnce runs one orchestrator child through answerRounds question
// rounds and returns the answer → spawn latencies, the time the answer
// command itself took, and the child's peak resident set.
func answerRoundsOnce(b *testing.B, script, log string) (lat, claim, answerCmd []time.Duration, hwm int64) {
	b.Helper()
	question := fakeapi.Reply{Text: "I need a decision.\n" + authMarker}
	e := newBenchEnv(b, benchEnvOptions{Command: script},
		fakeapi.Rule{When: "Implement spec X", Reply: question},
		fakeapi.Rule{When: answerRule, Times: answerRounds - 1, Reply: question},
		fakeapi.Rule{When: answerRule, Reply: fakeapi.Reply{Text: "Implemented."}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()

	out := newWatchedBuffer()
	cmd := e.child(out, "run", "--prompt", "Implement spec X")
	stdin, err := cmd.StdinPipe() // open and silent: the terminal never answers
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	mem := watchMemory(cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if b.Failed() {
			b.Logf("orchestrator output:\n%s", out.String())
		}
	}()

	st, err := store.Open(ctx, e.state)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for round := 1; round <= answerRounds; round++ {
		// Wait, untimed, for the question of this round to be pending and
		// on the terminal: the process is then waiting for its answer.
		if err := out.waitCount(ctx, "Which auth method?", round, exited); err != nil {
			b.Fatalf("round %d: the question was never asked: %v", round, err)
		}
		set, err := pendingSet(ctx, st)
		if err != nil {
			b.Fatalf("round %d: %v", round, err)
		}
		var answerOut bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &answerOut, Stderr: &answerOut, Dir: e.work,
			LookupEnv: func(string) (string, bool) { return "", false }}
		start := time.Now()
		code := m.Exec(ctx, []string{"--config", e.config, "answer", set.Questions[0].ID, "2"})
		answerCmd = append(answerCmd, time.Since(start))
		if code != 0 {
			b.Fatalf("round %d: answer exit %d:\n%s", round, code, answerOut.String())
		}
		spawned, err := waitSpawn(ctx, log, round+1, exited)
		if err != nil {
			b.Fatalf("round %d: the resumed CLI was never started: %v", round, err)
		}
		lat = append(lat, spawned.Sub(start))
		claimedAt, err := answerTurnStart(ctx, st, set)
		if err != nil {
			b.Fatalf("round %d: %v", round, err)
		}
		claim = append(claim, claimedAt.Sub(start))
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			b.Fatalf("orchestrator run: %v", err)
		}
	case <-ctx.Done():
		b.Fatalf("orchestrator run did not finish: %v", ctx.Err())
	}
	_ = stdin.Close()
	return lat, claim, answerCmd, mem.stop().hwm
}

// answerTurnStart returns when the turn that carries set's answers started:
// the store writes it when the set is claimed, just before the CLI is
// spawned.
func answerTurnStart(ctx context.Context, st *store.Store, set questions.Set) (time.Time, error) {
	turns, err := st.Turns(ctx, set.RunID)
	if err != nil {
		return time.Time{}, err
	}
	for _, t := range turns {
		if t.Kind == store.TurnAnswer && t.SetID == set.ID {
			return t.StartedAt, nil
		}
	}
	return time.Time{}, fmt.Errorf("no answer turn for question set %s", set.ID)
}

// pendingSet returns the one pending question set of the state, polling
// briefly: the terminal may show a question a moment before the set is
// visible to another connection.
func pendingSet(ctx context.Context, st *store.Store) (questions.Set, error) {
	for {
		sets, err := st.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
		if err != nil {
			return questions.Set{}, err
		}
		if len(sets) == 1 && len(sets[0].Set.Questions) > 0 {
			return sets[0].Set, nil
		}
		if len(sets) > 1 {
			return questions.Set{}, fmt.Errorf("%d pending question sets, want 1", len(sets))
		}
		select {
		case <-ctx.Done():
			return questions.Set{}, fmt.Errorf("no pending question set: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitSpawn waits until the wrapper has logged n starts and returns the
// n-th. Polling only decides when to look: the time is the one logged.
func waitSpawn(ctx context.Context, log string, n int, exited <-chan error) (time.Time, error) {
	for {
		spawns, err := readSpawns(log)
		if err != nil {
			return time.Time{}, err
		}
		if len(spawns) >= n {
			return spawns[n-1], nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case err := <-exited:
			return time.Time{}, fmt.Errorf("the orchestrator exited: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
}

// watchedBuffer is a child's output that can be waited on.
type watchedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on each write
}

func newWatchedBuffer() *watchedBuffer { return &watchedBuffer{changed: make(chan struct{})} }

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
	return w.buf.Write(p)
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitCount waits until the output holds s at least n times.
func (w *watchedBuffer) waitCount(ctx context.Context, s string, n int, exited <-chan error) error {
	for {
		w.mu.Lock()
		count, changed := strings.Count(w.buf.String(), s), w.changed
		w.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			return fmt.Errorf("the orchestrator exited: %v", err)
		case <-changed:
		}
	}
}

// waitingRuns is how many runs BenchmarkWaitingRunsRSS keeps waiting at once.
const waitingRuns = 100

// BenchmarkWaitingRunsRSS measures the resident set of `orchestrator serve`
// while it drives waitingRuns runs at once, each waiting on a question.
//
// Target: waiting-RSS-MB ≤ 60.
//
// The runs are written to the state directory beforehand, each with a
// finished first turn that asked a question, so no CLI runs; serve takes
// them all up on start. They ask on no surface (only an `answer` could
// answer them): what is measured is the daemon with its HTTP server, the run
// loops, the store and its answer watcher. It reports the resident set once
// every run waits (the highest of samples over a second), the process's
// high-water mark, and what one more waiting run costs (against a serve
// with a single waiting run).
func BenchmarkWaitingRunsRSS(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	var one, many procMemory
	for i := 0; i < b.N; i++ {
		one = waitingRunsRSS(b, 1)
		many = waitingRunsRSS(b, waitingRuns)
	}
	b.StopTimer()
	b.ReportMetric(mebibytes(many.rss), "waiting-RSS-MB")
	b.ReportMetric(mebibytes(many.hwm), "peak-RSS-MB")
	b.ReportMetric(float64(many.rss-one.rss)/float64(waitingRuns-1)/1024, "KB/extra-run")
}

// waitingRunsRSS prepares n waiting runs, starts serve on them and returns
// its memory once they all wait.
func waitingRunsRSS(b *testing.B, n int) procMemory {
	b.Helper()
	ws := startWaitingServe(b, n)
	defer ws.stop(b)
	// Let the daemon wait a while, sampling.
	var got procMemory
	for range 50 {
		m, err := readMemory(ws.cmd.Process.Pid)
		if err != nil {
			b.Fatalf("read serve's memory: %v\n%s", err, ws.out.String())
		}
		got.hwm, got.rss = max(got.hwm, m.hwm), max(got.rss, m.rss)
		time.Sleep(20 * time.Millisecond)
	}
	return got
}

// waitingServe is `orchestrator serve` (a child process) driving runs that
// all wait on a question.
type waitingServe struct {
	n      int
	cmd    *exec.Cmd
	out    *watchedBuffer
	exited chan error
	addr   string // its HTTP address
	ctx    context.Context
	cancel context.CancelFunc
}

// startWaitingServe prepares n waiting runs, starts serve on them and
// returns once every run waits.
func startWaitingServe(b *testing.B, n int) *waitingServe {
	b.Helper()
	dir := b.TempDir()
	state := filepath.Join(dir, "state")
	config := filepath.Join(dir, "orchestrator.yaml")
	specsDir := filepath.Join(dir, "specs")
	if err := os.Mkdir(specsDir, 0o755); err != nil {
		b.Fatal(err)
	}
	// The agent is never started: every run waits on its question.
	body := fmt.Sprintf("state_dir: %q\nagent:\n  command: %q\nspecs:\n  dir: %q\n"+
		"serve:\n  listen: 127.0.0.1:0\nsurfaces:\n  terminal:\n    enabled: false\nlog:\n  level: info\n",
		state, filepath.Join(dir, "no-agent"), specsDir)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	ws := &waitingServe{n: n, out: newWatchedBuffer(), exited: make(chan error, 1)}
	// Long enough for BenchmarkWaitingRunsCPU's window and garbage
	// collections too.
	ws.ctx, ws.cancel = context.WithTimeout(context.Background(), benchTimeout+waitingWindow+10*time.Minute)
	if err := prefillWaitingRuns(ws.ctx, state, n); err != nil {
		b.Fatal(err)
	}
	ws.cmd = exec.Command(os.Args[0], "--config", config, "serve")
	ws.cmd.Dir = dir
	ws.cmd.Env = append(os.Environ(), envChild+"=1")
	ws.cmd.Stdout, ws.cmd.Stderr = ws.out, ws.out
	if err := ws.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { ws.exited <- ws.cmd.Wait() }()
	// serve logs each question it waits on (logEvent).
	if err := ws.out.waitCount(ws.ctx, `msg="question asked"`, n, ws.exited); err != nil {
		ws.kill()
		b.Fatalf("the runs never all waited: %v\n%s", err, ws.out.String())
	}
	if m := regexp.MustCompile(`msg=serving addr=(\S+)`).FindStringSubmatch(ws.out.String()); m != nil {
		ws.addr = m[1]
	}
	return ws
}

func (ws *waitingServe) kill() {
	select {
	case err := <-ws.exited:
		ws.exited <- err
	default:
		ws.cmd.Process.Kill()
		ws.exited <- <-ws.exited
	}
	ws.cancel()
}

// stop stops serve with SIGTERM and checks it asked each question once.
func (ws *waitingServe) stop(b *testing.B) {
	b.Helper()
	defer ws.kill()
	if err := ws.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-ws.exited:
		ws.exited <- err
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == exitCancelled) {
			b.Fatalf("serve: %v\n%s", err, ws.out.String())
		}
	case <-ws.ctx.Done():
		b.Fatalf("serve did not stop: %v\n%s", ws.ctx.Err(), ws.out.String())
	}
	if asked := strings.Count(ws.out.String(), `msg="question asked"`); asked != ws.n {
		b.Fatalf("serve asked %d questions, want %d:\n%s", asked, ws.n, ws.out.String())
	}
}

// waitingWindow is how long BenchmarkWaitingRunsCPU watches serve wait.
const waitingWindow = 60 * time.Second

// BenchmarkWaitingRunsCPU measures what `orchestrator serve` costs while
// waitingRuns runs wait on their questions for waitingWindow: the CPU time
// of the process (utime+stime of /proc/<pid>/stat) as a share of one core;
// how its live heap (go_gc_heap_live_bytes on /metrics, see liveHeap,
// before and after the window) and resident set change; and how fast it
// allocates (go_memstats_alloc_bytes_total), garbage the GC takes back.
// Nothing scrapes serve during the window.
//
// Targets: waiting-CPU-% < 1; heap-live-growth-KB ≈ 0 (no growth with
// time).
//
// The runs are the ones of BenchmarkWaitingRunsRSS. Waiting costs the slow
// poll of the store (store/wait.go) and the daemon's look for undriven runs.
func BenchmarkWaitingRunsCPU(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	var cpu, heapGrowth, rssGrowth, allocRate float64
	for i := 0; i < b.N; i++ {
		ws := startWaitingServe(b, waitingRuns)
		pid := ws.cmd.Process.Pid
		// Once the start's work is done, and the daemon has looked for
		// undriven runs twice (its store connections' caches warm).
		time.Sleep(12 * time.Second)
		heap0 := liveHeap(b, ws.addr)
		alloc0 := metric(b, ws.addr, "go_memstats_alloc_bytes_total")
		mem0, err := readMemory(pid)
		if err != nil {
			b.Fatal(err)
		}
		t0, err := readCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		time.Sleep(waitingWindow)
		t1, err := readCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		mem1, err := readMemory(pid)
		if err != nil {
			b.Fatal(err)
		}
		alloc1 := metric(b, ws.addr, "go_memstats_alloc_bytes_total")
		heap1 := liveHeap(b, ws.addr)
		ws.stop(b)
		cpu = 100 * float64(t1-t0) / float64(took)
		heapGrowth = (heap1 - heap0) / 1024
		rssGrowth = float64(mem1.rss-mem0.rss) / 1024
		allocRate = (alloc1 - alloc0) / 1024 / took.Minutes()
	}
	b.StopTimer()
	b.ReportMetric(cpu, "waiting-CPU-%")
	b.ReportMetric(heapGrowth, "heap-live-growth-KB")
	b.ReportMetric(rssGrowth, "RSS-growth-KB")
	b.ReportMetric(allocRate, "alloc-KB/min")
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

// readCPU returns the CPU time (user and system) a process has used.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat
// line; the command name (field 2) is in parentheses and may hold spaces.
func parseStat(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	f := strings.Fields(line[i+1:]) // from field 3 (state) on
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// liveHeap is the smallest live heap serve's next three garbage
// collections find (scraping /metrics makes garbage, so they come within
// seconds): the live heap varies by a few hundred KB from one collection to
// the next with what is in flight.
func liveHeap(b *testing.B, addr string) float64 {
	b.Helper()
	least := math.Inf(1)
	for range 3 {
		least = min(least, liveAfterNextGC(b, addr))
	}
	return least
}

// liveAfterNextGC waits for serve's next garbage collection (the runtime
// forces one at least every 2 minutes) and returns the live heap it found.
func liveAfterNextGC(b *testing.B, addr string) float64 {
	b.Helper()
	last := metric(b, addr, "go_memstats_last_gc_time_seconds")
	deadline := time.Now().Add(3 * time.Minute)
	for metric(b, addr, "go_memstats_last_gc_time_seconds") == last {
		if time.Now().After(deadline) {
			b.Fatal("serve did not collect garbage within 3 minutes")
		}
		time.Sleep(time.Second)
	}
	return metric(b, addr, "go_gc_heap_live_bytes")
}

// metric reads the value of a metric without labels from serve's /metrics.
func metric(b *testing.B, addr, name string) float64 {
	b.Helper()
	if addr == "" {
		b.Fatal("serve's address is unknown")
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	b.Fatalf("no %s on /metrics: %v", name, sc.Err())
	return 0
}

// prefillWaitingRuns writes n runs to the store in dir, each waiting on a
// question its finished first turn asked, on no surface.
func prefillWaitingRuns(ctx context.Context, dir string, n int) error {
	st, err := store.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	return fillWaitingRuns(ctx, st, dir, n)
}

// fillWaitingRuns writes n runs to st, working in dir, each waiting on a
// question its finished first turn asked, on no surface.
func fillWaitingRuns(ctx context.Context, st *store.Store, dir string, n int) error {
	for i := range n {
		id := fmt.Sprintf("rbench%04d", i)
		session := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		if _, err := st.CreateRun(ctx, store.Run{ID: id, Title: "Implement spec X", Prompt: "Implement spec X",
			WorkDir: dir, SessionID: session}); err != nil {
			return err
		}
		turn, err := st.BeginTurn(ctx, store.Turn{RunID: id, Kind: store.TurnStart, Prompt: "Implement spec X", SessionID: session})
		if err != nil {
			return err
		}
		set := questions.NewSet(id, turn.Seq, []questions.Question{{Text: "Which auth method?", Header: "Auth",
			Options: []questions.Option{{Label: "OAuth2", Description: "Use OAuth2"}, {Label: "JWT", Description: "Stateless"}}}})
		set.Title, set.Context = "Implement spec X", "I need a decision."
		if err := st.FinishTurn(ctx, id, turn.Seq, store.TurnResult{Status: "success", SessionID: session,
			FinalText: "I need a decision."}, &set, nil); err != nil {
			return err
		}
	}
	return nil
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	line := "4242 (orche strator) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 9 0 1 1 1\n"
	if got, err := parseStat(line); err != nil || got != 1750*time.Millisecond {
		t.Errorf("parseStat = %v, %v; want 1.75s", got, err)
	}
	if _, err := parseStat("4242 (x) S 1 2"); err == nil {
		t.Error("parseStat of a short line succeeded")
	}
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     procMemory
		wantErr  bool
	}{
		{"running", "Name:\tx\nVmPeak:\t 9 kB\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\nThreads:\t5\n", procMemory{hwm: 2 << 20, rss: 1 << 20}, false},
		{"zombie", "Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n", procMemory{}, true},
		{"bad number", "VmHWM:\t x kB\nVmRSS:\t 1 kB\n", procMemory{}, true},
		{"bad unit", "VmHWM:\t 1 MB\nVmRSS:\t 1 kB\n", procMemory{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatus(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseStatus = %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestPercentileAndSpawnLog(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if got := percentile(ds, 50); got != 5 {
		t.Errorf("p50 = %d, want 5", got)
	}
	if got := percentile(ds, 90); got != 9 {
		t.Errorf("p90 = %d, want 9", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %d", got)
	}
	log := filepath.Join(t.TempDir(), "spawns")
	if err := os.WriteFile(log, []byte("1700000000.123456\n1700000001.123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readSpawns(log)
	if err != nil || len(got) != 2 || got[0].UnixNano() != 1700000000123456000 || got[1].UnixNano() != 1700000001123456789 {
		t.Errorf("readSpawns = %v, %v", got, err)
	}
	if err := os.WriteFile(log, []byte("yesterday\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSpawns(log); err == nil || !strings.Contains(err.Error(), "yesterday") {
		t.Errorf("readSpawns of a bad line: %v", err)
	}
}
