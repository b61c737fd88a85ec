package github

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// maxCommentRunes is GitHub's limit on the length of a comment body.
const maxCommentRunes = 65536

// Hidden markers. Every comment the orchestrator posts carries one; its own
// comments are those its account wrote (identity) that carry one: under a
// personal access token it posts as a human, who may also answer by hand.
// A marker in a comment anyone else wrote means nothing. Model text and
// people's text quoted in comments are cleaned so they can never carry one.
const markerPrefix = "<!-- orchestrator:"

// questionMarker marks part part of parts of the question comment of set.
// It lists the set's question IDs, so that an answer naming one ("/answer
// QID …") can be told apart from an answer to another set waiting on the
// issue, even by a process that does not ask that set.
func questionMarker(set questions.Set, part, parts int) string {
	ids := make([]string, len(set.Questions))
	for i, q := range set.Questions {
		ids[i] = markerValue(q.ID)
	}
	q := ""
	if len(ids) > 0 {
		q = " q=" + strings.Join(ids, ",")
	}
	if parts <= 1 {
		return fmt.Sprintf("<!-- orchestrator:question set=%s%s -->", markerValue(set.ID), q)
	}
	return fmt.Sprintf("<!-- orchestrator:question set=%s part=%d/%d%s -->", markerValue(set.ID), part, parts, q)
}

func runMarker(runID string) string {
	return fmt.Sprintf("<!-- orchestrator:run id=%s -->", markerValue(runID))
}

func answeredMarker(setID string, commentID int64) string {
	return fmt.Sprintf("<!-- orchestrator:answered set=%s comment=%d -->", markerValue(setID), commentID)
}

func noticeMarker(key string) string {
	return fmt.Sprintf("<!-- orchestrator:notice key=%s -->", markerValue(key))
}

func reminderMarker(setID string, n int64) string {
	return fmt.Sprintf("<!-- orchestrator:reminder set=%s n=%d -->", markerValue(setID), n)
}

// markerValue escapes s for a marker: no spaces, no "-->".
func markerValue(s string) string { return url.PathEscape(s) }

var (
	questionMarkerRE = regexp.MustCompile(`<!-- orchestrator:question set=(\S+?)(?: part=(\d+)/(\d+))?(?: q=(\S*))? -->`)
	answeredMarkerRE = regexp.MustCompile(`<!-- orchestrator:answered set=(\S+?) comment=(\d+) -->`)
	noticeMarkerRE   = regexp.MustCompile(`<!-- orchestrator:notice key=(\S+?) -->`)
)

// isOwn reports whether a comment body carries a marker. Only the
// orchestrator's account's comments are its own (identity.owns).
func isOwn(body string) bool { return strings.Contains(body, markerPrefix) }

// questionPart is what a question comment's marker says.
type questionPart struct {
	setID       string // escaped
	part, parts int
	qids        []string // the set's question IDs; nil if the marker predates them
}

func parseQuestionMarker(body string) (questionPart, bool) {
	m := questionMarkerRE.FindStringSubmatch(body)
	if m == nil {
		return questionPart{}, false
	}
	qp := questionPart{setID: m[1], part: 1, parts: 1}
	for _, v := range strings.Split(m[4], ",") {
		if id, err := url.PathUnescape(v); err == nil && id != "" {
			qp.qids = append(qp.qids, id)
		}
	}
	if m[2] != "" {
		qp.part, _ = strconv.Atoi(m[2])
		qp.parts, _ = strconv.Atoi(m[3])
	}
	if qp.part < 1 || qp.parts < 1 || qp.part > qp.parts {
		return questionPart{}, false
	}
	return qp, true
}

// parseAnsweredMarker returns the answer comment recorded in a question
// comment edited to show its answer.
func parseAnsweredMarker(body, setID string) (int64, bool) {
	for _, m := range answeredMarkerRE.FindAllStringSubmatch(body, -1) {
		if m[1] == markerValue(setID) {
			id, err := strconv.ParseInt(m[2], 10, 64)
			return id, err == nil
		}
	}
	return 0, false
}

// noticeKeys returns the keys of the notice markers in body.
func noticeKeys(body string) []string {
	var keys []string
	for _, m := range noticeMarkerRE.FindAllStringSubmatch(body, -1) {
		if k, err := url.PathUnescape(m[1]); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

var (
	// mentionRE matches a GitHub @mention: a user, an organisation team, or
	// @-prefixed words after which GitHub would look up a login.
	mentionRE = regexp.MustCompile(`(^|[^A-Za-z0-9_])@([A-Za-z0-9])`)
)

// clean makes model text (or a person's text quoted back) safe to place in a
// comment: control characters and terminal escapes go (questions.Clean), HTML
// comments cannot open or close (so no hidden marker and no hidden text), and
// @mentions are broken with a zero-width space, so the text can never ping
// anyone or pose as the orchestrator's own comment.
func clean(s string) string {
	s = questions.Clean(s)
	s = strings.ReplaceAll(s, "<!--", "&lt;!--")
	s = strings.ReplaceAll(s, "-->", "--&gt;")
	s = mentionRE.ReplaceAllString(s, "$1@\u200b$2")
	return s
}

// cleanLine is clean for text that must stay on one line (titles, labels,
// headers).
func cleanLine(s string) string {
	s = clean(s)
	s = strings.Join(strings.Fields(s), " ")
	return s
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(0, n-1)]) + "…"
}

// renderSet renders the body of the question comment of set, without its
// marker: readable on its own, with how to answer.
func renderSet(set questions.Set) string {
	var b strings.Builder
	approval := questions.KindOf(set) == questions.KindApproval
	if t := cleanLine(set.Title); t != "" {
		fmt.Fprintf(&b, "### ❓ %s\n\n", truncate(t, 200))
	} else if approval {
		tool := "a tool"
		if set.Tool != nil && cleanLine(set.Tool.Tool) != "" {
			tool = "`" + strings.ReplaceAll(truncate(cleanLine(set.Tool.Tool), 100), "`", "'") + "`"
		}
		fmt.Fprintf(&b, "### 🔐 Approval needed: the agent wants to use %s\n\n", tool)
	} else {
		b.WriteString("### ❓ The agent has a question\n\n")
	}
	if c := strings.TrimSpace(clean(set.Context)); c != "" {
		b.WriteString(c)
		b.WriteString("\n\n---\n\n")
	}
	for i, q := range set.Questions {
		if i > 0 {
			b.WriteString("\n")
		}
		writeQuestion(&b, q)
	}
	b.WriteString("\n---\n\n")
	if approval {
		b.WriteString(howToApprove(set))
	} else {
		b.WriteString(howToAnswer(set))
	}
	b.WriteString(groupNote(set)) // group.go
	return b.String()
}

// howToApprove explains how to reply to an approval: with one of its three
// options, or a refusal with the reason the model is told.
func howToApprove(set questions.Set) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**How to answer:** reply `%s`, `%s` or `%s` (or its number). To refuse with a reason the agent is told, reply `Deny: the reason`.",
		questions.AllowOnce, questions.AllowForRun, questions.Deny)
	if len(set.Questions) > 0 && set.Questions[0].ID != "" {
		fmt.Fprintf(&b, " When several questions are waiting here, name this one: `/answer %s %s`.", set.Questions[0].ID, questions.AllowOnce)
	}
	b.WriteString(" Only people with write access to the repository can answer; the first valid answer is taken.\n")
	return b.String()
}

func writeQuestion(b *strings.Builder, q questions.Question) {
	header := cleanLine(q.Header)
	switch {
	case header != "" && q.ID != "":
		fmt.Fprintf(b, "**%s** · `%s`\n\n", header, q.ID)
	case header != "":
		fmt.Fprintf(b, "**%s**\n\n", header)
	case q.ID != "":
		fmt.Fprintf(b, "`%s`\n\n", q.ID)
	}
	b.WriteString(strings.TrimSpace(clean(q.Text)))
	b.WriteString("\n\n")
	for i, o := range q.Options {
		fmt.Fprintf(b, "%d. **%s**", i+1, cleanLine(o.Label))
		if d := cleanLine(o.Description); d != "" {
			fmt.Fprintf(b, " — %s", d)
		}
		b.WriteString("\n")
	}
	if len(q.Options) > 0 {
		b.WriteString("\n")
	}
	switch {
	case len(q.Options) == 0:
		b.WriteString("_Answer in your own words._\n")
	case q.MultiSelect && q.AcceptsFreeText():
		fmt.Fprintf(b, "_Choose one or more: numbers or labels separated by commas (`1, 3`), or answer in your own words with `/answer %s …` (or quote this question)._\n", q.ID)
	case q.MultiSelect:
		b.WriteString("_Choose one or more: numbers or labels separated by commas (`1, 3`)._\n")
	case q.AcceptsFreeText():
		fmt.Fprintf(b, "_Choose one: its number or its label, or answer in your own words with `/answer %s …` (or quote this question)._\n", q.ID)
	default:
		b.WriteString("_Choose one: its number or its label._\n")
	}
}

// howToAnswer explains how to reply to set.
func howToAnswer(set questions.Set) string {
	example := "2"
	if len(set.Questions) > 0 {
		q := set.Questions[0]
		if len(q.Options) == 0 {
			example = "your answer"
		} else {
			example = strconv.Itoa(min(2, len(q.Options)))
		}
	}
	var b strings.Builder
	b.WriteString("**How to answer:** reply to this issue")
	if len(set.Questions) > 1 {
		b.WriteString(" with one line per question, in order")
	}
	b.WriteString(".")
	if len(set.Questions) > 0 && set.Questions[0].ID != "" {
		fmt.Fprintf(&b, " When several questions are waiting here, name the one you answer: `/answer %s %s`.", set.Questions[0].ID, example)
	}
	b.WriteString(" Only people with write access to the repository can answer; the first valid answer is taken.\n")
	return b.String()
}

// renderAnswered is the line put at the top of the question comment once
// set is answered.
func renderAnswered(set questions.Set, resp questions.Response) string {
	by := cleanLine(resp.By)
	if by == "" {
		by = "someone"
	}
	where := ""
	if resp.Surface != "" && resp.Surface != surfaceName {
		where = " on " + cleanLine(resp.Surface)
	}
	var parts []string
	for _, q := range set.Questions {
		a, ok := resp.Answer(q.ID)
		if !ok {
			continue
		}
		var v string
		switch {
		case len(a.Labels) > 0 && a.Text != "":
			v = strings.Join(a.Labels, ", ") + " (" + a.Text + ")"
		case len(a.Labels) > 0:
			v = strings.Join(a.Labels, ", ")
		default:
			v = a.Text
		}
		v = truncate(cleanLine(v), 300)
		if h := cleanLine(q.Header); h != "" && len(set.Questions) > 1 {
			v = h + ": " + v
		}
		parts = append(parts, v)
	}
	return fmt.Sprintf("> [!NOTE]\n> ✅ **Answered%s by %s:** %s\n\n", where, by, strings.Join(parts, " · "))
}

// splitBody splits body into parts of at most limit runes, at line breaks
// where it can. Concatenated, the parts are body.
func splitBody(body string, limit int) []string {
	if limit < 1 {
		limit = 1
	}
	var parts []string
	for utf8.RuneCountInString(body) > limit {
		// the byte offset of the limit-th rune
		cut, n := 0, 0
		for i := range body {
			if n == limit {
				cut = i
				break
			}
			n++
		}
		at := strings.LastIndexByte(body[:cut], '\n')
		if at < cut/2 {
			at = cut // no line break in the second half: cut mid-line
		} else {
			at++ // keep the newline with the first part
		}
		parts = append(parts, body[:at])
		body = body[at:]
	}
	return append(parts, body)
}

// renderParts renders the question comment(s) of set with their markers,
// split under GitHub's limit.
func renderParts(set questions.Set) []string {
	body := renderSet(set)
	// Leave room for the marker, the "answered" line added on edit and a
	// continuation note.
	const reserve = 2048
	chunks := splitBody(body, maxCommentRunes-reserve)
	out := make([]string, len(chunks))
	for i, c := range chunks {
		if len(chunks) > 1 {
			c = fmt.Sprintf("%s\n\n_(part %d of %d)_\n", strings.TrimRight(c, "\n"), i+1, len(chunks))
		}
		out[i] = c + "\n" + questionMarker(set, i+1, len(chunks))
	}
	return out
}
