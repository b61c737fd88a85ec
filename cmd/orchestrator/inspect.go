package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/questions"
)

func (m *Main) newInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE|-",
		Short: "Summarize a saved stream-json transcript and the questions in it",
		Long: `inspect reads a transcript of the agent CLI (its stream-json stdout, saved
to FILE, or - for stdin) and prints how the turn ended: status, error and
its category, session, turns, cost, warnings, skipped lines, and the
questions the model asked. --json prints the same as one JSON object.`,
		Args:        cobra.ExactArgs(1),
		Annotations: skipConfigAnnotation(), // works without a valid configuration
		RunE: func(cmd *cobra.Command, args []string) error {
			return m.runInspect(args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// inspection is what inspect found: the transcript's outcome and the
// questions of the turn.
type inspection struct {
	executor.Outcome
	Questions      []questions.Question
	QuestionErrors []string
	// Native are the model's AskUserQuestion calls (kind ask_tool) and the
	// calls the CLI asked permission for or a hook deferred (approval).
	Native []questions.Set
}

// inspectReport is the output of inspect --json (docs/json.md). A
// transcript says nothing of the process: exit_code and duration_ms are
// "unknown".
type inspectReport struct {
	V              int            `json:"v"`
	Outcome        *jsonOutcome   `json:"outcome"`
	Questions      []jsonQuestion `json:"questions"`
	QuestionErrors []string       `json:"question_errors,omitempty"`
	// Native lists the questions asked without a marker: AskUserQuestion
	// calls and permission requests, as question sets of their kind.
	Native []jsonSet `json:"native_questions,omitempty"`
}

func newInspectReport(in inspection) inspectReport {
	rep := inspectReport{V: jsonVersion, Outcome: newJSONOutcome(in.Outcome), Questions: []jsonQuestion{}}
	for _, q := range in.Questions {
		rep.Questions = append(rep.Questions, newJSONQuestion(q))
	}
	for _, e := range in.QuestionErrors {
		rep.QuestionErrors = append(rep.QuestionErrors, questions.Printable(e))
	}
	for _, set := range in.Native {
		rep.Native = append(rep.Native, newJSONSet(set, nil))
	}
	return rep
}

func (m *Main) runInspect(name string, asJSON bool) error {
	var r io.Reader = m.Stdin
	if name != "-" {
		f, err := os.Open(m.path(name))
		if err != nil {
			return fmt.Errorf("open transcript: %w", err)
		}
		defer f.Close()
		r = f
	}
	in, err := inspect(r)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(m.Stdout, newInspectReport(in))
	}
	printInspection(m.Stdout, in)
	return nil
}

// inspect reads a transcript in one pass, tracking its outcome and
// collecting the model's text for its questions.
func inspect(r io.Reader) (inspection, error) {
	var col questions.TurnCollector
	var native []questions.Set
	seen := map[string]bool{}
	add := func(kind string, call questions.ToolCall) {
		if call.ToolUseID == "" || seen[call.ToolUseID] {
			return
		}
		seen[call.ToolUseID] = true
		if kind == questions.KindAskTool {
			if set, err := questions.AskToolSet("", 0, call); err == nil {
				native = append(native, set)
			}
			return
		}
		native = append(native, questions.ApprovalSet("", 0, call))
	}
	out, err := executor.Replay(r, executor.ReaderOptions{}, func(ev executor.Event) {
		runner.Collect(&col, ev) // the same reading of a turn as the run loop's
		switch ev := ev.(type) {
		case *executor.AssistantMessage:
			for _, tu := range ev.ToolUses() {
				if tu.ToolName == "AskUserQuestion" {
					add(questions.KindAskTool, questions.ToolCall{ToolUseID: tu.ToolUseID, Tool: tu.ToolName, Input: tu.Input})
				}
			}
		case *executor.ControlRequest:
			if ev.Subtype == executor.SubtypeCanUseTool && ev.ToolName != "AskUserQuestion" {
				add(questions.KindApproval, questions.ToolCall{ToolUseID: ev.ToolUseID, Tool: ev.ToolName, Input: ev.Input, Description: ev.Description})
			}
		}
	})
	if err != nil {
		return inspection{}, err
	}
	if d := out.DeferredToolUse; d != nil && d.Name != "AskUserQuestion" {
		add(questions.KindApproval, questions.ToolCall{ToolUseID: d.ID, Tool: d.Name, Input: d.Input})
	}
	in := inspection{Outcome: out, Native: native}
	qs, err := col.Questions()
	in.Questions = qs
	if in.Questions == nil {
		in.Questions = []questions.Question{}
	}
	for _, e := range unjoin(err) {
		in.QuestionErrors = append(in.QuestionErrors, e.Error())
	}
	return in, nil
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// printInspection prints in for people. The model's text is made printable
// (questions.Printable: no escape sequences, control or bidi characters,
// secrets redacted) before it reaches the terminal.
func printInspection(w io.Writer, in inspection) {
	o := in.Outcome
	row := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-11s %s\n", k+":", fmt.Sprintf(format, args...))
	}
	status := string(o.Status)
	if o.Category != "" {
		status += " (" + string(o.Category) + ")"
	}
	row("status", "%s", status)
	if o.SessionID != "" {
		row("session", "%s", o.SessionID)
	}
	if o.Model != "" {
		row("model", "%s", o.Model)
	}
	row("turns", "%d, cost $%.4f, tokens %d in / %d out", o.NumTurns, o.CostUSD, o.Usage.InputTokens, o.Usage.OutputTokens)
	if o.TerminalReason != "" {
		row("ended", "%s", o.TerminalReason)
	}
	if o.Error != "" {
		row("error", "%s", indentRest(questions.Printable(o.Error)))
	}
	if o.Hint != "" {
		row("hint", "%s", questions.Printable(o.Hint))
	}
	if len(o.PermissionDenials) > 0 {
		row("denied", "%s", questions.Printable(strings.Join(o.PermissionDenials, ", ")))
	}
	if o.MalformedLines > 0 || o.OversizeLines > 0 {
		row("skipped", "%d malformed, %d oversize lines", o.MalformedLines, o.OversizeLines)
	}
	if d := o.FirstOversize; d != nil {
		row("oversize", "line %d, %d bytes, begins %s", d.Line, d.Bytes, questions.Clean(d.Prefix))
	}
	for _, s := range o.Warnings {
		row("warning", "%s", questions.Printable(s))
	}
	if text := strings.TrimSpace(questions.Printable(o.FinalText)); text != "" {
		row("final text", "%s", indentRest(text))
	}
	if len(in.Questions) == 0 && len(in.QuestionErrors) == 0 {
		row("questions", "none")
	}
	for i, q := range in.Questions {
		row("question", "%d. %s", i+1, indentRest(questions.Printable(q.Text)))
		for _, opt := range q.Options {
			fmt.Fprintf(w, "%-11s    - %s\n", "", questions.Printable(opt.Label))
		}
	}
	for _, e := range in.QuestionErrors {
		row("bad block", "%s", indentRest(questions.Printable(e)))
	}
}

// indentRest indents the lines after the first to line up with a row's
// value.
func indentRest(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+strings.Repeat(" ", 12))
}
