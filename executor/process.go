package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
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
	clock    *turnClock   // Config.Timeout's clock; nil without one
	timeout  *time.Timer  // fires when the clock may have reached Config.Timeout
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
	r := e.newProcess(req)
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
	stdinW, err := r.spawn(path, env)
	if err != nil {
		return nil, err
	}
	if r.notStarted != nil {
		return r, nil
	}
	r.begin(ctx, stdinW)
	return r, nil
}

// newProcess is the Process for req before anything is opened or started.
func (e *Executor) newProcess(req Request) *Process {
	return &Process{
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
}

// begin sets up everything a started CLI runs under: the run's context with
// Config.Timeout, the idle clock, the stream's Reader, the prompt on the
// control protocol's stdin (stdinW, nil without it), and the goroutines that
// wait for the process and supervise it.
func (r *Process) begin(ctx context.Context, stdinW *os.File) {
	cfg, req := &r.e.cfg, r.req
	// Config.Timeout is the turn's clock (turnclock.go), which stands
	// while a person is asked: not a deadline on the context.
	r.ctx, r.cancel = context.WithCancel(ctx)
	if cfg.Timeout > 0 {
		r.clock = newTurnClock(time.Now)
		r.timeout = time.NewTimer(cfg.Timeout)
	}
	if cfg.IdleTimeout > 0 && !r.claw {
		r.idle = time.NewTimer(cfg.IdleTimeout)
		r.idle.Stop() // the idle clock runs only while Next waits
	}
	r.rd = NewReader(runSource{r}, ReaderOptions{MaxLineBytes: cfg.MaxLineBytes})
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
	r.log.Info("agent run started", "pid", r.pid, "harness", cfg.Harness,
		"resume", req.Resume, "session_id", req.SessionID, "workdir", req.WorkDir,
		"transcript", r.tpath, "prompt_bytes", len(req.Prompt))
	go func() {
		_ = r.cmd.Wait() // the exit status is read from ProcessState
		r.ps = r.cmd.ProcessState
		close(r.exited)
	}()
	go r.supervise()
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
