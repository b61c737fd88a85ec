package terminal

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/orchestrator-dev/orchestrator/internal/tty"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// What the terminal prints: a set, a question, how to answer it, and what
// became of an answer.

func (s *Surface) renderSet(set questions.Set) string {
	var b strings.Builder
	b.WriteString("\n")
	title := oneLine(set.Title)
	head := fmt.Sprintf("Question from run %s, turn %d", oneLine(set.RunID), set.Turn)
	if title != "" {
		head += ": " + title
	}
	if s.opts.Pretty {
		head = tty.Bold(head)
	}
	b.WriteString(head + "\n")
	if c := strings.TrimSpace(clean(set.Context)); c != "" {
		// A long context shows its start and its end, and says what was
		// cut and where the whole is: never a part of a call alone.
		c, cut := questions.Excerpt(c, maxContext)
		if s.opts.Pretty && questions.KindOf(set) == questions.KindApproval {
			c = highlightCode(c)
		}
		b.WriteString(indent(c, "  ") + "\n")
		if cut > 0 {
			b.WriteString("  " + oneLine(questions.WholeCallHint(set.RunID)) + "\n")
		}
	}
	if note := questions.GroupNote(set); note != "" {
		b.WriteString("  " + oneLine(note) + "\n")
		key := set.ID
		if len(set.Questions) == 1 {
			key = set.Questions[0].ID
		}
		b.WriteString(fmt.Sprintf("  To answer them all at once: orchestrator answer %s ANSWER --all\n", oneLine(key)))
	}
	return b.String()
}

// highlightCode shows the lines inside an approval's code blocks (the
// command, the diff) in bold.
func highlightCode(c string) string {
	lines := strings.Split(c, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if in && l != "" {
			lines[i] = tty.Bold(l)
		}
	}
	return strings.Join(lines, "\n")
}

func (s *Surface) renderQuestion(set questions.Set, i int) string {
	q := set.Questions[i]
	var b strings.Builder
	b.WriteString("\n")
	head := ""
	if len(set.Questions) > 1 {
		head = fmt.Sprintf("(%d/%d) ", i+1, len(set.Questions))
	}
	if h := oneLine(q.Header); h != "" {
		head += h + " "
	}
	head += "[" + q.ID + "]"
	if s.opts.Pretty {
		head = tty.Bold(head)
	}
	b.WriteString(head + "\n")
	b.WriteString(clean(q.Text) + "\n")
	for j, o := range q.Options {
		line := fmt.Sprintf("  %d. %s", j+1, oneLine(o.Label))
		if d := oneLine(o.Description); d != "" {
			if s.opts.Pretty {
				d = tty.Dim(d)
			}
			line += " - " + d
		}
		b.WriteString(line + "\n")
	}
	b.WriteString(howToAnswer(q) + "\n")
	return b.String()
}

// howToAnswer says how to answer q.
func howToAnswer(q questions.Question) string {
	switch {
	case len(q.Options) == 0:
		return "Answer in your own words."
	case q.MultiSelect && q.FreeText:
		return `Answer with one or more numbers or labels, separated by commas ("1,3"), or "other: <your own words>".`
	case q.MultiSelect:
		return `Answer with one or more numbers or labels, separated by commas ("1,3").`
	case q.FreeText:
		return `Answer with a number or a label, or "other: <your own words>".`
	default:
		return "Answer with a number or a label."
	}
}

func (s *Surface) renderInvalid(q questions.Question, err error) string {
	// The questions package's message says what is valid, options included.
	msg := "Not a valid answer: " + oneLine(err.Error())
	var inv *questions.InvalidAnswerError
	if !errors.As(err, &inv) {
		msg += "\n" + howToAnswer(q)
	}
	return msg + "\n"
}

func (s *Surface) renderLater(set questions.Set) string {
	if s.opts.Ephemeral {
		return fmt.Sprintf("\nInput closed; run %s ends here with its questions unanswered (a rehearsal keeps nothing):\n"+
			"rehearse again at a terminal, or on a surface, to answer.\n", oneLine(set.RunID))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nInput closed; the questions of run %s are still waiting for an answer.\n", oneLine(set.RunID))
	b.WriteString("Answer them later with:\n")
	for _, q := range set.Questions {
		fmt.Fprintf(&b, "  %s answer %s <answer>\n", s.opts.Command, q.ID)
	}
	b.WriteString("then go on with:\n")
	fmt.Fprintf(&b, "  %s resume %s\n", s.opts.Command, oneLine(set.RunID))
	return b.String()
}

func (s *Surface) renderRefused(err error) string {
	return "Answer not taken: " + oneLine(err.Error()) + "\nAnswer again.\n"
}

// renderResolved says that set was answered elsewhere (resp), or closed
// without an answer (resp nil).
func (s *Surface) renderResolved(set questions.Set, resp *questions.Response) string {
	if resp == nil {
		return fmt.Sprintf("\nQuestion set %s is closed (expired or its run was cancelled).\n", oneLine(set.ID))
	}
	by := oneLine(resp.By)
	if by == "" {
		by = "someone"
	}
	where := oneLine(resp.Surface)
	if where == "" {
		where = "another surface"
	}
	parts := make([]string, 0, len(resp.Answers))
	for _, a := range resp.Answers {
		name := a.QuestionID
		if q, ok := set.Question(a.QuestionID); ok && oneLine(q.Header) != "" {
			name = oneLine(q.Header)
		}
		parts = append(parts, oneLine(name)+": "+summary(a))
	}
	return fmt.Sprintf("\nAnswered elsewhere by %s on %s: %s\n", by, where, strings.Join(parts, "; "))
}

// summary says what a says in one line.
func summary(a questions.Answer) string {
	var parts []string
	for _, l := range a.Labels {
		parts = append(parts, oneLine(l))
	}
	if t := oneLine(a.Text); t != "" {
		parts = append(parts, strconv.Quote(t))
	}
	return strings.Join(parts, ", ")
}

// clean makes model text safe to print: no escape sequences, invisible or
// control characters but newlines.
func clean(s string) string {
	s = questions.Printable(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return -1
		}
		return r
	}, s)
}

// oneLine is clean on one line, spaces collapsed.
func oneLine(s string) string { return strings.Join(strings.Fields(clean(s)), " ") }

// maxContext bounds how many characters of a set's context are printed:
// past it, its start and its end (questions.Excerpt).
const maxContext = 4 << 10

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
