package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx", for pg_stat_activity

	"github.com/orchestrator-dev/orchestrator/internal/clitest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// The cluster benchmarks: three `orchestrator serve` processes (instances)
// on one PostgreSQL database (internal/pgtest), the real CLI and the fake
// Messages API — the world of cluster_e2e_test.go. This benchmark process
// is a fourth process on the database: it submits, answers and watches.

// clusterRounds is the least number of answers BenchmarkClusterAnswerToResume
// times, whatever b.N.
const clusterRounds = 10

// BenchmarkClusterAnswerToResume measures how long after an answer is
// recorded the run it resumes has its CLI started, on whichever instance
// claims it.
//
// Target (issue 16): commit → resumed CLI started p50 ≤ 100 ms.
//
// Each round submits a run whose first turn asks a question, waits until
// the question is pending and the run parked (waiting, no lease: no
// instance holds it), then records the answer in this process
// (Store.RecordAnswer, as a surface or `orchestrator answer` would) and
// waits for the run to end. The answer's commit wakes the instances
// (NOTIFY); one of them claims the run and starts the CLI. The agent
// command is a wrapper that logs its start time and its parent (the
// instance), then execs the real CLI.
//
// The commit happens inside the RecordAnswer call, which then sends the
// NOTIFY; the clock starts when the call starts, so every time is an upper
// bound (by record-p50-ms, the call itself). The call's return is no
// lower bound: a worker's once-a-second look may see the commit and start
// the CLI before a slow NOTIFY returns (from-return-p50-ms counts from it).
//
// Metrics, from the answer call: p50-ms and p90-ms to the resumed CLI
// process started; turn-p50-ms and turn-p90-ms to the answer turn's
// started_at (the store writes it when the set is claimed, just before
// the CLI is started); api-p50-ms to the answer turn's first request at
// the (fake) API, which adds the CLI's own start-up. moved-% is the share
// of resumes on another instance than the one that ran the run's first
// turn.
func BenchmarkClusterAnswerToResume(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	c := newCluster(b, 3, "", standardRules(0)...)
	script, log := clusterSpawnLog(b, clitest.Claude(b))
	c.e.base = strings.Replace(c.e.base, fmt.Sprintf("command: %q", clitest.Claude(b)), fmt.Sprintf("command: %q", script), 1)
	for i, in := range c.nodes {
		c.nodes[i] = c.newInstance(in.name) // rewritten with the wrapper
	}
	for _, in := range c.nodes {
		c.start(in)
	}
	st := c.store()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	c.leader(c.nodes...)

	rounds := max(b.N, clusterRounds)
	var cli, fromReturn, turn, api, record []time.Duration
	resumedOn := map[string]int{}
	firstOn := map[string]int{}
	moved := 0
	b.ResetTimer()
	for round := range rounds {
		b.StopTimer()
		runID := strings.TrimSpace(c.command("submit", "--prompt", "Implement spec X", "--surface", "terminal"))
		var set store.SetRecord
		waitFor(b, "run "+runID+" parked on its question", func() bool {
			sets, err := st.QuestionSets(ctx, store.SetFilter{RunID: runID, State: []store.SetState{store.SetPending}})
			if err != nil || len(sets) != 1 {
				return false
			}
			set = sets[0]
			r, err := st.Run(ctx, runID)
			if err != nil || r.Status != store.RunWaiting {
				return false
			}
			_, leased, err := st.RunLease(ctx, runID)
			return err == nil && !leased
		})
		spawned, err := readClusterSpawns(log)
		if err != nil {
			b.Fatal(err)
		}
		if len(spawned) == 0 {
			b.Fatalf("round %d: the run's first turn started no CLI", round)
		}
		first := c.spawner(spawned[len(spawned)-1])
		before, reqs := len(spawned), len(c.e.fake.Requests())
		b.StartTimer()

		called := time.Now()
		if _, err := st.RecordAnswer(ctx, questions.Response{SetID: set.Set.ID, By: "benchmark", Surface: "cli",
			Answers: []questions.Answer{{QuestionID: set.Set.Questions[0].ID, Labels: []string{"JWT"}}}}); err != nil {
			b.Fatalf("round %d: %v", round, err)
		}
		returned := time.Now()
		waitFor(b, "run "+runID+" done", func() bool {
			r, err := st.Run(ctx, runID)
			return err == nil && r.Status.Final()
		})

		b.StopTimer()
		if r, _ := st.Run(ctx, runID); r.Status != store.RunDone {
			b.Fatalf("round %d: run %s ended %s: %s", round, runID, r.Status, r.Error)
		}
		spawned, err = readClusterSpawns(log)
		if err != nil {
			b.Fatal(err)
		}
		if len(spawned) != before+1 || !spawned[before].resume {
			b.Fatalf("round %d: %d CLI starts after the answer (want 1, resuming): %+v", round, len(spawned)-before, spawned[before:])
		}
		resumed := spawned[before]
		on := c.spawner(resumed)
		firstOn[first]++
		resumedOn[on]++
		if on != first {
			moved++
		}
		started, err := answerTurnStart(ctx, st, set.Set)
		if err != nil {
			b.Fatalf("round %d: %v", round, err)
		}
		var asked time.Time
		for _, r := range c.e.fake.Requests()[reqs:] {
			if strings.Contains(r.LastUserText, answerRule) {
				asked = r.Time
				break
			}
		}
		if asked.IsZero() {
			b.Fatalf("round %d: the answer never reached the API", round)
		}
		cli = append(cli, resumed.at.Sub(called))
		fromReturn = append(fromReturn, resumed.at.Sub(returned))
		turn = append(turn, started.Sub(called))
		api = append(api, asked.Sub(called))
		record = append(record, returned.Sub(called))
	}
	b.StopTimer()
	if n := c.e.answerRequests(); n != rounds {
		b.Fatalf("the answers reached the model %d times, want %d (once per round)", n, rounds)
	}
	b.Logf("%d rounds; from the answer (the RecordAnswer call, whose commit wakes the instances):", rounds)
	b.Logf("  %-34s p50 %6.1f ms  p90 %6.1f ms", "answer turn's started_at", millis(percentile(turn, 50)), millis(percentile(turn, 90)))
	b.Logf("  %-34s p50 %6.1f ms  p90 %6.1f ms", "resumed CLI process started", millis(percentile(cli, 50)), millis(percentile(cli, 90)))
	b.Logf("  %-34s p50 %6.1f ms  p90 %6.1f ms", "answer turn's request at the API", millis(percentile(api, 50)), millis(percentile(api, 90)))
	b.Logf("  %-34s p50 %6.1f ms  p90 %6.1f ms", "(RecordAnswer call itself)", millis(percentile(record, 50)), millis(percentile(record, 90)))
	b.Logf("  CLI started, each round: %v", roundMillis(cli))
	// One line: a benchmark's log is cut after 10 lines.
	var by []string
	for _, in := range c.nodes {
		by = append(by, fmt.Sprintf("%s %d/%d", in.name, firstOn[in.name], resumedOn[in.name]))
	}
	b.Logf("  first turns/resumes by instance: %s; resumed on another instance than the first turn's: %d of %d",
		strings.Join(by, ", "), moved, rounds)
	b.ReportMetric(millis(percentile(cli, 50)), "p50-ms")
	b.ReportMetric(millis(percentile(cli, 90)), "p90-ms")
	b.ReportMetric(millis(percentile(turn, 50)), "turn-p50-ms")
	b.ReportMetric(millis(percentile(turn, 90)), "turn-p90-ms")
	b.ReportMetric(millis(percentile(api, 50)), "api-p50-ms")
	b.ReportMetric(millis(percentile(fromReturn, 50)), "from-return-p50-ms")
	b.ReportMetric(millis(percentile(record, 50)), "record-p50-ms")
	b.ReportMetric(100*float64(moved)/float64(rounds), "moved-%")
}

// roundMillis is ds in milliseconds, one decimal, for a log line.
func roundMillis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d.Round(100*time.Microsecond)) / float64(time.Millisecond)
	}
	return out
}

// clusterSpawn is a start of the agent command the wrapper logged.
type clusterSpawn struct {
	at     time.Time
	parent int  // the process that started it: an instance
	resume bool // with --resume: a turn that resumes a session
}

// clusterSpawnLog is spawnLog's wrapper that also logs the process that
// started the CLI and whether the CLI resumes a session (a run's version
// check, --version, is no spawn).
func clusterSpawnLog(tb testing.TB, claude string) (script, log string) {
	tb.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		tb.Skip("the cluster benchmark's agent wrapper needs bash")
	}
	dir := tb.TempDir()
	script, log = filepath.Join(dir, "claude-wrapper"), filepath.Join(dir, "spawns")
	body := fmt.Sprintf("#!%s\nk=start\ncase \" $* \" in *\" --resume \"*) k=resume ;; esac\n"+
		"[ \"$1\" = --version ] || echo \"$EPOCHREALTIME $PPID $k\" >> %s\nexec %s \"$@\"\n", bash, shellQuote(log), shellQuote(claude))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		tb.Fatal(err)
	}
	return script, log
}

// readClusterSpawns reads what clusterSpawnLog's wrapper logged.
func readClusterSpawns(log string) ([]clusterSpawn, error) {
	data, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []clusterSpawn
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("spawn log %s: bad line %q", log, line)
		}
		at, err := parseEpoch(f[0])
		if err != nil {
			return nil, fmt.Errorf("spawn log %s: %w", log, err)
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("spawn log %s: bad parent in %q", log, line)
		}
		out = append(out, clusterSpawn{at: at, parent: ppid, resume: f[2] == "resume"})
	}
	return out, nil
}

// spawner names the instance that started a CLI.
func (c *cluster) spawner(s clusterSpawn) string {
	for _, in := range c.nodes {
		if in.cmd != nil && in.cmd.Process != nil && in.cmd.Process.Pid == s.parent {
			return in.name
		}
	}
	return fmt.Sprintf("pid %d", s.parent)
}

// waitingInCluster is how many runs BenchmarkClusterThousandWaitingRuns
// makes wait.
const waitingInCluster = 1000

// clusterSettle is how long BenchmarkClusterThousandWaitingRuns watches
// the instances once every question is asked.
const clusterSettle = 10 * time.Second

// BenchmarkClusterThousandWaitingRuns measures what waiting costs a
// cluster: waitingInCluster runs, each waiting on a question set (made
// directly in the shared store, on no surface), and three instances started
// on them. The leader asks every run's questions (one Ask, and goroutine,
// per waiting run); the others only look for runnable runs. Once every
// question is asked, the instances are watched for clusterSettle.
//
// Metrics: rss-MB-max and rss-MB-mean, the instances' resident sets
// (VmRSS) at the end; hwm-MB-max, their peak; db-conns, the connections
// the three hold at the end (pg_stat_activity, by application_name),
// db-conns-peak their most at once seen from the start; goroutines-max
// (go_goroutines on /metrics: the leader's); ask-all-s, from the start of
// the instances to every question asked.
func BenchmarkClusterThousandWaitingRuns(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the whole-program benchmarks read /proc: Linux only")
	}
	for i := 0; i < b.N; i++ {
		thousandWaiting(b)
	}
}

// instanceLook is what thousandWaiting saw of an instance.
type instanceLook struct {
	leader         bool
	mem            procMemory
	goroutines     float64
	conns, peak    int
	asked, claimed int
	errors         int
}

func thousandWaiting(b *testing.B) {
	c := newCluster(b, 3, "")
	st := c.store()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	filled := time.Now()
	if err := fillWaitingRuns(ctx, st, filepath.Join(c.e.dir, "work"), waitingInCluster); err != nil {
		b.Fatalf("make the waiting runs: %v", err)
	}
	b.Logf("made %d waiting runs in %s", waitingInCluster, time.Since(filled).Round(time.Millisecond))

	conns := newConnWatch(b, c)
	defer conns.stop()
	started := time.Now()
	for _, in := range c.nodes {
		c.start(in)
	}
	asked := func() (n int) {
		for _, in := range c.nodes {
			n += strings.Count(in.out.String(), `msg="question asked"`)
		}
		return n
	}
	for asked() < waitingInCluster {
		if ctx.Err() != nil {
			b.Fatalf("%d of %d questions asked: %v", asked(), waitingInCluster, ctx.Err())
		}
		for _, in := range c.nodes {
			if in.cmd.ProcessState != nil {
				b.Fatalf("%s exited:\n%s", in.name, in.out.String())
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	askAll := time.Since(started)
	lead := c.leader(c.nodes...)

	looks := map[string]*instanceLook{}
	for _, in := range c.nodes {
		looks[in.name] = &instanceLook{leader: in == lead}
	}
	settle := time.Now().Add(clusterSettle)
	for time.Now().Before(settle) {
		for _, in := range c.nodes {
			m, err := readMemory(in.cmd.Process.Pid)
			if err != nil {
				b.Fatalf("%s's memory: %v", in.name, err)
			}
			l := looks[in.name]
			l.mem.hwm, l.mem.rss = max(l.mem.hwm, m.hwm), m.rss
		}
		time.Sleep(250 * time.Millisecond)
	}
	now, peak := conns.stop()
	for _, in := range c.nodes {
		l := looks[in.name]
		l.goroutines = metric(b, in.addr(), "go_goroutines")
		l.conns, l.peak = now[in.name], peak[in.name]
		l.asked = strings.Count(in.out.String(), `msg="question asked"`)
		l.claimed = strings.Count(in.out.String(), `msg="claiming a run"`)
		l.errors = strings.Count(in.out.String(), `level=ERROR`)
		if l.errors > 0 {
			b.Errorf("%s logged %d errors:\n%s", in.name, l.errors, in.out.String())
		}
	}
	runs, err := st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.RunWaiting}, Brief: true})
	if err != nil || len(runs) != waitingInCluster {
		b.Fatalf("%d runs waiting at the end (%v), want %d", len(runs), err, waitingInCluster)
	}

	surfs := "?"
	if m := regexp.MustCompile(`msg="question asked".* surfaces=(\S*)`).FindStringSubmatch(lead.out.String()); m != nil {
		surfs = m[1]
	}
	b.Logf("%d waiting runs (asked on surfaces %s), 3 instances; every question asked %s after the start; then %s:",
		waitingInCluster, surfs, askAll.Round(time.Millisecond), clusterSettle)
	b.Logf("  instance  leader  asked  claimed  RSS-MB  peak-MB  goroutines  db-conns  db-conns-peak")
	var rss []float64
	var hwm, gor float64
	var sum, sumPeak int
	for _, in := range c.nodes {
		l := looks[in.name]
		b.Logf("  %-8s  %-6v  %5d  %7d  %6.1f  %7.1f  %10.0f  %8d  %13d", in.name, l.leader, l.asked, l.claimed,
			mebibytes(l.mem.rss), mebibytes(l.mem.hwm), l.goroutines, l.conns, l.peak)
		rss = append(rss, mebibytes(l.mem.rss))
		hwm, gor = max(hwm, mebibytes(l.mem.hwm)), max(gor, l.goroutines)
		sum += l.conns
	}
	sumPeak = peak[""]
	b.Logf("  connections of the three at once: %d at the end, at most %d (pool: SetMaxOpenConns per instance, plus listener and leader connections)", sum, sumPeak)
	mean := 0.0
	for _, r := range rss {
		mean += r / float64(len(rss))
	}
	// What asking costs the leader per waiting run: its resident set less
	// the others' (which ask nothing), shared out.
	var leaderRSS, others float64
	for _, in := range c.nodes {
		if looks[in.name].leader {
			leaderRSS = mebibytes(looks[in.name].mem.rss)
		} else {
			others += mebibytes(looks[in.name].mem.rss) / float64(len(c.nodes)-1)
		}
	}
	b.ReportMetric(slices.Max(rss), "rss-MB-max")
	b.ReportMetric((leaderRSS-others)*1024/waitingInCluster, "leader-KB/waiting-run")
	b.ReportMetric(mean, "rss-MB-mean")
	b.ReportMetric(hwm, "hwm-MB-max")
	b.ReportMetric(float64(sum), "db-conns")
	b.ReportMetric(float64(sumPeak), "db-conns-peak")
	b.ReportMetric(gor, "goroutines-max")
	b.ReportMetric(askAll.Seconds(), "ask-all-s")
}

// connWatch samples, every 100 ms, the connections each instance of a
// cluster holds (pg_stat_activity: application_name is the cluster's
// schema, a slash and the instance's name; see instanceURL).
type connWatch struct {
	db     *sql.DB
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	now    map[string]int // by instance name, at the last sample
	peak   map[string]int // the most by instance, and of all ("")
	closed bool
}

func newConnWatch(b *testing.B, c *cluster) *connWatch {
	b.Helper()
	u, err := url.Parse(c.dbURL)
	if err != nil {
		b.Fatal(err)
	}
	prefix := u.Query().Get("application_name") + "/"
	db, err := sql.Open("pgx", c.dbURL)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	w := &connWatch{db: db, done: make(chan struct{}), now: map[string]int{}, peak: map[string]int{}}
	sample := func() {
		rows, err := db.Query(`SELECT application_name, count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND starts_with(application_name, $1) GROUP BY application_name`, prefix)
		if err != nil {
			return
		}
		defer rows.Close()
		now := map[string]int{}
		all := 0
		for rows.Next() {
			var app string
			var n int
			if rows.Scan(&app, &n) == nil {
				now[strings.TrimPrefix(app, prefix)] = n
				all += n
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.now = now
		for k, n := range now {
			w.peak[k] = max(w.peak[k], n)
		}
		w.peak[""] = max(w.peak[""], all)
	}
	sample()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return w
}

// stop ends the sampling (after a last sample) and returns the last and the
// most connections by instance; peak[""] is the most of all at once.
func (w *connWatch) stop() (now, peak map[string]int) {
	w.mu.Lock()
	closed := w.closed
	w.closed = true
	w.mu.Unlock()
	if !closed {
		close(w.done)
		w.wg.Wait()
		w.db.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now, w.peak
}
