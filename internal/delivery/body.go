package delivery

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Report is what a pull request's body and a commit message are made of.
type Report struct {
	RunID   string
	Spec    string // the spec's name; empty for a prompt
	Title   string
	Summary string // the model's final text
	// Decisions is the run's decision log.
	Decisions []store.Decision
	Turns     int // agent CLI invocations
	CostUSD   float64
	Duration  time.Duration
	// IssueURL is the run's question issue, if it has one.
	IssueURL string
	// Closes is the issue the pull request closes ("#7", "owner/name#7"),
	// if any: the body says "Closes #7", which GitHub links.
	Closes string
}

// Marker ends every pull request body the orchestrator writes.
func Marker(runID string) string {
	return "<!-- orchestrator:delivery " + oneLine(questions.Clean(runID)) + " -->"
}

// untrusted cleans model or human text for a pull request or a commit:
// no hidden comments, no invisible characters, no secrets (every shape the
// delivery's screen knows, not only those Clean redacts).
func untrusted(s string) string {
	return strings.TrimSpace(secretscan.Redact(questions.Clean(questions.Strip(s))))
}

// closesRE is an issue a pull request may close: "#7", "owner/name#7".
var closesRE = regexp.MustCompile(`^(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#[1-9][0-9]*$`)

// mentionRE finds @mentions (users, teams) in text.
var mentionRE = regexp.MustCompile(`@([A-Za-z0-9])`)

// noMentions keeps model text from notifying people on GitHub: an @mention
// gets a zero-width space after its "@".
func noMentions(s string) string { return mentionRE.ReplaceAllString(s, "@\u200b$1") }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell makes text fit in a markdown table cell.
func cell(s string) string {
	s = oneLine(untrusted(s))
	s = strings.ReplaceAll(s, "|", `\|`)
	if r := []rune(s); len(r) > 300 {
		s = string(r[:299]) + "…"
	}
	if s == "" {
		return "—"
	}
	return s
}

// PRTitle is a pull request's title.
func (r Report) PRTitle() string {
	name := r.Spec
	if name == "" {
		name = r.Title
	}
	t := oneLine(untrusted(name))
	if sum := firstLine(untrusted(r.Summary)); sum != "" {
		t += ": " + sum
	}
	if rr := []rune(t); len(rr) > 120 {
		t = string(rr[:119]) + "…"
	}
	if t == "" {
		t = "orchestrator run " + r.RunID
	}
	return t
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return oneLine(strings.TrimLeft(s, "# "))
}

// CommitMessage is the commit's message: the spec's name, then the model's
// summary. It invents no trailers (no Co-authored-by).
func (r Report) CommitMessage() string {
	name := r.Spec
	if name == "" {
		name = r.Title
	}
	subject := oneLine(untrusted(name))
	if subject == "" {
		subject = "orchestrator run " + r.RunID
	}
	var b strings.Builder
	b.WriteString(subject)
	b.WriteString("\n\n")
	if sum := untrusted(r.Summary); sum != "" {
		b.WriteString(sum)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "Orchestrator run: %s\n", oneLine(questions.Clean(r.RunID)))
	return b.String()
}

// MaxBodyChars is the longest body GitHub accepts for a pull request (in
// characters).
const MaxBodyChars = 65536

// PRBody is a pull request's body: the summary, the decision log, the run's
// numbers and a link to its question issue. It is at most MaxBodyChars
// long: a decision log that does not fit is cut, with a pointer to
// `orchestrator show RUN`, which has all of it; a summary that alone does
// not fit is cut too.
func (r Report) PRBody() string {
	summary := "_The model gave no summary._"
	if sum := untrusted(r.Summary); sum != "" {
		summary = noMentions(sum)
	}
	var rows []string
	for i, d := range r.Decisions {
		q := d.Question
		if d.Header != "" {
			q = d.Header + ": " + q
		}
		answer, by, on, when := d.Answer, d.By, d.Surface, ""
		if !d.AnsweredAt.IsZero() {
			when = d.AnsweredAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		if answer == "" {
			answer = "(" + string(d.State) + ")"
		}
		for _, sh := range d.Shared {
			answer += " " + SharedNote(sh)
		}
		// The answerer is named as the surface knows them; the rest
		// is model or human text and mentions nobody.
		rows = append(rows, fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s |\n", i+1, noMentions(cell(q)), noMentions(cell(strings.Join(d.Options, " / "))),
			noMentions(cell(answer)), cell(by), cell(on), cell(when)))
	}
	tail := r.runSection()
	id := strings.ReplaceAll(oneLine(questions.Clean(r.RunID)), "`", "'")
	cut := func(shown int) string {
		return fmt.Sprintf("\n_%d more %s not shown (the body of a pull request is limited): `orchestrator show %s` has the whole decision log._\n",
			len(rows)-shown, plural(len(rows)-shown, "decision", "decisions"), id)
	}
	const tableHead = "| # | Question | Options | Answer | Answered by | On | When |\n|---|---|---|---|---|---|---|\n"
	const summaryHead, decisionsHead = "## Summary\n\n", "\n\n## Decisions\n\n"
	n := func(s string) int { return utf8.RuneCountInString(s) }
	// The summary takes what the rest leaves, at most, and leaves the
	// decision log at least half the body.
	fixed := n(summaryHead) + n(decisionsHead) + n(tail)
	if len(rows) > 0 {
		log := n(tableHead) + n(cut(0))
		for _, row := range rows {
			log += n(row)
		}
		fixed += min(log, MaxBodyChars/2)
	} else {
		fixed += n("No questions were asked.\n")
	}
	if room := MaxBodyChars - fixed; n(summary) > room {
		const more = "\n\n_(The summary is cut here: `orchestrator show %s` has all of it.)_"
		keep := max(room-n(fmt.Sprintf(more, id)), 0)
		summary = string([]rune(summary)[:keep]) + fmt.Sprintf(more, id)
	}
	var b strings.Builder
	b.WriteString(summaryHead)
	b.WriteString(summary)
	b.WriteString(decisionsHead)
	if len(rows) == 0 {
		b.WriteString("No questions were asked.\n")
	} else {
		b.WriteString(tableHead)
		used := n(b.String()) + n(tail)
		for i, row := range rows {
			rest := 0
			if i < len(rows)-1 {
				rest = n(cut(i + 1))
			}
			if used+n(row)+rest > MaxBodyChars {
				b.WriteString(cut(i))
				break
			}
			b.WriteString(row)
			used += n(row)
		}
	}
	b.WriteString(tail)
	return b.String()
}

// SharedNote says that an answer was a shared decision and which other
// runs it answered: "(shared decision g1a2b3c4d5e6, also answered in run
// r-2 of spec nightly-b)".
func SharedNote(sh store.SharedDecision) string {
	var runs []string
	for _, o := range sh.Others {
		r := "run " + o.RunID
		if o.Spec != "" {
			r += " of spec " + o.Spec
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return "(shared decision " + sh.ID + ")"
	}
	return "(shared decision " + sh.ID + ", also answered in " + strings.Join(runs, ", ") + ")"
}

// runSection is the end of a pull request's body: the run's numbers, its
// question issue and the marker.
func (r Report) runSection() string {
	var b strings.Builder
	b.WriteString("\n## Run\n\n")
	fmt.Fprintf(&b, "- Run `%s`", strings.ReplaceAll(oneLine(questions.Clean(r.RunID)), "`", "'"))
	if r.Spec != "" {
		fmt.Fprintf(&b, " of spec `%s`", strings.ReplaceAll(oneLine(questions.Clean(r.Spec)), "`", "'"))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- %d %s, $%.4f, %s\n", r.Turns, plural(r.Turns, "turn", "turns"), r.CostUSD, r.Duration.Round(time.Second))
	if r.IssueURL != "" {
		fmt.Fprintf(&b, "- Questions and answers: %s\n", r.IssueURL)
	}
	if closesRE.MatchString(r.Closes) {
		fmt.Fprintf(&b, "\nCloses %s\n", r.Closes)
	}
	b.WriteString("\n")
	b.WriteString(Marker(r.RunID))
	b.WriteString("\n")
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
