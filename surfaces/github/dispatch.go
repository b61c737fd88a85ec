package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// handle reads the comments of one issue, oldest first, as answers to the
// sets waiting there. Each comment is considered once per waiter, on first
// sight: an edit never makes a second answer.
func (p *poller) handle(ctx context.Context, issue int, comments []*gh.IssueComment) {
	p.proc.Lock()
	defer p.proc.Unlock()
	comments = slices.Clone(comments)
	// The notices already posted (found again after a restart).
	for _, c := range comments {
		if isOwn(c.GetBody()) {
			for _, k := range noticeKeys(c.GetBody()) {
				p.notified[k] = true
			}
		}
	}
	// Comments whose author's permission could not be looked up last time.
	retry := p.retry[issue]
	delete(p.retry, issue)
	for _, c := range retry {
		if !slices.ContainsFunc(comments, func(x *gh.IssueComment) bool { return x.GetID() == c.GetID() }) {
			comments = append(comments, c)
		}
	}
	slices.SortFunc(comments, func(a, b *gh.IssueComment) int { return cmpID(a.GetID(), b.GetID()) })
	for _, c := range comments {
		if ctx.Err() != nil {
			return
		}
		if !p.handleOne(ctx, issue, c) {
			p.retry[issue] = append(p.retry[issue], c)
		}
	}
}

func cmpID(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// handleOne reads one comment. It returns false if the comment must be read
// again later (a permission lookup failed).
func (p *poller) handleOne(ctx context.Context, issue int, c *gh.IssueComment) bool {
	var cands []*waiter
	for _, w := range p.waitersFor(issue) {
		if c.GetID() > w.afterID && !w.seen[c.GetID()] {
			cands = append(cands, w)
		}
	}
	if len(cands) == 0 {
		return true
	}
	markSeen := func(ws []*waiter) {
		for _, w := range ws {
			w.seen[c.GetID()] = true
		}
	}
	body := c.GetBody()
	login := c.GetUser().GetLogin()
	switch {
	case isOwn(body): // the orchestrator's own comment, whoever the author
		markSeen(cands)
		return true
	case isBot(c.GetUser()):
		markSeen(cands)
		return true
	}

	// Who may answer which of the waiting sets.
	var allowed, denied []*waiter
	complete := true
	for _, w := range cands {
		ok, err := p.mayAnswer(ctx, w.s, login)
		if err != nil {
			// Not marked seen: the next poll tries again.
			p.c.log.Warn("github: permission lookup failed", "repo", p.owner+"/"+p.name, "login", login, "err", err)
			complete = false
			continue
		}
		if ok {
			allowed = append(allowed, w)
		} else {
			denied = append(denied, w)
		}
	}
	markSeen(allowed)
	markSeen(denied)
	if len(allowed) == 0 {
		if len(denied) > 0 {
			p.notifyDenied(ctx, issue, c, denied)
		}
		return complete
	}

	text := answerText(body)
	sets := setsOf(allowed)
	targets := sets
	if len(sets) > 1 {
		// Several sets wait on this issue: the answer must name them.
		targets = nil
		for _, set := range sets {
			if lines := keyedLines(set, text); len(lines) > 0 {
				targets = append(targets, set)
			}
		}
		if len(targets) == 0 {
			p.notifyWhich(ctx, issue, c, sets)
			return complete
		}
	}
	for _, set := range targets {
		t := text
		if len(sets) > 1 {
			t = strings.Join(keyedLines(set, text), "\n")
		}
		var answers []questions.Answer
		var err error
		if max := allowed[0].s.cfg.MaxAnswerBytes; len(body) > max {
			err = &questions.InvalidAnswerError{Message: fmt.Sprintf("the answer is %d bytes long; at most %d are read", len(body), max)}
		} else {
			answers, err = questions.ParseAnswer(set, t)
		}
		if err != nil {
			p.notifyInvalid(ctx, issue, c, set, err)
			continue
		}
		resp := questions.Response{
			SetID:   set.ID,
			Answers: answers,
			By:      "@" + login,
			Surface: surfaceName,
			At:      c.GetCreatedAt().Time,
		}
		p.take(ctx, c, set, resp, allowed)
	}
	return complete
}

// take hands resp to every waiter of set, then acknowledges: 👀 on the
// answer, and the question comment edited to show it.
func (p *poller) take(ctx context.Context, c *gh.IssueComment, set questions.Set, resp questions.Response, ws []*waiter) {
	var s *Surface
	for _, w := range ws {
		if w.set.ID == set.ID {
			s = w.s
		}
	}
	p.c.log.Info("github: answer taken", "set", set.ID, "repo", p.owner+"/"+p.name, "comment", c.GetID(), "by", resp.By)
	if _, _, err := p.c.api.Reactions.CreateIssueCommentReaction(ctx, p.owner, p.name, c.GetID(), "eyes"); err != nil {
		p.c.log.Warn("github: react 👀", "comment", c.GetID(), "err", err)
	}
	if a := p.c.askedInfo(s.key(set.ID)); a != nil {
		if err := s.markAnswered(ctx, set, a, resp, c.GetID()); err != nil {
			p.c.log.Warn("github: show the answer", "set", set.ID, "err", err)
		}
	}
	for _, w := range ws {
		if w.set.ID == set.ID {
			w.finish(resp, nil)
		}
	}
}

// mayAnswer reports whether login may answer on s: deny by default; write,
// maintain or admin permission, or the allowlist.
func (p *poller) mayAnswer(ctx context.Context, s *Surface, login string) (bool, error) {
	if login == "" {
		return false, nil
	}
	if s.allow[strings.ToLower(login)] {
		return true, nil
	}
	if s.cfg.AllowOnly {
		return false, nil
	}
	level, err := p.c.permission(ctx, p.owner, p.name, login)
	if err != nil {
		return false, err
	}
	switch level {
	case "admin", "maintain", "write":
		return true, nil
	}
	return false, nil
}

// permission returns login's permission on the repository, cached briefly.
func (c *Client) permission(ctx context.Context, owner, name, login string) (string, error) {
	key := strings.ToLower(owner + "/" + name + "\x00" + login)
	c.mu.Lock()
	e, ok := c.perms[key]
	c.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		return e.level, nil
	}
	// go-github v60's RepositoryPermissionLevel has no role_name, which is
	// where "maintain" shows (the legacy permission field says "write").
	var pl struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	level := "none"
	req, err := c.api.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/collaborators/%s/permission",
		url.PathEscape(owner), url.PathEscape(name), url.PathEscape(login)), nil)
	if err != nil {
		return "", err
	}
	if _, err := c.api.Do(ctx, req, &pl); err != nil {
		var er *gh.ErrorResponse
		if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != http.StatusNotFound {
			return "", fmt.Errorf("permission of %s on %s/%s: %w", login, owner, name, err)
		}
		// 404: not a collaborator (or not visible): no permission.
	} else {
		level = pl.Permission
		switch pl.RoleName {
		case "admin", "maintain", "write":
			level = pl.RoleName
		}
	}
	c.mu.Lock()
	c.perms[key] = permEntry{level: level, expires: c.now().Add(c.permTTL)}
	c.mu.Unlock()
	return level, nil
}

// isBot reports whether u is a bot account.
func isBot(u *gh.User) bool {
	return u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]")
}

// setsOf returns the distinct sets of ws, in order.
func setsOf(ws []*waiter) []questions.Set {
	var out []questions.Set
	for _, w := range ws {
		if !slices.ContainsFunc(out, func(s questions.Set) bool { return s.ID == w.set.ID }) {
			out = append(out, w.set)
		}
	}
	return out
}

// answerText prepares a comment for the answer reader: quoted lines (a
// "quote reply" of the question) go, and "/answer QID rest" becomes
// "QID: rest".
func answerText(body string) string {
	var out []string
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, ">") {
			continue
		}
		if rest, ok := strings.CutPrefix(t, "/answer"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			rest = strings.TrimSpace(rest)
			id, ans, _ := strings.Cut(rest, " ")
			id = strings.TrimSuffix(id, ":")
			if !isAnswerKey(id) {
				continue // a malformed command answers nothing
			}
			line = id + ": " + strings.TrimSpace(ans)
		}
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// isAnswerKey reports whether s can name a question in "/answer KEY …": a
// question ID, a number or a one-word header.
func isAnswerKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' && r != '.' {
			return false
		}
	}
	return true
}

// keyedLines returns the lines of text that name a question of set by its
// ID ("QID: answer").
func keyedLines(set questions.Set, text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		key, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		key = strings.Trim(strings.TrimSpace(key), "`*")
		for _, q := range set.Questions {
			if q.ID != "" && strings.EqualFold(q.ID, key) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}

// reply posts a notice on the issue, once per key.
func (p *poller) reply(ctx context.Context, issue int, key, text string) {
	if p.notified[key] {
		return
	}
	p.notified[key] = true
	body := text + "\n\n" + noticeMarker(key)
	if _, _, err := p.c.api.Issues.CreateComment(ctx, p.owner, p.name, issue, &gh.IssueComment{Body: gh.String(body)}); err != nil {
		p.notified[key] = false
		p.c.log.Warn("github: reply", "repo", p.owner+"/"+p.name, "issue", issue, "err", err)
	}
}

// notifyDenied tells someone not allowed to answer so, at most once per
// person and set.
func (p *poller) notifyDenied(ctx context.Context, issue int, c *gh.IssueComment, ws []*waiter) {
	login := c.GetUser().GetLogin()
	for _, set := range setsOf(ws) {
		key := "denied/" + strings.ToLower(login) + "/" + set.ID
		p.reply(ctx, issue, key, fmt.Sprintf("Thanks @%s, but only people with write access to this repository (or on the orchestrator's allowlist) can answer %s, so your reply was not taken.",
			login, questionRefs(set)))
	}
}

// notifyWhich asks which set an answer is for when several wait.
func (p *poller) notifyWhich(ctx context.Context, issue int, c *gh.IssueComment, sets []questions.Set) {
	var open []string
	for _, set := range sets {
		open = append(open, questionRefs(set))
	}
	example := sets[0].Questions[0].ID
	p.reply(ctx, issue, fmt.Sprintf("which/%d", c.GetID()), fmt.Sprintf(
		"@%s several questions are waiting on this issue (%s): say which one you answer, one line per question, such as `/answer %s 1`. Nothing was taken.",
		c.GetUser().GetLogin(), strings.Join(open, "; "), example))
}

// notifyInvalid says why an answer could not be read and what is valid.
func (p *poller) notifyInvalid(ctx context.Context, issue int, c *gh.IssueComment, set questions.Set, err error) {
	msg := err.Error()
	var valid []string
	var ie *questions.InvalidAnswerError
	if errors.As(err, &ie) {
		msg = ie.Message
		valid = ie.Valid
	}
	var b strings.Builder
	fmt.Fprintf(&b, "@%s that answer could not be read for %s: %s.", c.GetUser().GetLogin(), questionRefs(set), cleanLine(msg))
	if len(valid) > 0 {
		var vs []string
		for _, v := range valid {
			vs = append(vs, "`"+strings.ReplaceAll(cleanLine(v), "`", "'")+"`")
		}
		fmt.Fprintf(&b, "\n\nValid answers: %s.", strings.Join(vs, ", "))
	}
	b.WriteString(" The question is still open: reply again.")
	p.reply(ctx, issue, fmt.Sprintf("invalid/%d/%s", c.GetID(), set.ID), b.String())
}

// questionRefs names the questions of set: "`q1a2b3` (Database)".
func questionRefs(set questions.Set) string {
	var out []string
	for _, q := range set.Questions {
		r := "`" + q.ID + "`"
		if h := cleanLine(q.Header); h != "" {
			r += " (" + truncate(h, 40) + ")"
		}
		out = append(out, r)
	}
	return strings.Join(out, ", ")
}
