package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// needle is what identifies a turn's prompt in the CLI's session record.
func needle(t store.Turn) string {
	switch t.Kind {
	case store.TurnAnswer:
		return t.SetID
	case store.TurnStart, store.TurnFollowUp: // a follow-up's first line names it
		line := strings.TrimSpace(t.Prompt)
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if r := []rune(line); len(r) > 60 {
			line = string(r[:60])
		}
		return line
	}
	return ""
}

// recover deals with a turn the process died during (or was cancelled in):
// its own transcript may hold the whole outcome; otherwise the CLI's session
// tells whether the prompt got there.
func (r *Runner) recover(ctx context.Context, d *drive, run store.Run, t store.Turn) error {
	agent := d.Agent
	// The turn may have run on another machine: look into the session as
	// the store last saved it, unless this machine's copy has it all
	// (sessions.go). Without a working directory there is nothing to
	// restore into; the turn that follows fails on it.
	workdir, werr := r.workdir(ctx, run)
	if werr == nil {
		r.restoreSession(ctx, agent, run, sessionOf(run, t), workdir)
	} else {
		r.log.Warn("cannot restore the CLI's session before recovering a turn", "run", run.ID, "turn", t.Seq, "err", werr)
	}
	if t.TranscriptPath != "" {
		if out, col, ok := replay(t.TranscriptPath); ok {
			r.log.Info("recovered a finished turn from its transcript", "run", run.ID, "turn", t.Seq)
			return r.finish(ctx, d, run, t, workdir, out, col)
		}
	}
	delivered := false
	if used, ok := r.toolAnswerHandedOut(ctx, t); ok { // approvals.go
		delivered = used
	} else if n := needle(t); n != "" {
		var err error
		delivered, err = agent.SessionTranscriptHas(sessionOf(run, t), n)
		if err != nil && !errors.Is(err, executor.ErrSessionFileNotFound) {
			r.log.Warn("cannot read the CLI's session; assuming the prompt did not reach it", "run", run.ID, "err", err)
			delivered = false
		}
	}
	r.log.Info("recovering an interrupted turn", "run", run.ID, "turn", t.Seq, "kind", t.Kind, "prompt_delivered", delivered)
	if delivered && werr == nil {
		// The model may have ended its reply, with a question, before the
		// process died: it is asked, not answered with "continue".
		if out, col, ok := r.replyInSession(agent, run, t, workdir); ok {
			if qs, err := col.Questions(); err == nil && len(qs) > 0 {
				r.log.Info("the CLI's session ends with the model's questions the stopped process never read: asking them",
					"run", run.ID, "turn", t.Seq, "questions", len(qs))
				return r.finish(ctx, d, run, t, workdir, out, col)
			}
		}
	}
	if delivered {
		// The prompt is in this machine's session: save it before the
		// turn is recorded delivered, or a resume elsewhere would continue
		// a conversation that never got it.
		if werr == nil {
			r.saveSession(ctx, agent, run, t, workdir)
		}
		return r.cfg.Store.MarkTurnDelivered(ctx, run.ID, t.Seq)
	}
	return r.cfg.Store.AbandonTurn(ctx, run.ID, t.Seq)
}

// replay reads a turn's saved transcript; ok is true when it holds a result.
func replay(path string) (executor.Outcome, *questions.TurnCollector, bool) {
	f, err := os.Open(path)
	if err != nil {
		return executor.Outcome{}, nil, false
	}
	defer f.Close()
	col := &questions.TurnCollector{}
	out, err := executor.Replay(f, executor.ReaderOptions{}, func(ev executor.Event) { Collect(col, ev) })
	if err != nil || out.Result == nil {
		return executor.Outcome{}, nil, false
	}
	if strings.HasPrefix(out.TerminalReason, "aborted") {
		// The CLI was interrupted (SIGINT/SIGTERM) and wrote a result for
		// the aborted stream: the turn did not finish.
		return executor.Outcome{}, nil, false
	}
	return out, col, true
}

// interruptedCalls tells the model what the conversation it resumes after
// an interrupted turn lacks: the tool calls the hooks recorded (store:
// ToolCallStarted, ToolCallFinished) whose result is not in the session.
// A call that finished is told with its output, so that the model does
// not run it again; a call that started and has no result is told as
// interrupted, its outcome unknown: it is never run again by the
// orchestrator, and the model is asked to check its effect first. "" when
// the session has every result.
func (r *Runner) interruptedCalls(ctx context.Context, d *drive, run store.Run, sid string) string {
	calls, err := r.cfg.Store.ToolCallsOf(ctx, run.ID)
	if err != nil {
		r.log.Warn("read the tool calls of an interrupted turn", "run", run.ID, "err", err)
		return ""
	}
	if len(calls) == 0 {
		return ""
	}
	var session []byte
	if workdir, err := r.workdir(ctx, run); err == nil {
		r.restoreSession(ctx, d.Agent, run, sid, workdir)
		if sf, ok := d.Agent.(SessionFiles); ok {
			session, _ = sf.ReadSession(workdir, sid)
		}
	}
	if session == nil {
		session, _, _ = r.cfg.Store.Session(ctx, run.ID, sid)
	}
	var b strings.Builder
	for _, c := range calls {
		if bytes.Contains(session, []byte(`"tool_use_id":"`+c.ToolUseID+`"`)) || bytes.Contains(session, []byte("tool call "+c.ToolUseID)) {
			continue // the conversation has its result, or was told of it
		}
		if c.Finished {
			fmt.Fprintf(&b, "\n- tool call %s (%s: %s) ran; its output was:\n%s\n", c.ToolUseID, c.Tool, c.Input, c.Result)
		} else {
			fmt.Fprintf(&b, "\n- [Tool call %s (%s: %s) interrupted: outcome unknown] it started, but the orchestrator stopped before its result came back; it was not run again: check its effect before running it again.\n",
				c.ToolUseID, c.Tool, c.Input)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	r.log.Info("telling the model the tool calls its conversation lacks the results of", "run", run.ID)
	return "\n\nWhat the orchestrator recorded of your last turn that this conversation may lack:" + b.String()
}

// replyInSession reads the end of the CLI's session of turn t: when the
// turn's prompt is there and the model's reply to it is complete (text,
// no tool call left without its result), ok is true and out and col hold
// the reply as the turn's outcome would have (its cost and usage unknown).
func (r *Runner) replyInSession(agent Agent, run store.Run, t store.Turn, workdir string) (executor.Outcome, *questions.TurnCollector, bool) {
	sf, ok := agent.(SessionFiles)
	sid := sessionOf(run, t)
	if !ok || sid == "" {
		return executor.Outcome{}, nil, false
	}
	content, err := sf.ReadSession(workdir, sid)
	if err != nil {
		return executor.Outcome{}, nil, false
	}
	texts, ok := lastReply(content, needle(t))
	if !ok {
		return executor.Outcome{}, nil, false
	}
	col := &questions.TurnCollector{}
	for _, txt := range texts {
		col.AddAssistantText(txt)
	}
	out := executor.Outcome{Status: executor.StatusSuccess, SessionID: sid, FinalText: texts[len(texts)-1]}
	return out, col, true
}

// sessionEntry is the part of a line of the CLI's session file (JSONL)
// that lastReply reads.
type sessionEntry struct {
	Type        string `json:"type"`
	IsSidechain bool   `json:"isSidechain"`
	IsMeta      bool   `json:"isMeta"`
	Message     struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// lastReply returns the model's texts after the session's last prompt,
// when that prompt holds needle ("" for any) and the reply is over: it has
// text, and every tool call in it has its result. A sub-agent's lines are
// not the model's reply.
func lastReply(session []byte, needle string) (texts []string, ok bool) {
	prompted, pending := false, false
	for _, line := range bytes.Split(session, []byte("\n")) {
		var e sessionEntry
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &e) != nil || e.IsSidechain || e.IsMeta {
			continue
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		var prompt string
		if json.Unmarshal(e.Message.Content, &prompt) != nil {
			_ = json.Unmarshal(e.Message.Content, &blocks)
		}
		switch e.Type {
		case "user":
			isPrompt := prompt != ""
			for _, b := range blocks {
				switch b.Type {
				case "text":
					isPrompt, prompt = true, prompt+b.Text
				case "tool_result":
					pending = false
				}
			}
			if isPrompt {
				prompted = needle == "" || strings.Contains(prompt, needle)
				texts, pending = nil, false
			}
		case "assistant":
			for _, b := range blocks {
				switch b.Type {
				case "text":
					texts = append(texts, b.Text)
				case "tool_use":
					pending = true
				}
			}
		}
	}
	return texts, prompted && !pending && len(texts) > 0
}
