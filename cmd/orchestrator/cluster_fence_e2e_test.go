package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Fencing, with three real `serve` instances, the real CLI and PostgreSQL:
// the instance streaming a run's answer turn, whose model runs a command
// with a side effect (a line appended to a file), is killed (SIGKILL) or
// stopped (SIGSTOP) past its lease. Another instance takes the run over;
// the answer reaches the model once, the command runs once, and never do
// two CLIs drive the run at once: the fake API never has two requests of
// the run's conversation in flight together, and the process list never
// shows two CLIs on the run's session. Five tries each way, the fault
// landing alternately while the model's tool call streams (before the
// command) and while its last reply streams (after it).

// fenceTries is how many tries each fault gets.
const fenceTries = 5

var tryNumber = regexp.MustCompile(`try-(\d+)`)

// countingRules: "Count for try-N" asks a question; its answer (or, after
// a takeover, the continue prompt) makes the model append a line to
// dir/count-N with Bash, unless the conversation has the command's output
// already ("counted-42", which its text does not hold); the output gets a
// slow last reply. The replies of
// the answer's turn stream slowly, for the fault to land in them.
func countingRules(dir string) []fakeapi.Rule {
	const delay = 600 * time.Millisecond
	counted := func(r fakeapi.Request) bool {
		for _, m := range r.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" && strings.Contains(b.Content, "counted-42") {
					return true
				}
			}
			if m.Role == "user" && strings.Contains(m.Text(), "counted-42") {
				return true // the orchestrator told what the command printed
			}
		}
		return false
	}
	count := func(r fakeapi.Request) fakeapi.Reply {
		if counted(r) {
			return fakeapi.Reply{Text: "Finished after the interruption."}
		}
		try := "0"
		for _, m := range r.Messages {
			if x := tryNumber.FindStringSubmatch(m.Text()); x != nil {
				try = x[1]
				break
			}
		}
		return fakeapi.Reply{Text: "Counting, with JWT.", ChunkDelay: delay, Chunks: 4, ToolUse: &fakeapi.ToolUse{Name: "Bash",
			Input: map[string]any{"command": "echo x >> " + filepath.Join(dir, "count-"+try) + " && echo counted-$((40+2))", "description": "Count"}}}
	}
	return []fakeapi.Rule{
		{When: "counted-42", Reply: fakeapi.Reply{Text: "Implemented with JWT.", ChunkDelay: delay, Chunks: 4}},
		{When: "Count for try", Reply: fakeapi.Reply{Text: "I need a decision.\n" + authMarker}},
		{When: answerRule, Respond: count},
		{When: "from where you left off", Respond: count},
	}
}

// cliWatch samples the process list and remembers, for each session, the
// most CLI processes seen on it at once.
type cliWatch struct {
	mu   sync.Mutex
	most map[string]int
	seen map[string]string // the process list when most was seen, when above 1
	want map[string]bool
	stop chan struct{}
	done chan struct{}
}

func watchCLIs(t *testing.T) *cliWatch {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc to list processes")
	}
	w := &cliWatch{most: map[string]int{}, seen: map[string]string{}, want: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			w.sample()
		}
	}()
	t.Cleanup(func() { close(w.stop); <-w.done })
	return w
}

// session adds a session to watch.
func (w *cliWatch) session(id string) {
	w.mu.Lock()
	w.want[id] = true
	w.mu.Unlock()
}

func (w *cliWatch) sample() {
	w.mu.Lock()
	ids := make([]string, 0, len(w.want))
	for id := range w.want {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	type proc struct{ pid, ppid, session, stat string }
	var found []proc
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie
		}
		stat, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		// pid (comm) state ppid …: comm may hold spaces, so read after ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--resume" || args[i] == "--session-id" {
				found = append(found, proc{pid: filepath.Base(filepath.Dir(p)), ppid: f[1], session: args[i+1], stat: string(stat)})
			}
		}
	}
	// A CLI's own children (a fork not yet exec'd shows its parent's
	// arguments) are the same CLI: only the processes whose parent is not
	// a CLI of the session count.
	n := map[string]int{}
	list := map[string][]string{}
	for _, p := range found {
		child := false
		for _, q := range found {
			child = child || (q.pid == p.ppid && q.session == p.session)
		}
		list[p.session] = append(list[p.session], p.stat)
		if !child {
			n[p.session]++
		}
	}
	w.mu.Lock()
	for _, id := range ids {
		if n[id] > w.most[id] {
			w.most[id] = n[id]
			if n[id] > 1 {
				w.seen[id] = strings.Join(list[id], "\n")
			}
		}
	}
	w.mu.Unlock()
}

// mostAtOnce is the most CLIs seen at once on session id.
func (w *cliWatch) mostAtOnce(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.most[id]
}

// overlapping reports two requests of the conversation of try that were
// in flight together at the fake API.
func overlapping(reqs []fakeapi.Request, try string) string {
	var mine []fakeapi.Request
	for _, r := range reqs {
		if len(r.Messages) > 0 && strings.Contains(r.Messages[0].Text(), "Count for try-"+try+".") {
			mine = append(mine, r)
		}
	}
	for i, a := range mine {
		for _, b := range mine[i+1:] {
			aEnd, bEnd := a.Ended, b.Ended
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.Time.Before(bEnd) && b.Time.Before(aEnd) {
				return fmt.Sprintf("%q (%s–%s) and %q (%s–%s)", clipText(a.LastUserText), a.Time.Format("15:04:05.000"), aEnd.Format("15:04:05.000"),
					clipText(b.LastUserText), b.Time.Format("15:04:05.000"), bEnd.Format("15:04:05.000"))
			}
		}
	}
	return ""
}

func clipText(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func TestClusterKillTheInstanceStreamingAnAnswerTurnRunsItsCommandOnce(t *testing.T) {
	t.Parallel()
	testFenceTries(t, syscall.SIGKILL)
}

func TestClusterStopTheInstanceStreamingAnAnswerTurnPastItsLease(t *testing.T) {
	t.Parallel()
	testFenceTries(t, syscall.SIGSTOP)
}

func testFenceTries(t *testing.T, sig syscall.Signal) {
	counts := t.TempDir()
	c := newCluster(t, 3, "approvals:\n  allow: [\"Bash\"]\n", countingRules(counts)...)
	for _, in := range c.nodes {
		c.start(in)
	}
	st := c.store()
	ctx := context.Background()
	clis := watchCLIs(t)
	defer func() {
		if t.Failed() {
			for _, in := range c.nodes {
				if in.out != nil {
					t.Logf("%s:\n%s", in.name, in.out.String())
				}
			}
		}
	}()
	for try := 1; try <= fenceTries; try++ {
		afterCommand := try%2 == 0 // the fault lands after the command ran, else before
		tryS := fmt.Sprint(try)
		counter := filepath.Join(counts, "count-"+tryS)
		runID := strings.TrimSpace(c.command("submit", "--prompt", "Count for try-"+tryS+".", "--surface", "terminal"))
		var set store.SetRecord
		waitFor(t, "the question of try "+tryS, func() bool {
			sets, _ := st.QuestionSets(ctx, store.SetFilter{RunID: runID, State: []store.SetState{store.SetPending}})
			if len(sets) == 1 {
				set = sets[0]
			}
			return len(sets) == 1
		})
		run, err := st.Run(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		clis.session(run.SessionID)
		c.command("answer", set.Set.Questions[0].ID, "2")
		var victim *instance
		if afterCommand {
			waitFor(t, "the command run and the last reply streaming", func() bool {
				victim = c.driver(st, runID)
				b, _ := os.ReadFile(counter)
				streaming := false
				for _, r := range c.e.fake.Requests() {
					streaming = streaming || (strings.Contains(r.LastUserText, "counted-42") && r.Ended.IsZero() &&
						strings.Contains(r.Messages[0].Text(), "try-"+tryS+"."))
				}
				return victim != nil && len(b) > 0 && streaming
			})
		} else {
			// The prompt reached the session and the store has the session
			// (saved as the turn runs): the tool call is streaming. The
			// prompt is in the session as its "user" entry, not only as the
			// queued text the CLI logs first (executor.SessionTranscriptHas).
			waitFor(t, "the answer's turn streaming, its session in the store", func() bool {
				victim = c.driver(st, runID)
				b, ok, _ := st.Session(ctx, runID, run.SessionID)
				return victim != nil && ok && executor.SessionHasPrompt(b, set.Set.ID)
			})
			if b, _ := os.ReadFile(counter); len(b) > 0 {
				t.Logf("try %d: the command had run already when the fault came", try)
			}
		}
		faulted := time.Now()
		switch sig {
		case syscall.SIGKILL:
			c.kill(victim)
		default:
			if err := victim.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "another instance driving the run", func() bool {
			in := c.driver(st, runID)
			return in != nil && in != victim
		})
		took := time.Since(faulted)
		waitFor(t, "the run done", func() bool {
			r, err := st.Run(ctx, runID)
			return err == nil && r.Status == store.RunDone
		})
		t.Logf("try %d (%s, %s the command): taken over %s after the fault, done %s after it (lease TTL %s)", try, sig,
			map[bool]string{true: "after", false: "before"}[afterCommand], took.Round(100*time.Millisecond),
			time.Since(faulted).Round(100*time.Millisecond), leaseTTL)
		if sig == syscall.SIGSTOP {
			// The stalled instance wakes up: it finds its lease lost and
			// leaves the run alone (its writes would be refused).
			if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the woken instance saying it lost the lease", func() bool {
				return strings.Contains(victim.out.String(), "lost the run's lease") && strings.Contains(victim.out.String(), runID)
			})
		} else {
			c.start(victim) // the machine comes back
		}
		b, _ := os.ReadFile(counter)
		if n := strings.Count(string(b), "x\n"); n != 1 {
			t.Errorf("try %d: the command ran %d times, want once", try, n)
		}
		// The answer reaches the model once: sent at most once as the new
		// prompt (a prompt that reached the session just before the fault
		// may reach the model only with the conversation the taker
		// continues), and never twice in a conversation.
		sent, carried := 0, 0
		for i, r := range c.e.fake.Requests() {
			if len(r.Messages) == 0 || !strings.Contains(r.Messages[0].Text(), "try-"+tryS+".") {
				continue
			}
			if strings.Contains(r.LastUserText, answerRule) {
				sent++
			}
			n := 0
			for _, m := range r.Messages {
				if m.Role == "user" {
					n += strings.Count(m.Text(), answerRule)
				}
			}
			if n > 1 {
				t.Errorf("try %d: request %d carries the answer %d times in its conversation", try, i, n)
			}
			if n > 0 {
				carried++
			}
		}
		if sent > 1 || carried == 0 {
			t.Errorf("try %d: the answer was sent to the model %d times (in %d requests' conversations), want once", try, sent, carried)
		}
		if o := overlapping(c.e.fake.Requests(), tryS); o != "" {
			t.Errorf("try %d: two requests of the run's conversation in flight at once: %s", try, o)
		}
		if n := clis.mostAtOnce(run.SessionID); n > 1 {
			clis.mu.Lock()
			t.Errorf("try %d: %d CLIs on the run's session at once:\n%s", try, n, clis.seen[run.SessionID])
			clis.mu.Unlock()
		}
		r, _ := st.Run(ctx, runID)
		if !strings.Contains(r.FinalText, "Implemented with JWT") && !strings.Contains(r.FinalText, "Finished after the interruption") {
			t.Errorf("try %d: final text %q", try, r.FinalText)
		}
		if t.Failed() {
			return
		}
	}
}
