package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Process is one CLI process. Its events are a pull iterator:
//
//	proc, err := ex.Start(ctx, req)
//	if err != nil { … } // an invalid request
//	for proc.Next() {
//		switch ev := proc.Event().(type) { … }
//	}
//	out := proc.Outcome()
//
// Next, Event and Outcome are for one goroutine. Outcome may be called
// before Next returned false: it reads the rest of the stream (tracking it,
// not returning it). It waits for the process and is idempotent. Always
// call Outcome: it releases the run's resources (temporary MCP config,
// transcript file, timers).
//
// Stopping: cancelling ctx (or Config.Timeout, or Config.IdleTimeout while
// Next waits without output) sends SIGINT to the CLI's process group and
// SIGKILL after Config.KillGrace; the Outcome's category is then
// "cancelled", "timeout" or "idle_timeout" — unless the result line had
// already arrived, in which case the result decides. A CLI still running
// Config.ResultGrace after its result line is stopped the same way, with a
// warning. When the CLI exits, what is left of its process group is killed.
type Process struct {
	e          *Executor
	req        Request
	log        *slog.Logger
	start      time.Time
	ctx        context.Context
	cancel     context.CancelFunc
	cmd        *exec.Cmd
	pid        int
	pr         *os.File
	closePR    sync.Once
	stderr     *boundedBuffer
	transcript *transcript
	tpath      string
	mcpTemp    string
	claw       bool
	notStarted *Exit // set when the CLI was never started

	// Consumer side.
	rd       *Reader
	tracker  Tracker
	ev       Event
	done     bool
	idle     *time.Timer
	readDone chan struct{}

	// Shared with the supervisor.
	readBytes atomic.Int64
	reading   atomic.Bool
	resultCh  chan struct{}
	resultOne sync.Once
	exited    chan struct{}
	ps        *os.ProcessState // written before exited is closed
	superDone chan struct{}

	// The control protocol (control.go).
	ctl      controlState
	pendingN atomic.Int32
	heldN    atomic.Int32 // Holds not yet released
	bg       backgroundTasks

	mu          sync.Mutex
	stop        Category
	stopDetail  string
	stopResult  bool // the result was in when the run was stopped
	resultSeen  bool
	warnings    []string
	transcErr   error
	outcomeOnce sync.Once
	outcome     Outcome
}

// Start starts the CLI for req. The error is for an invalid request (or an
// unusable transcript path) only: a CLI that cannot be started gives a Process
// whose Outcome has CategoryCLINotFound, and a ctx that is already done
// gives CategoryCancelled / CategoryTimeout without starting anything.
func (e *Executor) Start(ctx context.Context, req Request) (*Process, error) {
	if err := e.validate(req); err != nil {
		return nil, err
	}
	r := &Process{
		e:         e,
		req:       req,
		log:       e.log,
		start:     time.Now(),
		claw:      e.cfg.Harness == HarnessClaw,
		readDone:  make(chan struct{}),
		resultCh:  make(chan struct{}),
		exited:    make(chan struct{}),
		superDone: make(chan struct{}),
		stderr:    newBoundedBuffer(e.cfg.StderrLimit),
	}
	if err := r.openTranscript(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		cat, detail := stopCause(ctx, e.cfg.Timeout)
		r.notStarted = &Exit{Stop: cat, StopDetail: detail}
		return r, nil
	}
	env := e.Environ()
	path, err := e.resolveCommand(env)
	if err != nil {
		r.notStarted = &Exit{Stop: CategoryCLINotFound, StopDetail: fmt.Sprintf("agent CLI not found: %v", err)}
		r.log.Warn("agent CLI not found", "command", e.cfg.Command, "err", err)
		return r, nil
	}
	if len(e.cfg.MCPServers) > 0 {
		if r.mcpTemp, err = writeMCPConfig(e.cfg.MCPServers); err != nil {
			r.closeTranscript()
			return nil, err
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		r.cleanup()
		return nil, fmt.Errorf("start agent CLI: stdout pipe: %w", err)
	}
	cmd := exec.Command(path, e.args(req, r.mcpTemp)...)
	cmd.Dir = req.WorkDir
	cmd.Env = env
	cmd.Stdin = nil // /dev/null: an open stdin makes the CLI wait for it
	if promptOnStdin(&e.cfg, req) {
		// The CLI reads its prompt from stdin up to EOF (exec closes the
		// pipe once the prompt is written).
		cmd.Stdin = strings.NewReader(req.Prompt)
	}
	var stdinW *os.File
	if e.cfg.ControlProtocol {
		// Stdin stays open for the turn: the prompt and the answers to
		// the CLI's control requests go there (control.go).
		inR, inW, err := os.Pipe()
		if err != nil {
			pr.Close()
			pw.Close()
			r.cleanup()
			return nil, fmt.Errorf("start agent CLI: stdin pipe: %w", err)
		}
		cmd.Stdin, stdinW = inR, inW
		defer inR.Close() // the child has its own copy once started
	}
	cmd.Stdout = pw
	cmd.Stderr = r.stderr
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = max(e.cfg.KillGrace, time.Second)
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		r.cleanup()
		if !startable(err) {
			r.notStarted = &Exit{Stop: CategoryCLINotFound, StopDetail: fmt.Sprintf("agent CLI cannot be started: %v", err)}
			return r, nil
		}
		return nil, fmt.Errorf("start agent CLI: %w", err)
	}
	pw.Close()
	r.cmd, r.pid, r.pr = cmd, cmd.Process.Pid, pr
	if e.cfg.Timeout > 0 {
		r.ctx, r.cancel = context.WithTimeout(ctx, e.cfg.Timeout)
	} else {
		r.ctx, r.cancel = context.WithCancel(ctx)
	}
	if e.cfg.IdleTimeout > 0 && !r.claw {
		r.idle = time.NewTimer(e.cfg.IdleTimeout)
		r.idle.Stop() // the idle clock runs only while Next waits
	}
	r.rd = NewReader(runSource{r}, ReaderOptions{MaxLineBytes: e.cfg.MaxLineBytes})
	if stdinW != nil {
		r.ctl.stdin = stdinW
		if req.Prompt != "" {
			// Written while the CLI starts; a write error (the CLI died)
			// shows in the Outcome as a warning.
			go func() {
				if err := r.writeControl(userMessage(req.Prompt)); err != nil {
					r.warn("send the prompt: " + err.Error())
				}
			}()
		}
	}
	r.log.Info("agent run started", "pid", r.pid, "harness", e.cfg.Harness,
		"resume", req.Resume, "session_id", req.SessionID, "workdir", req.WorkDir,
		"transcript", r.tpath, "prompt_bytes", len(req.Prompt))
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		r.ps = cmd.ProcessState
		close(r.exited)
	}()
	go r.supervise()
	return r, nil
}

// PID is the CLI's process id (also its process group id); 0 when it was
// not started.
func (r *Process) PID() int { return r.pid }

// Kill stops the CLI's process group at once, with no interrupt first and
// no grace: for a CLI that must not take one more step (its run was taken
// over by another process). The Outcome's category is "cancelled".
func (r *Process) Kill() {
	if r.pid == 0 {
		return
	}
	if r.requestStop(CategoryCancelled, "the agent CLI was killed: its run's lease was lost") {
		r.log.Warn("killing the agent CLI's process group", "pid", r.pid)
	}
	_ = killGroup(r.pid)
}

// TranscriptPath is where the raw output is saved ("" when it is not).
func (r *Process) TranscriptPath() string { return r.tpath }

// Next advances to the next event; false at the end of the stream.
func (r *Process) Next() bool {
	if r.done || r.notStarted != nil {
		return false
	}
	if r.claw {
		return r.nextClaw()
	}
	if r.idle != nil {
		r.idle.Reset(r.e.cfg.IdleTimeout)
	}
	ok := r.rd.Next()
	if r.idle != nil {
		r.idle.Stop()
	}
	if !ok {
		r.finishReading()
		return false
	}
	r.ev = r.rd.Event()
	r.observe(r.ev)
	return true
}

// Event returns the event Next advanced to.
func (r *Process) Event() Event { return r.ev }

func (r *Process) observe(ev Event) {
	r.tracker.Observe(ev)
	if so, ok := ev.(*SystemOther); ok && r.bg.observe(so) && r.e.cfg.ControlProtocol {
		r.mu.Lock()
		done := r.resultSeen
		r.mu.Unlock()
		if done && r.bg.inFlight() == 0 {
			// The tasks the result left running have ended: the CLI
			// may finish now.
			r.closeStdin()
		}
	}
	if r.e.cfg.ControlProtocol {
		r.observeControl(ev)
	}
	if _, ok := ev.(*Result); ok {
		r.mu.Lock()
		r.resultSeen = true
		r.mu.Unlock()
		r.resultOne.Do(func() { close(r.resultCh) })
	}
}

func (r *Process) finishReading() {
	r.done = true
	r.ev = nil
	r.closeRead()
	close(r.readDone)
}

// nextClaw reads claw's whole output and yields its envelope as a *Result.
func (r *Process) nextClaw() bool {
	r.done = true
	src := runSource{r}
	limit := int64(r.e.cfg.MaxLineBytes)
	out, err := io.ReadAll(io.LimitReader(src, limit+1))
	if int64(len(out)) > limit {
		_, _ = io.Copy(io.Discard, src)
		r.warn(fmt.Sprintf("claw output longer than %d bytes ignored", limit))
		out = nil
	}
	if err != nil && !errors.Is(err, os.ErrClosed) {
		r.warn("read claw output: " + err.Error())
	}
	r.closeRead()
	close(r.readDone)
	if len(strings.TrimSpace(string(out))) == 0 {
		return false
	}
	res, perr := ParseClawEnvelope(out)
	if perr != nil {
		r.warn("claw output: " + perr.Error())
		return false
	}
	if res.SessionID() == "" && r.req.Resume != "" {
		res.sessionID = r.req.Resume
	}
	r.ev = res
	r.observe(res)
	return true
}

// Outcome drains the stream, waits for the process and returns what the
// run came to. It is idempotent.
func (r *Process) Outcome() Outcome {
	r.outcomeOnce.Do(func() {
		if r.notStarted != nil {
			x := *r.notStarted
			x.Duration = time.Since(r.start)
			x.TranscriptPath = r.tpath
			r.closeTranscript()
			r.outcome = r.tracker.Outcome(x)
			return
		}
		for r.Next() {
		}
		<-r.exited
		<-r.superDone
		r.cancel()
		r.cleanup()
		code, sig := exitStatus(r.ps)
		r.mu.Lock()
		x := Exit{
			Known:            true,
			Code:             code,
			Signal:           sig,
			Stop:             r.stop,
			StopDetail:       r.stopDetail,
			ResultBeforeStop: r.stopResult,
			Stderr:           r.stderr.String(),
			Duration:         time.Since(r.start),
			Stats:            r.rd.Stats(),
			Diagnostics:      r.rd.Diagnostics(),
			FirstOversize:    r.rd.FirstOversize(),
			Warnings:         append([]string(nil), r.warnings...),
			TranscriptPath:   r.tpath,
		}
		if r.transcErr != nil {
			x.Warnings = append(x.Warnings, "transcript not fully saved: "+r.transcErr.Error())
		}
		r.mu.Unlock()
		if err := r.rd.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
			x.Warnings = append(x.Warnings, err.Error())
		}
		r.outcome = r.tracker.Outcome(x)
		r.log.Info("agent run ended", "pid", r.pid, "session_id", r.outcome.SessionID,
			"status", r.outcome.Status, "category", r.outcome.Category,
			"exit_code", code, "signal", sig, "duration", x.Duration)
	})
	return r.outcome
}

// supervise enforces the timeouts and the graces, and cleans up after the
// process ends.
func (r *Process) supervise() {
	defer close(r.superDone)
	cfg := &r.e.cfg
	var idleC, graceC, killC, drainC <-chan time.Time
	if r.idle != nil {
		idleC = r.idle.C
	}
	ctxDone := r.ctx.Done()
	resultCh := r.resultCh
	exited := r.exited
	readDone := r.readDone
	drainPeriod := max(cfg.KillGrace, time.Second)
	var drainMark, graceMark int64
	for exited != nil || readDone != nil {
		select {
		case <-ctxDone:
			ctxDone = nil
			cat, detail := stopCause(r.ctx, cfg.Timeout)
			if r.requestStop(cat, detail) {
				killC = r.interrupt(cfg.KillGrace)
			}
		case <-idleC:
			if r.pendingN.Load() > 0 || r.heldN.Load() > 0 {
				// A person is being asked: silence is expected.
				r.idle.Reset(cfg.IdleTimeout)
				continue
			}
			idleC = nil
			if r.requestStop(CategoryIdleTimeout, fmt.Sprintf("no output from the agent CLI for %s", cfg.IdleTimeout)) {
				killC = r.interrupt(cfg.KillGrace)
			}
		case <-resultCh:
			resultCh = nil
			graceC = time.After(cfg.ResultGrace)
			graceMark = r.readBytes.Load()
		case <-graceC:
			graceC = nil
			if n := r.readBytes.Load(); r.bg.inFlight() > 0 || n != graceMark {
				// Background tasks still run, or the CLI went on after
				// them (a turn of their notification): it is not hanging
				// (idle_timeout and timeout still apply).
				graceMark = n
				graceC = time.After(cfg.ResultGrace)
				continue
			}
			r.warn(fmt.Sprintf("the agent CLI was still running %s after its result line; stopped it", cfg.ResultGrace))
			if killC == nil {
				killC = r.interrupt(cfg.KillGrace)
			}
		case <-killC:
			killC = nil
			r.log.Warn("killing the agent CLI's process group", "pid", r.pid)
			_ = killGroup(r.pid)
		case <-exited:
			exited = nil
			r.closeStdin()
			ctxDone, idleC, graceC, killC, resultCh = nil, nil, nil, nil, nil
			// Whatever the CLI left in its group (tools, MCP servers) goes too.
			_ = killGroup(r.pid)
			if readDone != nil {
				drainMark = r.readBytes.Load()
				drainC = time.After(drainPeriod)
			}
		case <-drainC:
			// The process is gone but the stream is still open: a
			// descendant outside the group holds it. Close it once the
			// reader is blocked on it with nothing new.
			if n := r.readBytes.Load(); n == drainMark && r.reading.Load() {
				r.warn("the agent CLI's output stayed open after it exited; closed it")
				r.closeRead()
				drainC = nil
			} else {
				drainMark = n
				drainC = time.After(drainPeriod)
			}
		case <-readDone:
			readDone = nil
			drainC = nil
		}
	}
}

func stopCause(ctx context.Context, timeout time.Duration) (Category, string) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if timeout > 0 {
			return CategoryTimeout, fmt.Sprintf("the run took longer than %s", timeout)
		}
		return CategoryTimeout, "the run's deadline passed"
	}
	return CategoryCancelled, "the run was cancelled"
}

// requestStop records why the run is being stopped; false when the process
// has ended already or a reason was recorded before.
func (r *Process) requestStop(cat Category, detail string) bool {
	select {
	case <-r.exited:
		return false
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != "" {
		return false
	}
	r.stop, r.stopDetail, r.stopResult = cat, detail, r.resultSeen
	r.log.Info("stopping the agent CLI", "pid", r.pid, "reason", cat)
	return true
}

// interrupt sends SIGINT to the group and returns when to kill it.
func (r *Process) interrupt(grace time.Duration) <-chan time.Time {
	if err := interruptGroup(r.pid); err != nil {
		r.log.Warn("interrupt the agent CLI", "pid", r.pid, "err", err)
	}
	return time.After(grace)
}

func (r *Process) warn(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.warnings) < maxListed {
		r.warnings = append(r.warnings, msg)
	}
}

func (r *Process) closeRead() {
	r.closePR.Do(func() {
		if r.pr != nil {
			r.pr.Close()
		}
	})
}

func (r *Process) cleanup() {
	r.closeTranscript()
	if r.mcpTemp != "" {
		if err := os.Remove(r.mcpTemp); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("remove MCP config", "path", r.mcpTemp, "err", err)
		}
		r.mcpTemp = ""
	}
}

// runSource is the CLI's stdout as the Reader sees it: every read feeds the
// idle clock and the transcript.
type runSource struct{ r *Process }

func (s runSource) Read(p []byte) (int, error) {
	r := s.r
	r.reading.Store(true)
	n, err := r.pr.Read(p)
	r.reading.Store(false)
	if n > 0 {
		r.readBytes.Add(int64(n))
		if r.idle != nil {
			r.idle.Reset(r.e.cfg.IdleTimeout)
		}
		r.save(p[:n])
	}
	return n, err
}

func (r *Process) openTranscript() error {
	path := r.req.TranscriptPath
	if path == "" && r.e.cfg.TranscriptDir != "" {
		ext := ".ndjson"
		if r.claw {
			ext = ".json"
		}
		path = filepath.Join(r.e.cfg.TranscriptDir, time.Now().UTC().Format("20060102T150405.000000000Z")+ext)
	}
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("open transcript: %w", err)
	}
	// Appending: several runs may share one transcript file.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open transcript: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open transcript: %w", err)
	}
	r.transcript = &transcript{f: f, max: r.e.cfg.MaxLineBytes, off: fi.Size(), lineStart: fi.Size()}
	r.tpath = path
	return nil
}

func (r *Process) save(p []byte) {
	if r.transcript == nil {
		return
	}
	if err := r.transcript.write(p); err != nil {
		r.mu.Lock()
		if r.transcErr == nil {
			r.transcErr = err
		}
		r.mu.Unlock()
		r.transcript.f.Close()
		r.transcript = nil
	}
}

func (r *Process) closeTranscript() {
	if r.transcript != nil {
		if err := r.transcript.f.Close(); err != nil {
			r.mu.Lock()
			if r.transcErr == nil {
				r.transcErr = err
			}
			r.mu.Unlock()
		}
		r.transcript = nil
	}
}

// TranscriptPrefixBytes is how much of a line over the line cap a saved
// transcript keeps (at most the cap): the line is cut to its first bytes,
// and so reads back as a malformed line.
const TranscriptPrefixBytes = 64 << 10

// transcript saves the CLI's raw stdout as it streams. A line longer than
// max (the Reader's cap, which skips it) is cut back to its first
// TranscriptPrefixBytes: the file is truncated to the line's start plus
// that prefix and the rest of the line is not written, so a 100 MB line
// costs a bounded amount of disk, not the whole line.
type transcript struct {
	f         *os.File
	max       int
	off       int64 // the file's size
	lineStart int64 // where the current line starts in the file
	lineLen   int64 // bytes of the current line so far, without "\n"
	cut       bool  // the current line was cut
}

func (t *transcript) write(p []byte) error {
	for len(p) > 0 {
		seg, rest, nl := p, []byte(nil), false
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			seg, rest, nl = p[:i], p[i+1:], true
		}
		if !t.cut && t.lineLen+int64(len(seg)) > int64(t.max) {
			// The line is over the cap: keep its prefix only.
			prefix := min(int64(TranscriptPrefixBytes), int64(t.max))
			if keep := prefix - t.lineLen; keep > 0 {
				if err := t.put(seg[:min(int64(len(seg)), keep)]); err != nil {
					return err
				}
			}
			if end := t.lineStart + prefix; t.off > end {
				if err := t.f.Truncate(end); err != nil {
					return err
				}
				t.off = end
			}
			t.cut = true
		}
		if !t.cut {
			n := len(seg)
			if nl {
				n++ // the "\n" in the same write
			}
			if err := t.put(p[:n]); err != nil {
				return err
			}
		} else if nl {
			if err := t.put([]byte{'\n'}); err != nil {
				return err
			}
		}
		t.lineLen += int64(len(seg))
		if nl {
			t.lineStart, t.lineLen, t.cut = t.off, 0, false
		}
		p = rest
	}
	return nil
}

func (t *transcript) put(b []byte) error {
	n, err := t.f.Write(b)
	t.off += int64(n)
	return err
}

// writeMCPConfig writes {"mcpServers": servers} to a new 0600 file.
func writeMCPConfig(servers map[string]any) (string, error) {
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	f, err := os.CreateTemp("", "orchestrator-mcp-*.json") // mode 0600
	if err != nil {
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write MCP config: %w", err)
	}
	return f.Name(), nil
}

// resolveCommand finds Config.Command (LookCommand).
func (e *Executor) resolveCommand(env []string) (string, error) {
	return LookCommand(e.cfg.Command, env)
}

// LookCommand finds the agent CLI name as a run does: a path is made
// absolute (it would otherwise be taken relative to the work dir); a bare
// name is looked up in the PATH of env (the child's environment), else of
// this process, in absolute directories only. `validate` uses it too.
func LookCommand(name string, env []string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		if err := executable(abs); err != nil {
			return "", err
		}
		return abs, nil
	}
	path, ok := envValue(env, "PATH")
	if !ok {
		path = os.Getenv("PATH")
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never run a program found relative to the current dir
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not in PATH: %w", name, exec.ErrNotFound)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", path, os.ErrPermission)
	}
	return nil
}
