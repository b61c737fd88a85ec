package github

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var (
	_ surfaces.Closer   = (*Surface)(nil)
	_ surfaces.RunEnder = (*Surface)(nil)
)

// closedWatch is how long this process keeps reading the replies to a
// question it closed without an answer, to tell the first one that it is
// closed. Listing a repository's comments is one conditional request per
// poll, whatever the number of issues watched.
const closedWatch = 24 * time.Hour

// ghost is a set this process closed without an answer (cancelled, timed
// out): a reply addressed to it is told, once, that it is closed.
type ghost struct {
	s       *Surface
	set     questions.Set
	issue   int
	afterID int64 // its last question comment
	partIDs []int64
	body    string // its first question comment, for quotes
	until   time.Time
	told    bool // guarded by poller.proc
}

// CloseSet edits the question comment of set to show it closed without an
// answer, saying why (reason: "cancelled by alice", "timed out: …"), so that
// nobody answers it; the first reply to it after that is told it is
// closed. It does nothing to a comment that shows an answer already, and
// nothing if set was never asked here.
func (s *Surface) CloseSet(ctx context.Context, set questions.Set, reason string) error {
	a, err := s.find(ctx, set)
	if err != nil {
		return fmt.Errorf("github: close %s: %w", set.ID, err)
	}
	if a == nil {
		return nil
	}
	if err := s.markClosed(ctx, set, a, reason); err != nil {
		return err
	}
	p := s.c.poller(s.owner, s.name)
	p.closed(a.issue, set.ID, 0)
	s.c.mu.Lock()
	g := &ghost{s: s, set: set, issue: a.issue, afterID: a.partIDs[len(a.partIDs)-1], partIDs: append([]int64(nil), a.partIDs...),
		until: s.c.now().Add(closedWatch)}
	if len(a.bodies) > 0 {
		g.body = a.bodies[0]
	}
	s.c.mu.Unlock()
	p.addGhost(g, s.c.now().Add(-overlap))
	return nil
}

// markClosed edits the first question comment of set to show it closed.
func (s *Surface) markClosed(ctx context.Context, set questions.Set, a *asked, reason string) error {
	defer s.c.lock(s.key(set.ID))()
	s.c.mu.Lock()
	done := a.answered
	body := ""
	if len(a.bodies) > 0 {
		body = a.bodies[0]
	}
	id := a.partIDs[0]
	s.c.mu.Unlock()
	if done || strings.Contains(body, closedMarker(set.ID)) {
		return nil
	}
	newBody := renderClosed(reason) + body + "\n" + closedMarker(set.ID)
	if _, _, err := s.c.api.Issues.EditComment(ctx, s.owner, s.name, id, &gh.IssueComment{Body: gh.String(newBody)}); err != nil {
		return fmt.Errorf("github: edit question comment %d of %s: %w", id, s.repo(), err)
	}
	s.c.log.Info("github: question closed", "set", set.ID, "repo", s.repo(), "issue", a.issue, "reason", reason)
	s.c.mu.Lock()
	a.answered = true // nothing more to show on it
	if len(a.bodies) > 0 {
		a.bodies[0] = newBody
	}
	s.c.mu.Unlock()
	s.recordDone(ctx, set, a)
	return nil
}

// renderClosed is the line put at the top of the question comment of a set
// closed without an answer.
func renderClosed(reason string) string {
	r := truncate(cleanLine(reason), 300)
	if r == "" {
		r = "closed"
	}
	return fmt.Sprintf("> [!WARNING]\n> ⛔ **Closed: %s.** This question takes no answer any more.\n\n", r)
}

// closedMarker marks the question comment of a set closed without an answer.
func closedMarker(setID string) string {
	return fmt.Sprintf("<!-- orchestrator:closed set=%s -->", markerValue(setID))
}

var closedMarkerRE = regexp.MustCompile(`<!-- orchestrator:closed set=(\S+?) -->`)

// parseClosedMarker reports whether body (a question comment) shows its set
// escID (escaped) closed without an answer.
func parseClosedMarker(body, escID string) bool {
	for _, m := range closedMarkerRE.FindAllStringSubmatch(body, -1) {
		if m[1] == escID {
			return true
		}
	}
	return false
}

// addGhost watches replies to a set closed without an answer.
func (p *poller) addGhost(g *ghost, since time.Time) {
	p.proc.Lock()
	p.ghosts = append(p.ghosts, g)
	if len(p.ghosts) > maxCached {
		p.ghosts = p.ghosts[len(p.ghosts)-maxCached:]
	}
	if st := p.issues[g.issue]; st != nil {
		st.learnGhost(g)
	}
	p.proc.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cursor.IsZero() || since.Before(p.cursor) {
		p.cursor = since.UTC().Truncate(time.Second)
	}
	if !p.running {
		p.running = true
		p.c.wg.Add(1)
		go p.run()
	}
}

// ghostsFor returns the live ghosts on issue, dropping expired ones.
// p.proc is held.
func (p *poller) ghostsFor(issue int) []*ghost {
	now := p.c.now()
	var out []*ghost
	kept := p.ghosts[:0]
	for _, g := range p.ghosts {
		if now.After(g.until) {
			continue
		}
		kept = append(kept, g)
		if g.issue == issue {
			out = append(out, g)
		}
	}
	clear(p.ghosts[len(kept):])
	p.ghosts = kept
	return out
}

// watching reports whether closed sets are still watched.
func (p *poller) watching() bool {
	p.proc.Lock()
	defer p.proc.Unlock()
	now := p.c.now()
	for _, g := range p.ghosts {
		if !now.After(g.until) {
			return true
		}
	}
	return false
}

// learnGhost makes sure the issue's view holds g's set, closed.
func (st *issueState) learnGhost(g *ghost) {
	k := markerValue(g.set.ID)
	t := st.sets[k]
	if t == nil {
		t = &threadSet{id: g.set.ID, qids: questionIDs(g.set), body: g.body}
		st.sets[k] = t
	}
	t.afterID = max(t.afterID, g.afterID)
	t.dead = true
	if t.closedBy == 0 {
		t.closedBy = -1
	}
}

// decideClosed decides comment c when no set of this process waits for it:
// a reply addressed to a set this process closed without an answer gets,
// once per set, a short reply saying the question is closed.
func (p *poller) decideClosed(ctx context.Context, issue int, st *issueState, c *gh.IssueComment) bool {
	var g *ghost
	for _, x := range p.ghostsFor(issue) {
		if c.GetID() <= x.afterID {
			continue
		}
		t := st.sets[markerValue(x.set.ID)]
		if p.refersTo(st, t, c, x.set, true) {
			g = x
			break
		}
	}
	if g == nil {
		return true
	}
	key := commentKey(p.owner+"/"+p.name, c.GetID())
	if d, err := p.c.ledger.CommentDecision(ctx, key); err != nil {
		p.c.log.Warn("github: look up a comment's decision", "comment", c.GetID(), "err", err)
		return false
	} else if d != "" {
		return true
	}
	if !g.told {
		p.notifyClosed(ctx, issue, st, c, g.set)
		g.told = true
	}
	return p.record(ctx, key, decClosed)
}

// refersTo reports whether c is addressed to set t (as the issue shows it;
// set is what this process knows of it, known whether that is all of it):
// it names the set's questions, links or quotes its question comment, or
// (when t is the last set asked before c) it looks like an answer to it.
func (p *poller) refersTo(st *issueState, t *threadSet, c *gh.IssueComment, set questions.Set, known bool) bool {
	if t == nil {
		return false
	}
	body := c.GetBody()
	ids := t.qids
	if known {
		ids = questionIDs(set)
	}
	if namesQuestion(body, ids) || quotes(body, t.body) || strings.Contains(body, "#issuecomment-"+strconv.FormatInt(t.afterID, 10)) {
		return true
	}
	// The last set asked before c: a bare answer is addressed to it.
	for _, o := range st.sets {
		if o != t && o.afterID > t.afterID && o.afterID < c.GetID() {
			return false
		}
	}
	return known && looksLikeAnswer(set, body)
}

// notifyClosed tells that a question closed without an answer takes none.
func (p *poller) notifyClosed(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, set questions.Set) {
	p.reply(ctx, issue, st, "closed/"+set.ID, fmt.Sprintf("@%s this question is closed (%s): your reply was not taken.",
		c.GetUser().GetLogin(), questionRefs(set)))
}

// attempt reports whether comment c looks like an answer to one of the
// sets waiting (mine: the Asks of this process, by set ID).
func attempt(waiting []*threadSet, mine map[string]*waiter, c *gh.IssueComment) bool {
	body := c.GetBody()
	if hasAnswerCommand(body) {
		return true
	}
	for _, t := range waiting {
		w := mine[t.id]
		ids := t.qids
		if w != nil {
			ids = questionIDs(w.set)
		}
		if namesQuestion(body, ids) || quotes(body, t.body) || strings.Contains(body, "#issuecomment-"+strconv.FormatInt(t.afterID, 10)) {
			return true
		}
		if w != nil && looksLikeAnswer(w.set, body) {
			return true
		}
	}
	return false
}

// looksLikeAnswer reports whether body reads as an answer to set: a
// `/answer` line, option numbers or labels on every line, or any reply when
// a question of set asks for words only (it has no options).
func looksLikeAnswer(set questions.Set, body string) bool {
	if hasAnswerCommand(body) {
		return true
	}
	for _, q := range set.Questions {
		if len(q.Options) == 0 {
			return true
		}
	}
	text := answerText(body)
	if nearOption(set, text) {
		return true
	}
	n := 0
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && namesQuestionKey(set, strings.TrimSpace(k)) {
			line = strings.TrimSpace(v)
		}
		if !choosesOption(set, line) {
			return false
		}
		n++
	}
	return n > 0
}

var numbersRE = regexp.MustCompile(`^[0-9]+(\s*,\s*[0-9]+)*\.?$`)

// optionTokenRE matches a line that starts with an option-like token: "#2",
// "2)", "option 2", "choice 4".
var optionTokenRE = regexp.MustCompile(`(?i)^(#\s*[0-9]+|[0-9]+\)|(option|choice)\s*#?\s*[0-9]+)`)

// nearOption reports whether text is a near miss of an option of a
// question of set: a single short line (at most three words and 40
// characters) that starts with an option-like token ("#4", "4)", "option
// 4"), or whose first word is a misspelling or a short prefix of an option's
// label ("postgress", "sqlit", "mysq"). Such a reply tries to answer and
// gets the valid options; anything longer or freer is discussion.
func nearOption(set questions.Set, text string) bool {
	line := strings.TrimSpace(text)
	if line == "" || strings.Contains(line, "\n") || utf8.RuneCountInString(line) > 40 {
		return false
	}
	words := strings.Fields(line)
	if len(words) > 3 {
		return false
	}
	if optionTokenRE.MatchString(line) {
		return true
	}
	first := strings.ToLower(strings.TrimRight(words[0], ".,;:!"))
	if utf8.RuneCountInString(first) < 3 {
		return false
	}
	for _, q := range set.Questions {
		for _, o := range q.Options {
			lw := strings.Fields(strings.ToLower(o.Label))
			if len(lw) == 0 {
				continue
			}
			label := lw[0]
			if n := utf8.RuneCountInString(label); n >= 4 && utf8.RuneCountInString(first) >= 4 && editDistance(first, label) <= max(1, n/4) {
				return true
			}
			if strings.HasPrefix(label, first) && first != label {
				return true
			}
		}
	}
	return false
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// choosesOption reports whether line picks options of a question of set by
// number (valid or not: a wrong number is an answer that can't be read) or
// by label.
func choosesOption(set questions.Set, line string) bool {
	if numbersRE.MatchString(line) {
		return true
	}
	other := strings.HasPrefix(strings.ToLower(line), "other:")
	for _, q := range set.Questions {
		if other && q.AcceptsFreeText() {
			return true // "other: …", the free-text form beside options
		}
		// An option's label, perhaps with words after it ("Deny: the
		// reason" refuses an approval with its reason).
		if a, err := questions.ParseQuestionAnswer(q, line); err == nil && len(a.Labels) > 0 {
			return true
		}
		for _, o := range q.Options {
			if rest, ok := cutPrefixFold(line, o.Label); ok && (rest == "" || rest[0] == ':') {
				return true
			}
		}
	}
	return false
}

// namesQuestionKey reports whether k, the part of a line before its colon,
// names a question of set the way answers may: its ID, its header or its
// number ("q7f3a: 2", "Auth: OAuth2", "1: 2").
func namesQuestionKey(set questions.Set, k string) bool {
	for i, q := range set.Questions {
		if strings.EqualFold(k, q.ID) || (q.Header != "" && strings.EqualFold(k, strings.TrimSpace(q.Header))) || k == strconv.Itoa(i+1) {
			return true
		}
	}
	return false
}

// hasAnswerCommand reports whether body has a "/answer" line.
func hasAnswerCommand(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(t, "/answer"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return true
		}
	}
	return false
}

// namesQuestion reports whether body names one of ids as a word.
func namesQuestion(body string, ids []string) bool {
	lb := strings.ToLower(body)
	for _, id := range ids {
		id = strings.ToLower(id)
		if id == "" {
			continue
		}
		for i := 0; ; {
			j := strings.Index(lb[i:], id)
			if j < 0 {
				break
			}
			j += i
			end := j + len(id)
			if (j == 0 || !wordByte(lb[j-1])) && (end == len(lb) || !wordByte(lb[end])) {
				return true
			}
			i = j + 1
		}
	}
	return false
}

func wordByte(b byte) bool {
	return b == '_' || b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z'
}

// quotes reports whether body quotes a line of question (a question
// comment): GitHub's "Quote reply" quotes the source, or the rendered text
// selected, so emphasis and code marks are ignored.
func quotes(body, question string) bool {
	if question == "" {
		return false
	}
	q := plain(question)
	for _, line := range strings.Split(body, "\n") {
		t, ok := strings.CutPrefix(strings.TrimSpace(line), ">")
		if !ok {
			continue
		}
		t = plain(strings.TrimLeft(t, "> "))
		if len(t) >= 8 && strings.Contains(q, t) { // not a word or two any text may hold
			return true
		}
	}
	return false
}

// plain is s without Markdown emphasis and code marks, spaces collapsed.
func plain(s string) string {
	s = strings.NewReplacer("*", "", "_", "", "`", "").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// RunEnded closes the run's own issue (issue 0) with a final comment saying
// how the run ended, unless SurfaceConfig.LeaveIssueOpen. It does nothing
// for a fixed issue, or a run that never opened one. The final comment
// carries a marker, so a retry neither posts it twice nor fails on an
// issue closed already.
func (s *Surface) RunEnded(ctx context.Context, p surfaces.RunProgress) error {
	if s.cfg.Issue > 0 || s.cfg.LeaveIssueOpen || p.RunID == "" {
		return nil
	}
	issue, err := s.issueFor(ctx, questions.Set{RunID: p.RunID}, false)
	if err != nil {
		return fmt.Errorf("github: close the issue of run %s: %w", p.RunID, err)
	}
	if issue == 0 {
		return nil
	}
	marker := noticeMarker("run-ended/" + p.RunID)
	comments, _, err := s.listIssueComments(ctx, issue)
	if err != nil {
		return fmt.Errorf("github: close %s#%d: list comments: %w", s.repo(), issue, err)
	}
	me, err := s.c.self(ctx)
	if err != nil {
		return fmt.Errorf("github: close %s#%d: %w", s.repo(), issue, err)
	}
	if findMarked(me.ownOnly(comments), marker) == nil {
		if s.cfg.Progress {
			p.Summary = "" // the status comment shows it already
		}
		if _, err := s.createComment(ctx, issue, renderRunEnded(p)+"\n\n"+marker, marker); err != nil {
			return fmt.Errorf("github: close %s#%d: post the final comment: %w", s.repo(), issue, err)
		}
	}
	reason := "completed"
	if p.Step != "done" {
		reason = "not_planned"
	}
	req := &gh.IssueRequest{State: gh.String("closed"), StateReason: gh.String(reason)}
	if _, _, err := s.c.api.Issues.Edit(ctx, s.owner, s.name, issue, req); err != nil {
		return fmt.Errorf("github: close %s#%d: %w", s.repo(), issue, err)
	}
	s.c.log.Info("github: run issue closed", "run", p.RunID, "repo", s.repo(), "issue", issue, "status", p.Step)
	return nil
}

// renderRunEnded is the final comment on a run's own issue.
func renderRunEnded(p surfaces.RunProgress) string {
	icon := "❌"
	switch p.Step {
	case "done":
		icon = "✅"
	case "cancelled":
		icon = "⛔"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s **The run %s** (`%s`)", icon, cleanLine(p.Step), strings.ReplaceAll(cleanLine(p.RunID), "`", "'"))
	if p.CostUSD > 0 {
		fmt.Fprintf(&b, " · $%.4f", p.CostUSD)
	}
	b.WriteString(". This issue is closed: its questions take no answer any more.")
	if u := cleanLine(p.PRURL); strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		b.WriteString("\n\nPull request: " + u)
	}
	if sum := strings.TrimSpace(clean(p.Summary)); sum != "" {
		b.WriteString("\n\n")
		b.WriteString(truncate(sum, 4000))
	}
	return b.String()
}

// cutPrefixFold is strings.CutPrefix, ignoring case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}
