package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/output"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func (m *Main) newShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: its timeline, decision log, branch, commit and pull request",
		Long: `show prints one run: its turns with the tools the model used, every question
it asked with the answer, who gave it, on which surface and when (the decision
log), its cost, and where its work went (branch, commit, pull request, worktree).
RUN may be a unique prefix. --json prints the same as data (docs/json.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runShow(cmd.Context(), args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// The output of `show --json` (docs/json.md): the run and its turns in the
// shapes every JSON output uses (output.go), the decision log, and where
// the run's work went.

type showOutput struct {
	V        int        `json:"v"`
	Run      jsonRun    `json:"run"`
	Timeline []jsonTurn `json:"timeline"`
	// Refused lists the tool calls the CLI refused, over all turns: a run
	// that "succeeded" without doing what it needed shows here.
	Refused   []showRefused  `json:"refused"`
	Decisions []showDecision `json:"decisions"`
	Delivery  *showDelivery  `json:"delivery"`
	// StartedBy says what started the run from outside (a GitHub issue
	// comment or label; store.Trigger.Origin), if anything did.
	StartedBy string `json:"started_by,omitempty"`
}

// showRefused is a tool call the CLI refused, and the turn it was in.
type showRefused struct {
	Turn int `json:"turn"`
	jsonTool
}

type showDecision struct {
	SetID      string     `json:"set_id"`
	QuestionID string     `json:"question_id"`
	Turn       int        `json:"turn"`
	Header     string     `json:"header,omitempty"`
	Question   string     `json:"question"`
	Options    []string   `json:"options"`
	Answer     string     `json:"answer,omitempty"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	Surface    string     `json:"surface,omitempty"`
	State      string     `json:"state"`
	AskedAt    time.Time  `json:"asked_at"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
	// Tool is the call an approval or AskUserQuestion is about, its input
	// made printable.
	Tool *jsonSetTool `json:"tool,omitempty"`
	// Shared lists the shared decisions (answer --all) that answered the
	// question together with the same question in other runs.
	Shared []showShared `json:"shared,omitempty"`
	// call is the call as the surfaces show it, whole (text output).
	call string
}

// showShared is a shared decision and the other runs it answered.
type showShared struct {
	ID         string          `json:"id"`
	AnsweredBy string          `json:"answered_by"`
	Surface    string          `json:"surface"`
	At         time.Time       `json:"at"`
	Runs       []showSharedRun `json:"runs"`
}

type showSharedRun struct {
	RunID string `json:"run_id"`
	Spec  string `json:"spec,omitempty"`
	SetID string `json:"set_id"`
}

type showDelivery struct {
	State           string `json:"state"`
	Branch          string `json:"branch"`
	Base            string `json:"base"`
	Commit          string `json:"commit,omitempty"`
	Pushed          bool   `json:"pushed"`
	PullRequest     int    `json:"pull_request,omitempty"`
	PullRequestURL  string `json:"pull_request_url,omitempty"`
	Worktree        string `json:"worktree"`
	WorktreeRemoved bool   `json:"worktree_removed"`
	Note            string `json:"note,omitempty"`
	// Pending: the push or the pull request failed after its retries;
	// serve tries again at next_attempt_at, `resume RUN` at once.
	Pending       bool       `json:"pending,omitempty"`
	Attempts      int        `json:"attempts,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
}

// usd rounds a cost to a millionth of a dollar (no float noise in JSON).
var usd = output.USD

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// buildShow gathers what show prints about a run. maxLine is the line cap
// its transcripts are read with (agent.max_line_bytes).
func buildShow(ctx context.Context, st *store.Store, id string, maxLine int) (showOutput, error) {
	run, err := st.Run(ctx, id)
	if err != nil {
		return showOutput{}, err
	}
	turns, err := st.Turns(ctx, run.ID)
	if err != nil {
		return showOutput{}, err
	}
	decisions, err := st.DecisionLog(ctx, run.ID)
	if err != nil {
		return showOutput{}, err
	}
	// The tool calls asked about, whole: where the surfaces that show only
	// both ends of a long call send people to read it.
	sets, err := st.QuestionSets(ctx, store.SetFilter{RunID: run.ID})
	if err != nil {
		return showOutput{}, err
	}
	calls := map[string]questions.Set{}
	for _, rec := range sets {
		if rec.Set.Tool != nil {
			calls[rec.Set.ID] = rec.Set
		}
	}
	out := showOutput{V: jsonVersion, Run: newJSONRun(run), Timeline: []jsonTurn{}, Refused: []showRefused{}, Decisions: []showDecision{}}
	if tr, ok, err := st.TriggerOf(ctx, run.ID); err != nil {
		return showOutput{}, err
	} else if ok {
		out.StartedBy = tr.Origin
	}
	asked := map[int]string{}
	for _, d := range decisions {
		asked[d.Turn] = d.SetID
		sd := showDecision{SetID: d.SetID, QuestionID: d.QuestionID, Turn: d.Turn,
			Header: questions.Printable(d.Header), Question: questions.Printable(d.Question), Options: printableAll(d.Options),
			Answer: questions.Printable(d.Answer), AnsweredBy: questions.Printable(d.By), Surface: d.Surface,
			State: string(d.State), AskedAt: d.AskedAt.UTC(), AnsweredAt: timePtr(d.AnsweredAt.UTC())}
		for _, sh := range d.Shared {
			ss := showShared{ID: sh.ID, AnsweredBy: questions.Printable(sh.By), Surface: sh.Surface, At: sh.At.UTC(), Runs: []showSharedRun{}}
			for _, o := range sh.Others {
				ss.Runs = append(ss.Runs, showSharedRun{RunID: o.RunID, Spec: questions.Printable(o.Spec), SetID: o.SetID})
			}
			sd.Shared = append(sd.Shared, ss)
		}
		if set, ok := calls[d.SetID]; ok {
			sd.Tool = output.NewSet(questions.Set{Tool: set.Tool}, nil).Tool
			if questions.KindOf(set) == questions.KindApproval {
				sd.call = questions.Printable(set.Context)
			}
		}
		out.Decisions = append(out.Decisions, sd)
	}
	for _, t := range turns {
		jt := newJSONStoredTurn(t)
		jt.AskedSet = asked[t.Seq]
		fillFromTranscript(&jt, t.TranscriptPath, maxLine)
		for _, tool := range jt.Tools {
			if tool.Refused {
				out.Refused = append(out.Refused, showRefused{Turn: t.Seq, jsonTool: tool})
			}
		}
		out.Timeline = append(out.Timeline, jt)
	}
	if dl, ok, err := st.Delivery(ctx, run.ID); err != nil {
		return showOutput{}, err
	} else if ok {
		out.Delivery = &showDelivery{State: string(dl.State), Branch: dl.Branch, Base: dl.Base, Commit: dl.CommitSHA, Pushed: dl.Pushed,
			PullRequest: dl.PRNumber, PullRequestURL: dl.PRURL, Worktree: dl.Worktree, WorktreeRemoved: !dl.RemovedAt.IsZero(), Note: dl.Note,
			Pending: dl.Pending, Attempts: dl.Attempts, LastError: questions.Printable(dl.LastError)}
		if dl.Pending {
			out.Delivery.NextAttemptAt = timePtr(dl.NextAttemptAt)
		}
	}
	return out, nil
}

func printableAll(s []string) []string {
	out := []string{}
	for _, v := range s {
		out = append(out, questions.Printable(v))
	}
	return out
}

// fillFromTranscript adds to a stored turn what only its saved transcript
// holds: the model's tool calls (those the CLI refused marked) and, for a
// finished turn, the outcome's model, terminal reason, refused tools,
// skipped lines and warnings. A transcript that is missing or unreadable
// leaves the turn as stored.
func fillFromTranscript(jt *jsonTurn, path string, maxLine int) {
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	calls := newTranscriptCalls()
	o, _ := executor.Replay(f, executor.ReaderOptions{MaxLineBytes: maxLine}, calls.observe)
	jt.Tools = calls.list()
	if jt.Outcome == nil {
		return
	}
	if o.MalformedLines > 0 {
		if _, err := f.Seek(0, io.SeekStart); err == nil {
			o = cutLines(f, o, maxLine)
		}
	}
	full := newJSONOutcome(o)
	jt.Outcome.Model, jt.Outcome.TerminalReason = full.Model, full.TerminalReason
	jt.Outcome.PermissionDenials, jt.Outcome.SkippedLines, jt.Outcome.Warnings = full.PermissionDenials, full.SkippedLines, full.Warnings
}

// cutLines finds, among the malformed lines of a transcript, those the
// executor cut because they were over the line cap when the CLI wrote them
// (the transcript keeps the first min(TranscriptPrefixBytes, cap) bytes of
// such a line), and counts them as oversize again, with their first bytes.
func cutLines(r io.Reader, o executor.Outcome, maxLine int) executor.Outcome {
	if maxLine <= 0 {
		maxLine = 64 << 20
	}
	cut := min(executor.TranscriptPrefixBytes, maxLine)
	malformed := map[int]bool{}
	for _, d := range o.Diagnostics {
		if d.Kind == executor.DiagMalformed {
			malformed[d.Line] = true
		}
	}
	br := bufio.NewReader(r)
	var found []executor.Diagnostic
	for n := 1; len(malformed) > 0; n++ {
		size, prefix, ok := lineHead(br)
		if !ok {
			break
		}
		if !malformed[n] {
			continue
		}
		delete(malformed, n)
		if size == cut {
			found = append(found, executor.Diagnostic{Line: n, Kind: executor.DiagOversize, Bytes: int64(size), Prefix: string(prefix),
				Msg: fmt.Sprintf("over agent.max_line_bytes when the CLI wrote it; the transcript keeps its first %d bytes", cut)})
		}
	}
	if len(found) == 0 {
		return o
	}
	o.MalformedLines -= len(found)
	o.OversizeLines += len(found)
	if o.FirstOversize == nil {
		o.FirstOversize = &found[0]
	}
	o.Diagnostics = append(append([]executor.Diagnostic(nil), o.Diagnostics...), found...)
	return o
}

// lineHead reads one line: its length without the line's end and its
// first SkippedPrefixBytes; ok is false at the end of r.
func lineHead(br *bufio.Reader) (size int, prefix []byte, ok bool) {
	for {
		chunk, err := br.ReadSlice('\n')
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		size += len(chunk)
		if room := executor.SkippedPrefixBytes - len(prefix); room > 0 {
			prefix = append(prefix, chunk[:min(len(chunk), room)]...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return size, prefix, size > 0
		default:
			return size, prefix, true
		}
	}
}

// transcriptCalls collects the model's tool calls from a transcript's
// events, those the CLI refused marked (runner.ToolCalls).
type transcriptCalls struct{ runner.ToolCalls }

func newTranscriptCalls() *transcriptCalls {
	return &transcriptCalls{runner.ToolCalls{Summarize: func(in json.RawMessage) string { return secretscan.Redact(questions.Redact(toolLine(in))) }}}
}

func (c *transcriptCalls) observe(ev executor.Event) { c.Observe(ev) }

// list returns the calls in order, refused ones marked; a refusal whose
// call is not in the transcript is listed after them.
func (c *transcriptCalls) list() []jsonTool {
	out := []jsonTool{}
	for _, call := range c.List() {
		out = append(out, jsonTool{Name: questions.Printable(call.Name), Summary: call.Summary, Refused: call.Refused})
	}
	return out
}

// toolLine gives a one-line view of a tool call's input.
func toolLine(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "path", "pattern", "url", "query", "description"} {
		if v, ok := m[k].(string); ok {
			return clip(v, 100)
		}
	}
	return ""
}

func (m *Main) runShow(ctx context.Context, id string, asJSON bool) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	out, err := buildShow(ctx, st, id, m.Config.Agent.MaxLineBytes.Int())
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(m.Stdout, out)
	}
	printShow(m.Stdout, out)
	return nil
}

// safe makes model or human text fit for one terminal line.
func safe(s string, n int) string { return clip(questions.Clean(s), n) }

func printShow(w io.Writer, o showOutput) {
	r := o.Run
	fmt.Fprintf(w, "run %s: %s (%s)\n", r.ID, safe(r.Title, 80), r.Status)
	if r.Spec != "" {
		fmt.Fprintf(w, "  spec %s\n", r.Spec)
	}
	if o.StartedBy != "" {
		fmt.Fprintf(w, "  started by %s\n", safe(o.StartedBy, 200))
	}
	fmt.Fprintf(w, "  %d turns, $%.4f, created %s, updated %s\n", len(o.Timeline), r.CostUSD, r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
	if r.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", safe(r.Error, 300))
	}
	if len(o.Refused) > 0 {
		fmt.Fprintf(w, "  ⚠ the CLI refused %d tool call(s):\n", len(o.Refused))
		for _, t := range o.Refused {
			fmt.Fprintf(w, "      %s (turn %d)\n", toolCall(t.jsonTool), t.Turn)
		}
	}
	fmt.Fprintln(w, "\ntimeline:")
	bySet := map[string][]showDecision{}
	for _, d := range o.Decisions {
		bySet[d.SetID] = append(bySet[d.SetID], d)
	}
	for _, t := range o.Timeline {
		state, cost := "unfinished", 0.0
		if oc := t.Outcome; oc != nil && t.FinishedAt != nil {
			state, cost = oc.Status, oc.CostUSD
			if oc.ErrorCategory != "" {
				state += " (" + oc.ErrorCategory + ")"
			}
		}
		started := "-"
		if t.StartedAt != nil {
			started = t.StartedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  %s  turn %d (%s) %s, $%.4f\n", started, t.Seq, t.Kind, state, cost)
		for _, tool := range t.Tools {
			fmt.Fprintf(w, "      ⚙ %s\n", toolText(tool))
		}
		if oc := t.Outcome; oc != nil {
			for _, d := range oc.SkippedLines.Details {
				fmt.Fprintf(w, "      ⚠ skipped %s\n", safe(d, 400))
			}
		}
		if n := len(bySet[t.AskedSet]); n > 0 {
			fmt.Fprintf(w, "      ? asked %d question(s), set %s (decision log below)\n", n, t.AskedSet)
		}
	}
	fmt.Fprintln(w, "\ndecision log:")
	if len(o.Decisions) == 0 {
		fmt.Fprintln(w, "  no questions were asked")
	}
	for _, d := range o.Decisions {
		printDecision(w, d)
	}
	if d := o.Delivery; d != nil {
		fmt.Fprintln(w, "\ndelivery:")
		fmt.Fprintf(w, "  branch %s (from %s), %s\n", d.Branch, d.Base, d.State)
		if d.Commit != "" {
			fmt.Fprintf(w, "  commit %s, pushed: %t\n", d.Commit, d.Pushed)
		}
		if d.PullRequestURL != "" {
			fmt.Fprintf(w, "  pull request #%d %s\n", d.PullRequest, d.PullRequestURL)
		}
		if d.Note != "" {
			fmt.Fprintf(w, "  %s\n", d.Note)
		}
		switch {
		case d.Pending && d.NextAttemptAt != nil:
			fmt.Fprintf(w, "  pending: %s (failed attempts: %d; serve tries again from %s, or now: orchestrator resume %s)\n",
				pendingWhat(d.Pushed), d.Attempts, d.NextAttemptAt.Local().Format(time.RFC3339), o.Run.ID)
			fmt.Fprintf(w, "  last error: %s\n", d.LastError)
		case d.LastError != "" && d.PullRequestURL == "":
			fmt.Fprintf(w, "  not delivered: %s\n", d.LastError)
		}
		if d.WorktreeRemoved {
			fmt.Fprintf(w, "  worktree %s (removed)\n", d.Worktree)
		} else {
			fmt.Fprintf(w, "  worktree %s (kept)\n", d.Worktree)
		}
	}
}

// toolText is a tool call on one line: "Bash: touch x (refused by the CLI)".
func toolText(t jsonTool) string {
	s := toolCall(t)
	if t.Refused {
		s += " (refused by the CLI)"
	}
	return s
}

// toolCall is a tool and its input on one line: "Bash: touch x".
func toolCall(t jsonTool) string {
	s := safe(t.Name, 60)
	if t.Summary != "" {
		s += ": " + safe(t.Summary, 100)
	}
	return s
}

func printDecision(w io.Writer, d showDecision) {
	q := d.Question
	if d.Header != "" {
		q = d.Header + ": " + q
	}
	line := fmt.Sprintf("    ? %s %s", d.QuestionID, safe(q, 120))
	if len(d.Options) > 0 {
		line += " [" + safe(strings.Join(d.Options, " / "), 120) + "]"
	}
	fmt.Fprintln(w, line)
	if c := strings.TrimSpace(d.call); c != "" {
		fmt.Fprintf(w, "        %s\n", strings.ReplaceAll(c, "\n", "\n        "))
	}
	if d.AnsweredAt != nil {
		fmt.Fprintf(w, "      → %s, by %s on %s at %s\n", safe(d.Answer, 200), safe(d.AnsweredBy, 60), d.Surface, d.AnsweredAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "      → (%s)\n", d.State)
	}
	for _, sh := range d.Shared {
		var runs []string
		for _, r := range sh.Runs {
			s := "run " + r.RunID
			if r.Spec != "" {
				s += " of spec " + safe(r.Spec, 60)
			}
			runs = append(runs, s)
		}
		line := fmt.Sprintf("        shared decision %s by %s on %s", sh.ID, safe(sh.AnsweredBy, 60), sh.Surface)
		if len(runs) > 0 {
			line += ", also answered in " + strings.Join(runs, ", ")
		}
		fmt.Fprintln(w, line)
	}
}

// pendingWhat says which step of a pending delivery is still to do.
func pendingWhat(pushed bool) string {
	if pushed {
		return "the pull request is not opened yet"
	}
	return "the branch is not pushed yet"
}
