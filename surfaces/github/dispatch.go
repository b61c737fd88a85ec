package github

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// handle reads comments of one issue where sets wait, oldest first. The
// orchestrator's own comments say which sets were asked there, whether each
// is still open (an answered question comment records the comment that
// closed it) and which notices were posted; every other comment is decided
// once, ever (the Ledger), from that view of the issue: the same live,
// after a restart, and whichever Ask happens to be registered yet.
func (p *poller) handle(ctx context.Context, issue int, comments []*gh.IssueComment) {
	p.proc.Lock()
	defer p.proc.Unlock()
	ghosts := p.ghostsFor(issue)
	if len(p.waitersFor(issue)) == 0 && len(ghosts) == 0 {
		return // nothing waits here any more
	}
	st := p.issue(issue)
	for _, g := range ghosts {
		st.learnGhost(g)
	}
	comments = slices.Clone(comments)
	// Comments that could not be decided last time (a lookup failed).
	for _, c := range st.retry {
		if !slices.ContainsFunc(comments, func(x *gh.IssueComment) bool { return x.GetID() == c.GetID() }) {
			comments = append(comments, c)
		}
	}
	clear(st.retry)
	// Which comments are the orchestrator's own is known by their author:
	// until the orchestrator's account is known, nothing is read.
	me, err := p.c.self(ctx)
	if err != nil {
		p.c.log.Warn("github: comments left to read again", "repo", p.owner+"/"+p.name, "issue", issue, "err", err)
		for _, c := range comments {
			st.retry[c.GetID()] = c
		}
		return
	}
	for _, c := range comments {
		st.learn(me, c)
	}
	clear(st.openNow)
	slices.SortFunc(comments, func(a, b *gh.IssueComment) int { return cmp.Compare(a.GetID(), b.GetID()) })
	for _, c := range comments {
		if ctx.Err() != nil {
			return
		}
		// Once a comment's decision starts, it is finished whatever
		// becomes of ctx: the runner ends an Ask as soon as the store has
		// the answer, which is before the answer's 👀, the question
		// comment edited to show it and the decision recorded.
		dctx, done := p.c.ackContext(ctx)
		ok := p.decide(dctx, issue, st, me, c)
		done()
		if !ok {
			st.retry[c.GetID()] = c
		}
	}
}

// ackTimeout bounds what is done about one comment once its decision
// started (offer, reactions, edits, notices, the ledger), apart from the
// context it was started in.
const ackTimeout = 2 * time.Minute

// ackContext is ctx without its cancellation, ended by the client's Close
// or after ackTimeout: what a surface does about a decision already made
// must not depend on the Ask that was waiting for it (surfaces.Surface).
func (c *Client) ackContext(ctx context.Context) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	stop := context.AfterFunc(c.ctx, cancel)
	return actx, func() {
		stop()
		cancel()
	}
}

// learn takes what an orchestrator comment says about the issue. Markers
// in a comment someone else wrote say nothing.
func (st *issueState) learn(me identity, c *gh.IssueComment) {
	if !me.owns(c) {
		return
	}
	body := c.GetBody()
	for _, k := range noticeKeys(body) {
		st.notified[k] = true
	}
	qp, ok := parseQuestionMarker(body)
	if !ok {
		return
	}
	id, err := url.PathUnescape(qp.setID)
	if err != nil {
		return
	}
	t := st.sets[qp.setID]
	if t == nil {
		t = &threadSet{id: id}
		st.sets[qp.setID] = t
	}
	if qp.qids != nil {
		t.qids = qp.qids
	}
	t.afterID = max(t.afterID, c.GetID())
	if qp.part == 1 {
		t.body = body
	}
	if parseClosedMarker(body, qp.setID) {
		t.dead = true
		if t.closedBy == 0 {
			t.closedBy = -1
		}
	}
	if answerID, ok := parseAnsweredMarker(body, id); ok && t.closedBy == 0 {
		t.closedBy = answerID
		if answerID == 0 {
			t.closedBy = -1
		}
	}
}

// setOpen asks the ledger whether a set asked on the issue still waits. A
// set that does not never will again (pending is left for good): that is
// kept while the issue's state lives; that it does is kept for one handle.
func (st *issueState) setOpen(ctx context.Context, l Ledger, id string) (bool, error) {
	if st.gone[id] {
		return false, nil
	}
	if open, ok := st.openNow[id]; ok {
		return open, nil
	}
	open, err := l.SetOpen(ctx, id)
	if err != nil {
		return false, err
	}
	if open {
		st.openNow[id] = true
	} else {
		st.gone[id] = true
	}
	return open, nil
}

// takenBefore reports whether c already answered a set of the issue that
// is closed now: the set's question comment names c as its answer (a
// marker of the orchestrator's own), or the store's answer of the set is
// c's (AnswerLedger). It returns false, false if the store could not be
// asked.
func (p *poller) takenBefore(ctx context.Context, st *issueState, c *gh.IssueComment) (taken, ok bool) {
	for _, t := range st.sets {
		if t.closedBy == c.GetID() {
			return true, true
		}
	}
	al, isAL := p.c.ledger.(AnswerLedger)
	if !isAL {
		return false, true
	}
	resp := questions.Response{By: "@" + c.GetUser().GetLogin(), Surface: surfaceName, At: c.GetCreatedAt().Time}
	for _, t := range st.sets {
		if !t.openAt(c.GetID()) || t.dead {
			continue
		}
		open, err := st.setOpen(ctx, p.c.ledger, t.id)
		if err != nil {
			p.c.log.Warn("github: look up a question set", "set", t.id, "err", err)
			return false, false
		}
		if open {
			continue // still waiting: an offer tells (Offer knows its own answers)
		}
		final, answered, err := al.SetAnswer(ctx, t.id)
		if err != nil {
			p.c.log.Warn("github: look up a question set's answer", "set", t.id, "err", err)
			return false, false
		}
		if answered && ownAnswer(final, resp) {
			return true, true
		}
	}
	return false, true
}

// record records the decision about a comment; false if it could not be.
func (p *poller) record(ctx context.Context, key, decision string) bool {
	if _, err := p.c.ledger.DecideComment(ctx, key, decision); err != nil {
		p.c.log.Warn("github: record a comment's decision", "key", key, "err", err)
		return false
	}
	return true
}

// offer offers c's answer to one set and tells its author what became of
// it. It returns the decision, or false if c must be read again later.
func (p *poller) offer(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, tg target) (string, bool) {
	w := tg.w
	login := c.GetUser().GetLogin()
	ok, err := p.mayAnswer(ctx, w.s, login)
	if err != nil {
		p.c.log.Warn("github: permission lookup failed", "repo", p.owner+"/"+p.name, "login", login, "err", err)
		return "", false
	}
	if !ok {
		p.notifyDenied(ctx, issue, st, c, w.set)
		return decRefused, true
	}
	var answers []questions.Answer
	// "--remember spec:7d" after the answer keeps it as a rule once taken.
	text, remember, pattern, rok := surfaces.CutRemember(tg.text)
	if max := w.s.cfg.MaxAnswerBytes; len(c.GetBody()) > max {
		err = &questions.InvalidAnswerError{Message: fmt.Sprintf("the answer is %d bytes long; at most %d are read", len(c.GetBody()), max)}
	} else if !rok {
		err = &questions.InvalidAnswerError{Message: "--remember takes a scope and a lifetime, as in `--remember spec:7d`"}
	} else {
		answers, err = questions.ParseAnswer(w.set, text)
	}
	if err != nil {
		p.notifyInvalid(ctx, issue, st, c, w.set, err)
		return decInvalid, true
	}
	resp := questions.Response{
		SetID:   w.set.ID,
		Answers: answers,
		By:      "@" + login,
		Surface: surfaceName,
		At:      c.GetCreatedAt().Time,
	}
	var dec questions.Decision
	if ga, ok := w.answers.(surfaces.GroupAnswers); ok && wantsAll(c.GetBody()) {
		dec, err = p.offerAll(ctx, issue, st, c, w, ga, resp) // group.go
	} else {
		dec, err = w.answers.Offer(ctx, resp)
	}
	if err != nil {
		p.c.log.Warn("github: offer an answer", "set", w.set.ID, "comment", c.GetID(), "err", err)
		return "", false
	}
	switch {
	case dec.Taken:
		p.taken(ctx, st, c, tg, resp, dec.Final)
		if remember != "" {
			p.remember(ctx, issue, st, c, tg, resp, dec.Final, remember, pattern)
		}
		return decTaken, true
	case dec.Invalid != nil:
		p.notifyInvalid(ctx, issue, st, c, w.set, dec.Invalid)
		return decInvalid, true
	case dec.Closed && dec.Final != nil && ownAnswer(*dec.Final, resp):
		// Taken before a restart that came before its decision was recorded.
		p.taken(ctx, st, c, tg, resp, dec.Final)
		return decTaken, true
	case dec.Closed:
		p.notifyLate(ctx, issue, st, c, w.set, dec.Final)
		if dec.Final != nil {
			p.showAnswered(ctx, st, tg, *dec.Final, 0)
		}
		w.finish(nil)
		return decLate, true
	}
	p.c.log.Warn("github: an offer was neither taken, refused nor closed", "set", w.set.ID, "comment", c.GetID())
	return "", false
}

// ownAnswer reports whether final is (or includes) resp: the answer given
// in the same comment.
func ownAnswer(final, resp questions.Response) bool {
	return strings.Contains(final.Surface, surfaceName) && strings.Contains(final.By, resp.By) && final.At.Equal(resp.At)
}

// taken acknowledges an answer the store took: 👀 on it, and once the set
// has its whole answer the question comment shows it.
func (p *poller) taken(ctx context.Context, st *issueState, c *gh.IssueComment, tg target, resp questions.Response, final *questions.Response) {
	p.c.log.Info("github: answer taken", "set", tg.w.set.ID, "repo", p.owner+"/"+p.name, "comment", c.GetID(), "by", resp.By)
	// The answer is taken: its 👀 lands even if Close comes meanwhile.
	rctx, done := p.c.accepted(ctx)
	if _, _, err := p.c.api.Reactions.CreateIssueCommentReaction(rctx, p.owner, p.name, c.GetID(), "eyes"); err != nil {
		p.c.log.Warn("github: react 👀", "comment", c.GetID(), "err", err)
	}
	done()
	if final != nil {
		p.showAnswered(ctx, st, tg, *final, c.GetID())
		tg.w.finish(nil)
	}
}

// showAnswered edits the question comment of a closed set to show its
// answer, taken from comment answerID (0: elsewhere).
func (p *poller) showAnswered(ctx context.Context, st *issueState, tg target, final questions.Response, answerID int64) {
	w := tg.w
	a := p.c.askedInfo(w.s.key(w.set.ID))
	if a == nil {
		var err error
		if a, err = w.s.find(ctx, w.set); err != nil || a == nil {
			p.c.log.Warn("github: show the answer: question comment not found", "set", w.set.ID, "err", err)
			return
		}
	}
	if err := w.s.markAnswered(ctx, w.set, a, final, answerID); err != nil {
		p.c.log.Warn("github: show the answer", "set", w.set.ID, "err", err)
		return
	}
	if tg.t.closedBy == 0 {
		tg.t.closedBy = answerID
		if answerID == 0 {
			tg.t.closedBy = -1
		}
	}
}

// mayAnswer reports whether login may answer on s: deny by default; write,
// maintain or admin permission, or the allowlist.
func (p *poller) mayAnswer(ctx context.Context, s *Surface, login string) (bool, error) {
	return p.c.allowed(ctx, p.owner, p.name, login, s.allow, s.cfg.AllowOnly) // triggers.go
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
	if len(c.perms) >= maxCached {
		now := c.now()
		for k, e := range c.perms {
			if !now.Before(e.expires) {
				delete(c.perms, k)
			}
		}
		evict(c.perms, key)
	}
	c.perms[key] = permEntry{level: level, expires: c.now().Add(c.permTTL)}
	c.mu.Unlock()
	return level, nil
}

// isBot reports whether u is a bot account.
func isBot(u *gh.User) bool {
	return u.GetType() == "Bot" || strings.HasSuffix(u.GetLogin(), "[bot]")
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
			rest, _ = cutAllFlag(rest) // group.go
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

// questionIDs returns the IDs of the questions of set.
func questionIDs(set questions.Set) []string {
	ids := make([]string, 0, len(set.Questions))
	for _, q := range set.Questions {
		ids = append(ids, q.ID)
	}
	return ids
}

// keyedLinesIDs returns the lines of text that name one of ids ("QID:
// answer").
func keyedLinesIDs(ids []string, text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		key, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		key = strings.Trim(strings.TrimSpace(key), "`*")
		for _, id := range ids {
			if id != "" && strings.EqualFold(id, key) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}
