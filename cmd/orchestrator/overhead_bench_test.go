package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
)

// overheadPairs is how many interleaved pairs BenchmarkRunOverhead times per
// op, unless ORCHESTRATOR_BENCH_PAIRS says otherwise (more on a busy
// machine).
const overheadPairs = 24

// tracedRuns is how many traced runs exec-ms is the median of.
const tracedRuns = 5

// BenchmarkRunOverhead is issue 23's "a run as cheap as the bare CLI": the
// wall time of `orchestrator run SPEC` (the program as built for users, one
// turn, no question) against the bare CLI started with the same arguments
// and environment the executor gives it, both on the same fake Messages API
// answering the same scripted one-turn reply.
//
// Target: run/bare ≤ 1.05.
//
// One op is overheadPairs pairs, each a bare CLI run and an orchestrator
// run, the order rotating from pair to pair so that neither always runs on
// the warmer machine. The state directory is one throwaway directory for
// every run (as a person's is): its creation is not part of any pair.
// Reported: the medians (bare-ms, run-ms), run/bare as the ratio of the
// medians, pair-ratio, the median of the pairs' own ratios (less sensitive
// to the machine's load drifting during the op), and min-ratio, the ratio
// of the fastest run of each (what is left when the machine is quiet: on a
// shared machine the medians carry other programs' load).
//
// ORCHESTRATOR_BENCH_BASE, the path of another build of the program (say
// main's, to measure a change), adds its runs to each pair, in rotating
// order, and reports them as base-*.
//
// With strace(1) on the PATH, one more run of each is traced (only execve
// and the sync calls stop the process, through seccomp-bpf): fsyncs/turn is
// how many fsync/fdatasync calls the orchestrator's process made on its own
// files (the state directory: the database and its WAL, transcripts),
// cli-fsyncs those of the CLI's process tree (the same with or without the
// orchestrator), and exec-ms the time from the orchestrator's exec to the
// CLI's exec (the median of tracedRuns runs; under strace, so a little more
// than without it).
func BenchmarkRunOverhead(b *testing.B) {
	e := newBenchEnv(b, benchEnvOptions{})
	bin := buildOrchestrator(b)
	spec := filepath.Join(e.dir, "hello.md")
	if err := os.WriteFile(spec, []byte("---\nname: hello\n---\n"+benchPrompt+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	bare := func() time.Duration {
		b.Helper()
		return e.time(e.sameCLICmd(benchPrompt))
	}
	run := func() time.Duration {
		b.Helper()
		return e.wall(exec.Command(bin, "--config", e.config, "run", spec))
	}
	// Another build to compare with, side by side (see the doc comment).
	base := os.Getenv("ORCHESTRATOR_BENCH_BASE")
	baseRun := func() time.Duration {
		b.Helper()
		return e.wall(exec.Command(base, "--config", e.config, "run", spec))
	}
	// Warm the page cache for the programs, and make the store.
	steps := []func(){}
	var bares, runs, bases, ratios, baseRatios []time.Duration
	var db, dr, dbase time.Duration
	steps = append(steps, func() { db = bare() }, func() { dr = run() })
	if base != "" {
		steps = append(steps, func() { dbase = baseRun() })
	}
	for _, step := range steps {
		step()
	}
	pairs := overheadPairs
	if v := os.Getenv("ORCHESTRATOR_BENCH_PAIRS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("ORCHESTRATOR_BENCH_PAIRS=%q: want a number of pairs", v)
		}
		pairs = n
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for p := range pairs {
			for k := range steps {
				steps[(p+k)%len(steps)]()
			}
			bares, runs = append(bares, db), append(runs, dr)
			// Ratios kept as Durations (×1e6) to reuse percentile.
			ratios = append(ratios, time.Duration(1e6*float64(dr)/float64(db)))
			if base != "" {
				bases = append(bases, dbase)
				baseRatios = append(baseRatios, time.Duration(1e6*float64(dbase)/float64(db)))
			}
		}
	}
	b.StopTimer()
	b.Logf("bare CLI runs: %v", bares)
	b.Logf("orchestrator runs: %v", runs)
	medBare, medRun := percentile(bares, 50), percentile(runs, 50)
	b.ReportMetric(millis(medBare), "bare-ms")
	b.ReportMetric(millis(medRun), "run-ms")
	b.ReportMetric(float64(medRun)/float64(medBare), "run/bare")
	b.ReportMetric(float64(percentile(ratios, 50))/1e6, "pair-ratio")
	b.ReportMetric(millis(medRun-medBare), "extra-ms")
	minBare := percentile(bares, 0)
	b.ReportMetric(float64(percentile(runs, 0))/float64(minBare), "min-ratio")
	if base != "" {
		b.Logf("base orchestrator runs: %v", bases)
		medBase := percentile(bases, 50)
		b.ReportMetric(millis(medBase), "base-run-ms")
		b.ReportMetric(float64(medBase)/float64(medBare), "base-run/bare")
		b.ReportMetric(float64(percentile(baseRatios, 50))/1e6, "base-pair-ratio")
		b.ReportMetric(float64(percentile(bases, 0))/float64(minBare), "base-min-ratio")
	}

	strace, err := exec.LookPath("strace")
	if err != nil {
		b.Log("no strace: fsyncs and time to exec not measured")
		return
	}
	var toExec, baseToExec []time.Duration
	var tr, bb trace
	for range tracedRuns {
		tr = e.traced(strace, exec.Command(bin, "--config", e.config, "run", spec))
		toExec = append(toExec, tr.toExec)
		if base != "" {
			bb = e.traced(strace, exec.Command(base, "--config", e.config, "run", spec))
			baseToExec = append(baseToExec, bb.toExec)
		}
	}
	bt := e.traced(strace, e.sameCLICmd(benchPrompt))
	b.Logf("files the orchestrator synced: %v", tr.ownFiles)
	b.ReportMetric(float64(tr.own), "fsyncs/turn")
	b.ReportMetric(float64(bt.other), "cli-fsyncs")
	b.ReportMetric(millis(percentile(toExec, 50)), "exec-ms")
	if base != "" {
		b.Logf("files the base build synced: %v", bb.ownFiles)
		b.ReportMetric(float64(bb.own), "base-fsyncs/turn")
		b.ReportMetric(millis(percentile(baseToExec, 50)), "base-exec-ms")
	}
}

// sameCLICmd is the CLI's command for one run of prompt exactly as the
// orchestrator starts a run's first turn (sameCLI), with a new session ID.
func (e *benchEnv) sameCLICmd(prompt string) *exec.Cmd {
	e.tb.Helper()
	if e.exec == nil {
		m := &Main{Stderr: io.Discard, Dir: e.work, LookupEnv: func(string) (string, bool) { return "", false }, configFlag: e.config}
		if err := m.loadConfig(true); err != nil {
			e.tb.Fatal(err)
		}
		ex, err := executor.New(m.executorConfig(nil, nil))
		if err != nil {
			e.tb.Fatal(err)
		}
		e.exec, e.claude = ex, m.Config.Agent.Command
	}
	var id [16]byte
	rand.Read(id[:]) //nolint:errcheck // crypto/rand.Read never fails
	id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
	h := hex.EncodeToString(id[:])
	session := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	cmd := exec.Command(e.claude, e.exec.Args(executor.Request{Prompt: prompt, SessionID: session, WorkDir: e.work})...)
	cmd.Env, cmd.Dir = e.exec.Environ(), e.work
	return cmd
}

// wall runs a command, returns its wall time, and fails on a bad exit.
func (e *benchEnv) wall(cmd *exec.Cmd) time.Duration {
	e.tb.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if cmd.Dir == "" {
		cmd.Dir = e.work
	}
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		e.tb.Fatalf("%q: %v\n%s", cmd.Args, err, out.String())
	}
	return took
}

// buildOrchestrator builds the program (this package, as `make build` does)
// into a temporary directory and returns its path.
func buildOrchestrator(b *testing.B) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), "orchestrator")
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("build the orchestrator: %v", err)
	}
	cmd := exec.Command(gobin, "build", "-o", out, ".")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, msg)
	}
	return out
}

// trace is what one traced run did.
type trace struct {
	own      int            // sync calls on files of the state directory: the orchestrator's
	ownFiles map[string]int // of which, by file (relative to the state directory)
	other    int            // sync calls on other files: the CLI's
	toExec   time.Duration  // from the first exec (the traced program's) to the CLI's
}

// traced runs cmd under strace -f, counting the sync calls and timing the
// CLI's exec (e.claude).
func (e *benchEnv) traced(strace string, cmd *exec.Cmd) trace {
	e.tb.Helper()
	log := filepath.Join(e.tb.TempDir(), "strace")
	args := []string{strace, "-f", "--seccomp-bpf", "-ttt", "-y", "-qq", "-o", log,
		"-e", "trace=execve,fsync,fdatasync,sync_file_range,syncfs", "--", cmd.Path}
	cmd.Args = append(args, cmd.Args[1:]...)
	cmd.Path = strace
	e.wall(cmd)
	data, err := os.ReadFile(log)
	if err != nil {
		e.tb.Fatal(err)
	}
	t, err := parseTrace(data, e.claude, e.state)
	if err != nil {
		e.tb.Fatal(err)
	}
	return t
}

// straceLine is one line of `strace -f -ttt -y`: the pid, the time, the
// call and its arguments.
var straceLine = regexp.MustCompile(`^(\d+)\s+(\d+\.\d+)\s+(execve|fsync|fdatasync|sync_file_range|syncfs)\((.*)`)

// parseTrace reads a strace log of the calls traced: the time from the
// first exec to claude's, and the sync calls by file (-y names an fd's
// file: "fsync(5</path>)"); a file under state is the orchestrator's.
func parseTrace(log []byte, claude, state string) (trace, error) {
	t := trace{ownFiles: map[string]int{}}
	var first, cliExec time.Time
	for _, line := range strings.Split(string(log), "\n") {
		m := straceLine.FindStringSubmatch(line)
		if m == nil {
			continue // another call's end ("<... resumed>"), an exit
		}
		call, arg := m[3], m[4]
		ts, err := parseEpoch(m[2]) // bench_test.go
		if err != nil {
			return t, fmt.Errorf("strace line %q: %w", line, err)
		}
		if call == "execve" {
			path, _ := strconv.Unquote(strings.SplitN(arg, ",", 2)[0])
			if first.IsZero() {
				first = ts
			}
			if path == claude && cliExec.IsZero() {
				cliExec = ts
			}
			continue
		}
		file := ""
		if i, j := strings.IndexByte(arg, '<'), strings.IndexByte(arg, '>'); i >= 0 && j > i {
			file = arg[i+1 : j]
		}
		if rel, err := filepath.Rel(state, file); err == nil && file != "" && !strings.HasPrefix(rel, "..") {
			t.own++
			t.ownFiles[rel]++
		} else {
			t.other++
		}
	}
	if cliExec.IsZero() {
		return t, fmt.Errorf("no exec of %s in the trace", claude)
	}
	t.toExec = cliExec.Sub(first)
	return t, nil
}

func TestParseTrace(t *testing.T) {
	t.Parallel()
	log := `100 1700000000.000000 execve("/bin/orchestrator", ["orchestrator", "run"], 0x7ffd /* 9 vars */) = 0
101 1700000000.010000 fsync(8</st/orchestrator.db-wal>) = 0
101 1700000000.011000 fsync(11</st> <unfinished ...>
101 1700000000.011500 <... fsync resumed>) = 0
102 1700000000.025000 execve("/opt/claude", ["/opt/claude", "-p"], 0x7ffd /* 12 vars */ <unfinished ...>
102 1700000000.025100 <... execve resumed>) = 0
103 1700000000.300000 fdatasync(5</home/u/.claude/x.json>) = 0
101 1700000000.400000 fsync(5</st/orchestrator.db>) = 0
104 1700000000.400100 +++ exited with 0 +++
`
	got, err := parseTrace([]byte(log), "/opt/claude", "/st")
	if err != nil {
		t.Fatal(err)
	}
	if got.own != 3 || got.other != 1 || got.ownFiles["orchestrator.db-wal"] != 1 || got.ownFiles["."] != 1 || got.ownFiles["orchestrator.db"] != 1 {
		t.Errorf("sync calls = %d own %v, %d other; want 3 own (one each of the WAL, the directory, the database) and 1 other", got.own, got.ownFiles, got.other)
	}
	if got.toExec != 25*time.Millisecond {
		t.Errorf("time to the CLI's exec = %v, want 25ms", got.toExec)
	}
	if _, err := parseTrace([]byte(log), "/opt/other", "/st"); err == nil || !strings.Contains(err.Error(), "/opt/other") {
		t.Errorf("a trace without the CLI's exec: %v, want an error naming it", err)
	}
}
