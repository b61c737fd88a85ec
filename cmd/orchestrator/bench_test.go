package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
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

// bareCLI runs the CLI as the orchestrator would, without it: a print-mode
// stream-json run of prompt on the same fake, and fails on a bad exit.
func (e *benchEnv) bareCLI(prompt string) time.Duration {
	e.tb.Helper()
	cmd := clitest.Command(e.tb, e.cliEnv, "-p", "--output-format", "stream-json", "--verbose", "--", prompt)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		e.tb.Fatalf("bare CLI: %v\n%s", err, out.String())
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

// memory is what watchMemory saw of a process: the highest VmHWM and VmRSS
// read from /proc/<pid>/status, in bytes.
type memory struct{ hwm, rss int64 }

type memoryWatch struct {
	done chan struct{}
	got  chan memory
}

// watchMemory samples a process's memory every few milliseconds until stop.
// VmHWM is the kernel's own high-water mark of the process, so sampling only
// has to catch its last value before the process exits.
func watchMemory(pid int) *memoryWatch {
	w := &memoryWatch{done: make(chan struct{}), got: make(chan memory, 1)}
	go func() {
		var max memory
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := readMemory(pid); err == nil {
				max.hwm, max.rss = maxInt64(max.hwm, m.hwm), maxInt64(max.rss, m.rss)
			}
			select {
			case <-w.done:
				w.got <- max
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *memoryWatch) stop() memory {
	close(w.done)
	return <-w.got
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// readMemory reads VmHWM and VmRSS of a process. A process that has exited
// (a zombie has no memory lines) is an error.
func readMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus reads the VmHWM and VmRSS lines ("VmHWM:   12345 kB") of a
// /proc/<pid>/status file.
func parseStatus(r io.Reader) (memory, error) {
	var m memory
	var seen int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return memory{}, fmt.Errorf("proc status: %s: unexpected value %q", name, value)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("proc status: %s: %w", name, err)
		}
		if name == "VmHWM" {
			m.hwm = kb << 10
		} else {
			m.rss = kb << 10
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		return memory{}, fmt.Errorf("proc status: %w", err)
	}
	if seen != 2 {
		return memory{}, errors.New("proc status: no VmHWM and VmRSS (has the process exited?)")
	}
	return m, nil
}

func mb(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkRunVsBareCLI compares the wall time of `orchestrator run` (one
// turn, no question) with the bare `claude -p` it wraps, on the same fake,
// and reads the orchestrator's own peak resident set meanwhile.
//
// Targets: orchestrator/bare ≤ 1.05; orchestrator-peak-RSS-MB ≤ 30.
//
// One op is two pairs of runs in alternating order (bare then orchestrator,
// orchestrator then bare), so that neither side always runs on a warmer
// machine.
func BenchmarkRunVsBareCLI(b *testing.B) {
	e := newBenchEnv(b, benchEnvOptions{})
	// Warm the page cache for both programs before measuring.
	e.bareCLI(benchPrompt)
	e.orchestratorRun(benchPrompt)
	b.ResetTimer()
	var bare, orch []time.Duration
	var peak int64
	runOrch := func() {
		d, hwm := e.orchestratorRun(benchPrompt)
		orch = append(orch, d)
		peak = maxInt64(peak, hwm)
	}
	for i := 0; i < b.N; i++ {
		bare = append(bare, e.bareCLI(benchPrompt))
		runOrch()
		runOrch()
		bare = append(bare, e.bareCLI(benchPrompt))
	}
	b.StopTimer()
	b.Logf("bare CLI runs: %v", bare)
	b.Logf("orchestrator runs: %v", orch)
	meanBare, meanOrch := mean(bare), mean(orch)
	b.ReportMetric(ms(meanBare), "bare-ms/op")
	b.ReportMetric(ms(meanOrch), "orchestrator-ms/op")
	b.ReportMetric(float64(meanOrch)/float64(meanBare), "orchestrator/bare")
	b.ReportMetric(mb(peak), "orchestrator-peak-RSS-MB")
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
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
const answerRounds = 8

// spawnLog is the wrapper script the agent command is replaced with: it
// appends the time it started to a file, then execs the real CLI. bash's
// EPOCHREALTIME costs no extra process; without bash, date(1) does.
func spawnLog(tb testing.TB, claude string) (script, log string) {
	tb.Helper()
	dir := tb.TempDir()
	script, log = filepath.Join(dir, "claude-wrapper"), filepath.Join(dir, "spawns")
	var body string
	if bash, err := exec.LookPath("bash"); err == nil {
		body = fmt.Sprintf("#!%s\necho \"$EPOCHREALTIME\" >> %s\nexec %s \"$@\"\n", bash, shellQuote(log), shellQuote(claude))
	} else {
		body = fmt.Sprintf("#!/bin/sh\ndate +%%s.%%N >> %s\nexec %s \"$@\"\n", shellQuote(log), shellQuote(claude))
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
		sec, frac, _ := strings.Cut(line, ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		// The fraction has 6 (EPOCHREALTIME) or 9 (date %N) digits.
		ns, err2 := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("spawn log %s: bad time %q", log, line)
		}
		out = append(out, time.Unix(s, ns))
	}
	return out, nil
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
func BenchmarkAnswerToResume(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	script, log := spawnLog(b, clitest.Claude(b))
	var latencies, answerCmd []time.Duration
	var peak int64
	for i := 0; i < b.N; i++ {
		if err := os.Remove(log); err != nil && !errors.Is(err, os.ErrNotExist) {
			b.Fatal(err)
		}
		lat, cmdTimes, hwm := answerRoundsOnce(b, script, log)
		latencies = append(latencies, lat...)
		answerCmd = append(answerCmd, cmdTimes...)
		peak = maxInt64(peak, hwm)
	}
	b.StopTimer()
	b.Logf("answer → resumed CLI spawned: %v", latencies)
	b.ReportMetric(ms(percentile(latencies, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(latencies, 90)), "p90-ms")
	b.ReportMetric(ms(percentile(answerCmd, 50)), "answer-cmd-p50-ms")
	b.ReportMetric(mb(peak), "orchestrator-peak-RSS-MB")
}

// answerRoundsOnce runs one orchestrator child through answerRounds question
// rounds and returns the answer → spawn latencies, the time the answer
// command itself took, and the child's peak resident set.
func answerRoundsOnce(b *testing.B, script, log string) (lat, answerCmd []time.Duration, hwm int64) {
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
	return lat, answerCmd, mem.stop().hwm
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

// envWaitingChild makes TestWaitingRunsChild the child process of
// BenchmarkWaitingRunsRSS.
const envWaitingChild = "ORCHESTRATOR_BENCH_WAITING_CHILD"

// BenchmarkWaitingRunsRSS measures the resident set of one orchestrator
// process that drives waitingRuns runs at once, each waiting on a question.
//
// Target: waiting-RSS-MB ≤ 60.
//
// The runs are written to the state directory beforehand, each with a
// finished first turn that asked a question, so no CLI runs. The process is
// this test binary running TestWaitingRunsChild: the orchestrator's own
// configuration loading, store and runner (Main.newRunner) drive every run in
// a goroutine, as `serve` takes up waiting runs. The runs ask on no surface
// (only another process's `answer` could answer them): the memory measured is
// the run loop's, the store's and the answer watcher's. It reports the
// resident set once all runs wait (the highest of samples over a second), the
// process's high-water mark, and the cost of one more waiting run (against
// a process driving a single run).
func BenchmarkWaitingRunsRSS(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	var one, many memory
	for i := 0; i < b.N; i++ {
		one = waitingRunsRSS(b, 1)
		many = waitingRunsRSS(b, waitingRuns)
	}
	b.StopTimer()
	b.ReportMetric(mb(many.rss), "waiting-RSS-MB")
	b.ReportMetric(mb(many.hwm), "peak-RSS-MB")
	b.ReportMetric(float64(many.rss-one.rss)/float64(waitingRuns-1)/1024, "KB/extra-run")
}

// waitingRunsRSS prepares n waiting runs, starts the child that drives them
// and returns its memory once they all wait.
func waitingRunsRSS(b *testing.B, n int) memory {
	b.Helper()
	dir := b.TempDir()
	state := filepath.Join(dir, "state")
	config := filepath.Join(dir, "orchestrator.yaml")
	// The agent is never started: every run waits on its question.
	body := fmt.Sprintf("state_dir: %q\nagent:\n  command: %q\n", state, filepath.Join(dir, "no-agent"))
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	if err := prefillWaitingRuns(ctx, state, n); err != nil {
		b.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestWaitingRunsChild$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envWaitingChild+"="+config)
	out := newWatchedBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe() // closing it stops the child
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	if err := out.waitCount(ctx, fmt.Sprintf("waiting: %d runs\n", n), 1, exited); err != nil {
		b.Fatalf("the runs never all waited: %v\n%s", err, out.String())
	}
	// Let the answer watcher poll a while (it ticks every 20ms), sampling.
	var got memory
	for i := 0; i < 50; i++ {
		m, err := readMemory(cmd.Process.Pid)
		if err != nil {
			b.Fatalf("read the child's memory: %v\n%s", err, out.String())
		}
		got.hwm, got.rss = maxInt64(got.hwm, m.hwm), maxInt64(got.rss, m.rss)
		time.Sleep(20 * time.Millisecond)
	}
	stdin.Close()
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			b.Fatalf("child: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		b.Fatalf("the child did not stop: %v\n%s", ctx.Err(), out.String())
	}
	return got
}

// prefillWaitingRuns writes n runs to the store in dir, each waiting on a
// question its finished first turn asked, on no surface.
func prefillWaitingRuns(ctx context.Context, dir string, n int) error {
	st, err := store.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
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

// TestWaitingRunsChild is not a test: it is the child process of
// BenchmarkWaitingRunsRSS (the config file in $ORCHESTRATOR_BENCH_WAITING_CHILD),
// and skips otherwise. It drives every waiting run of the state directory in
// a goroutine, says "waiting: N runs" once each has reached its question,
// and stops when its stdin ends.
func TestWaitingRunsChild(t *testing.T) {
	config := os.Getenv(envWaitingChild)
	if config == "" {
		t.Skip("the child process of BenchmarkWaitingRunsRSS")
	}
	m := &Main{Stdin: blockingReader{}, Stdout: io.Discard, Stderr: os.Stderr, LookupEnv: os.LookupEnv, Dir: filepath.Dir(config)}
	root := m.newRootCmd()
	root.AddCommand(&cobra.Command{Use: "drive-waiting", RunE: func(cmd *cobra.Command, _ []string) error {
		return m.driveWaiting(cmd.Context(), os.Stdout)
	}})
	root.SetArgs([]string{"--config", config, "drive-waiting"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	err := root.ExecuteContext(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// driveWaiting drives every waiting run at once until ctx ends.
func (m *Main) driveWaiting(ctx context.Context, out io.Writer) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	runs, err := st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.RunWaiting}})
	if err != nil {
		return err
	}
	var asked atomic.Int64
	r, _, err := m.newRunner(st, func(ev runner.Event) {
		if ev.Kind == runner.EventQuestion && asked.Add(1) == int64(len(runs)) {
			fmt.Fprintf(out, "waiting: %d runs\n", len(runs))
		}
	})
	if err != nil {
		return err
	}
	errs := make(chan error, len(runs))
	for _, run := range runs {
		go func() {
			_, err := r.Drive(ctx, run.ID)
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				err = nil
			}
			errs <- err
		}()
	}
	var all []error
	for range runs {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// blockingReader is a terminal whose input never comes.
type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { select {} }

func TestParseStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     memory
		wantErr  bool
	}{
		{"running", "Name:\tx\nVmPeak:\t 9 kB\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\nThreads:\t5\n", memory{hwm: 2 << 20, rss: 1 << 20}, false},
		{"zombie", "Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n", memory{}, true},
		{"bad number", "VmHWM:\t x kB\nVmRSS:\t 1 kB\n", memory{}, true},
		{"bad unit", "VmHWM:\t 1 MB\nVmRSS:\t 1 kB\n", memory{}, true},
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
