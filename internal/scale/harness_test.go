package scale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// The harness: the binaries (built once per test process), a world (a
// store, a spec, a stub CLI, a config per instance), `serve` processes
// and what is read from them.

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds `orchestrator` and the seed command (without the race
// detector: they are measured, and the seed stores many runs) and returns
// their paths.
func binaries(tb testing.TB) (orchestrator, seed string) {
	tb.Helper()
	binOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			binErr = fmt.Errorf("the scale harness builds the program with go, which is not on PATH: %w", err)
			return
		}
		if binDir, binErr = os.MkdirTemp("", "orchestrator-scale-bin-"); binErr != nil {
			return
		}
		cmd := exec.Command(goBin, "build", "-o", binDir+string(filepath.Separator), "../../cmd/orchestrator", "./seed")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return filepath.Join(binDir, "orchestrator"), filepath.Join(binDir, "seed")
}

// tempDir is a temporary directory removed at the end of tb; on tmpfs
// (/dev/shm) when fast is set and there is one: the store's fsyncs there
// cost nothing, for tests that count rather than time.
func tempDir(tb testing.TB, fast bool) string {
	tb.Helper()
	if fast {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			if d, err := os.MkdirTemp("/dev/shm", "orchestrator-scale-"); err == nil {
				tb.Cleanup(func() { os.RemoveAll(d) })
				return d
			}
		}
	}
	return tb.TempDir()
}

// world is a store with runs seeded waiting, the spec they were made
// from, and a stub CLI that logs each start.
type world struct {
	tb      testing.TB
	dir     string
	dbURL   string // PostgreSQL; else the SQLite store in state("a")
	spec    string
	workdir string
	stub    string
	stubLog string
	// real, when set, is the CLI the stub execs after logging.
	real string
}

// stubScript logs "<epoch seconds with µs> <parent pid> <session>" (the
// session of --resume or --session-id, "-" without) and prints a turn's
// result, or execs the real CLI when one is given.
const stubScript = `#!%s
s=-; p=
for a in "$@"; do case "$p" in --resume|--session-id) s="$a" ;; esac; p="$a"; done
echo "$EPOCHREALTIME $PPID $s" >> %s
%s
`

func newWorld(tb testing.TB, fast bool, dbURL string) *world {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skip("the scale harness reads /proc: Linux only")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		tb.Skip("the scale harness's stub CLI needs bash")
	}
	dir := tempDir(tb, fast)
	w := &world{tb: tb, dir: dir, dbURL: dbURL, spec: filepath.Join(dir, "scale.md"), workdir: filepath.Join(dir, "work"),
		stub: filepath.Join(dir, "claude-stub"), stubLog: filepath.Join(dir, "starts")}
	if err := os.MkdirAll(w.workdir, 0o700); err != nil {
		tb.Fatal(err)
	}
	spec := "---\nname: scale\nsurfaces: [terminal]\nquestion_timeout: 720h\n---\nAnswer the question, then stop.\n"
	if err := os.WriteFile(w.spec, []byte(spec), 0o600); err != nil {
		tb.Fatal(err)
	}
	tail := `printf '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"%s","num_turns":1,"total_cost_usd":0}\n' "$s"`
	if w.real = os.Getenv("ORCHESTRATOR_SCALE_CLAUDE"); w.real != "" {
		tail = "exec " + shellQuote(w.real) + ` "$@"`
	}
	body := fmt.Sprintf(stubScript, bash, shellQuote(w.stubLog), tail)
	if err := os.WriteFile(w.stub, []byte(body), 0o700); err != nil {
		tb.Fatal(err)
	}
	return w
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// state is instance name's state directory; instance "a" holds the
// SQLite store.
func (w *world) state(name string) string { return filepath.Join(w.dir, "state-"+name) }

// seed stores n runs waiting (indexes from, …, from+n-1) with the seed
// command and returns how long it took.
func (w *world) seed(from, n, workers int) time.Duration {
	w.tb.Helper()
	_, seed := binaries(w.tb)
	args := []string{"-n", strconv.Itoa(n), "-from", strconv.Itoa(from), "-spec", w.spec, "-workdir", w.workdir, "-workers", strconv.Itoa(workers)}
	args = append(args, "-state", w.state("a"))
	if w.dbURL != "" {
		args = append(args, "-database-url", w.dbURL)
	}
	start := time.Now()
	out, err := exec.Command(seed, args...).CombinedOutput()
	if err != nil {
		w.tb.Fatalf("seed %d runs: %v\n%s", n, err, out)
	}
	return time.Since(start)
}

// config writes instance name's config file and returns its path.
func (w *world) config(name string) string {
	w.tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "state_dir: %q\n", w.state(name))
	if w.dbURL != "" {
		fmt.Fprintf(&b, "database_url: %q\n", w.dbURL)
	}
	fmt.Fprintf(&b, "log:\n  level: info\n  format: json\n")
	fmt.Fprintf(&b, "agent:\n  command: %q\n  timeout: 2m\n", w.stub)
	fmt.Fprintf(&b, "surfaces:\n  terminal:\n    enabled: true\n")
	fmt.Fprintf(&b, "specs:\n  dir: %q\n", filepath.Join(w.dir, "specs-"+name))
	fmt.Fprintf(&b, "serve:\n  listen: 127.0.0.1:0\n")
	path := filepath.Join(w.dir, "orchestrator-"+name+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		w.tb.Fatal(err)
	}
	return path
}

// orchestrator runs the program with instance name's config and returns
// its output.
func (w *world) orchestrator(name string, args ...string) ([]byte, error) {
	bin, _ := binaries(w.tb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--config", w.config(name)}, args...)...)
	cmd.Dir = w.workdir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("orchestrator %s: %w\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out, nil
}

// store opens the world's store in this process.
func (w *world) store() *store.Store {
	w.tb.Helper()
	st, err := store.OpenDatabase(context.Background(), w.state("a"), w.dbURL)
	if err != nil {
		w.tb.Fatal(err)
	}
	w.tb.Cleanup(func() { st.Close() })
	return st
}

// server is one `orchestrator serve` process.
type server struct {
	name string
	cmd  *exec.Cmd
	log  string
	base string // http://host:port
	done chan struct{}
}

// prlimitArgs returns how to start argv with an open-file limit of
// nofile (prlimit, else sh's ulimit), or why it cannot be done.
func prlimitArgs(nofile int, argv []string) ([]string, error) {
	if p, err := exec.LookPath("prlimit"); err == nil {
		return append([]string{p, fmt.Sprintf("--nofile=%d:%d", nofile, nofile), "--"}, argv...), nil
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		return append([]string{sh, "-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, nofile), "sh"}, argv...), nil
	}
	return nil, errors.New("neither prlimit (util-linux: apt-get install util-linux) nor sh is here to lower the open-file limit")
}

// serve starts `orchestrator serve` for instance name (nofile > 0: with
// that open-file limit) and waits until it serves HTTP.
func (w *world) serve(name string, nofile int) *server {
	w.tb.Helper()
	bin, _ := binaries(w.tb)
	argv := []string{bin, "--config", w.config(name), "serve"}
	if nofile > 0 {
		var err error
		if argv, err = prlimitArgs(nofile, argv); err != nil {
			w.tb.Fatal(err)
		}
	}
	s := &server{name: name, log: filepath.Join(w.dir, "serve-"+name+".log"), done: make(chan struct{})}
	logf, err := os.Create(s.log)
	if err != nil {
		w.tb.Fatal(err)
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Dir = w.workdir
	s.cmd.Stdin = nil // the terminal surface reads nothing: it logs questions
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		w.tb.Fatal(err)
	}
	go func() { s.cmd.Wait(); logf.Close(); close(s.done) }()
	w.tb.Cleanup(func() {
		s.stop()
		if w.tb.Failed() {
			w.tb.Logf("serve %s log (end):\n%s", name, tail(s.log, 40))
		}
	})
	deadline := time.Now().Add(5 * time.Minute)
	for s.base == "" {
		select {
		case <-s.done:
			w.tb.Fatalf("serve %s exited: %v\n%s", name, s.cmd.ProcessState, tail(s.log, 40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.tb.Fatalf("serve %s does not serve HTTP after 5 minutes\n%s", name, tail(s.log, 40))
		}
		s.base = servingAddr(s.log)
	}
	return s
}

// servingAddr finds the address of serve's "serving" log line.
func servingAddr(log string) string {
	f, err := os.Open(log)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"msg":"serving"`)) {
			continue
		}
		var v struct{ Addr string }
		if json.Unmarshal(line, &v) == nil && v.Addr != "" {
			return "http://" + v.Addr
		}
	}
	return ""
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop ends serve (SIGTERM, then SIGKILL after a minute).
func (s *server) stop() {
	if s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// pid is serve's process ID (prlimit execs it, so it is the child's).
func (s *server) pid() int { return s.cmd.Process.Pid }

// get fetches path from serve, bounded by timeout; it returns the status
// code, the body and how long it took.
func (s *server) get(path string, timeout time.Duration) (int, []byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return 0, nil, 0, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, time.Since(start), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, time.Since(start), err
}

// metric reads one unlabelled sample of a /metrics body.
func metric(body []byte, name string) (float64, bool) {
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// usage is what /proc says of a process at one moment.
type usage struct {
	at    time.Time
	ticks int64 // utime + stime, in clock ticks
	rss   int64 // bytes
	fds   int
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go runs on.
const clockTick = 100

func readUsage(pid int) (usage, error) {
	u := usage{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	u.ticks = ut + st
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return u, fmt.Errorf("/proc/%d/status: VmRSS %q", pid, v)
			}
			u.rss = kb << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.fds = len(fds)
	return u, nil
}

// The ask room's log lines (runner/room.go): it starts showing the waiting
// questions, and has shown them all.
const (
	askRoomShowing = "ask room: showing the waiting questions"
	askRoomShown   = "ask room: every waiting question shown"
)

// logged reports whether serve's log holds msg.
func (s *server) logged(msg string) bool {
	b, err := os.ReadFile(s.log)
	return err == nil && bytes.Contains(b, []byte(msg))
}

// settle waits until serve has taken up the waiting runs: its goroutines
// and open files hold still (within 1%, or 5) over four looks a second
// apart, and /metrics answers. It returns the goroutines then.
func (s *server) settle(tb testing.TB, timeout time.Duration) float64 {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	type look struct{ g, fds float64 }
	var looks []look
	near := func(a, b float64) bool { return a-b <= max(5, b/100) && b-a <= max(5, a/100) }
	for {
		select {
		case <-s.done:
			tb.Fatalf("serve %s exited: %v\n%s", s.name, s.cmd.ProcessState, tail(s.log, 40))
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("serve %s did not settle in %s (goroutines and open files at the last looks: %v)", s.name, timeout, looks)
		}
		code, body, _, err := s.get("/metrics", time.Minute)
		if err != nil || code != http.StatusOK {
			continue
		}
		g, _ := metric(body, "go_goroutines")
		u, err := readUsage(s.pid())
		if err != nil {
			tb.Fatal(err)
		}
		looks = append(looks, look{g, float64(u.fds)})
		if len(looks) > 4 {
			looks = looks[1:]
		}
		// The instance that runs the ask room has shown every waiting
		// question first: its start's work (a few goroutines at a time)
		// does not show in the counts.
		if s.logged(askRoomShowing) && !s.logged(askRoomShown) {
			continue
		}
		if len(looks) == 4 && !slices.ContainsFunc(looks, func(l look) bool { return !near(l.g, g) || !near(l.fds, float64(u.fds)) }) {
			return g
		}
	}
}

// window is what one serve cost over a window of time.
type window struct {
	cpuPct       float64 // of one core
	rssMB        float64 // at the end
	goroutines   float64 // at the end
	fds          int     // at the end
	scrapeMS     float64 // /metrics, median of the window's scrapes
	scrapes      int
	statusMS     float64 // `orchestrator status`, once at the end
	statusBytes  int
	statusFailed error
}

// measure watches s for d: CPU time from /proc at both ends, a /metrics
// scrape every 5 s (a Prometheus default interval is 15–60 s: this is
// more), then one `orchestrator status`.
func (w *world) measure(s *server, d time.Duration) window {
	w.tb.Helper()
	var out window
	start, err := readUsage(s.pid())
	if err != nil {
		w.tb.Fatal(err)
	}
	var scrapes []float64
	end := start.at.Add(d)
	for time.Now().Before(end) {
		code, body, took, err := s.get("/metrics", time.Minute)
		if err != nil || code != http.StatusOK {
			w.tb.Fatalf("serve %s: /metrics: %d %v", s.name, code, err)
		}
		scrapes = append(scrapes, float64(took)/float64(time.Millisecond))
		out.goroutines, _ = metric(body, "go_goroutines")
		select {
		case <-s.done:
			w.tb.Fatalf("serve %s exited: %v", s.name, s.cmd.ProcessState)
		case <-time.After(min(5*time.Second, time.Until(end))):
		}
	}
	stop, err := readUsage(s.pid())
	if err != nil {
		w.tb.Fatal(err)
	}
	out.cpuPct = 100 * float64(stop.ticks-start.ticks) / clockTick / stop.at.Sub(start.at).Seconds()
	out.rssMB = float64(stop.rss) / 1e6
	out.fds = stop.fds
	out.scrapeMS, out.scrapes = median(scrapes), len(scrapes)
	t0 := time.Now()
	status, err := w.orchestrator(s.name, "status")
	out.statusMS = float64(time.Since(t0)) / float64(time.Millisecond)
	out.statusBytes, out.statusFailed = len(status), err
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// windowLength is the measuring window: 60 s, or
// ORCHESTRATOR_SCALE_WINDOW (a Go duration) for quick tries.
func windowLength(tb testing.TB) time.Duration {
	v := os.Getenv("ORCHESTRATOR_SCALE_WINDOW")
	if v == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("ORCHESTRATOR_SCALE_WINDOW=%q: want a positive Go duration such as 10s", v)
	}
	return d
}

// starts reads the stub's log: each session's CLI starts, in order.
func (w *world) starts() (map[string][]time.Time, error) {
	data, err := os.ReadFile(w.stubLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]time.Time{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue // a line being written
		}
		at, err := parseEpoch(f[0])
		if err != nil {
			return nil, fmt.Errorf("stub log %s: %w", w.stubLog, err)
		}
		out[f[2]] = append(out[f[2]], at)
	}
	return out, nil
}

// parseEpoch reads bash's $EPOCHREALTIME ("1700000000.123456").
func parseEpoch(s string) (time.Time, error) {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok {
		sec, frac, ok = strings.Cut(s, ",") // some locales
	}
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || !ok {
		return time.Time{}, fmt.Errorf("bad time %q (bash 5's $EPOCHREALTIME wanted)", s)
	}
	frac = (frac + "000000000")[:9]
	ns, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q", s)
	}
	return time.Unix(n, ns), nil
}

// answer records the answer to run i's question in this process (as
// `orchestrator answer` does: the store decides) and returns when the
// call started: the commit is within the call.
func (w *world) answer(st *store.Store, i int) time.Time {
	w.tb.Helper()
	resp := Answer(i)
	resp.At = time.Now()
	at := time.Now()
	if _, err := st.Offer(context.Background(), resp); err != nil {
		w.tb.Fatalf("answer run %s: %v", RunID(i), err)
	}
	return at
}

// waitStart waits until the CLI of run i starts after at and returns when.
func (w *world) waitStart(i int, at time.Time, timeout time.Duration) time.Time {
	w.tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		starts, err := w.starts()
		if err != nil {
			w.tb.Fatal(err)
		}
		for _, t := range starts[SessionID(i)] {
			if !t.Before(at) {
				return t
			}
		}
		if time.Now().After(deadline) {
			w.tb.Fatalf("run %s: its CLI did not start within %s of the answer", RunID(i), timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waiting counts the store's waiting runs.
func waiting(tb testing.TB, st *store.Store) int {
	tb.Helper()
	runs, err := st.ListRuns(context.Background(), store.RunFilter{Status: []store.RunStatus{store.RunWaiting}, Brief: true})
	if err != nil {
		tb.Fatal(err)
	}
	return len(runs)
}
