package github

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// reply posts a notice on the issue, once per key: the notices posted are
// known from their markers, also after a restart.
func (p *poller) reply(ctx context.Context, issue int, st *issueState, key, text string) {
	if st.notified[key] {
		return
	}
	// Without the issue's comments read, Refs tell the notices posted.
	rkey := noticeRefKey(p.owner+"/"+p.name, issue, key)
	if p.c.refs != nil {
		if _, ok, err := p.c.refs.Ref(ctx, rkey); err != nil {
			p.c.log.Warn("github: look up a notice", "repo", p.owner+"/"+p.name, "issue", issue, "err", err)
			return
		} else if ok {
			st.notified[key] = true
			return
		}
	}
	marker := noticeMarker(key)
	if _, err := p.c.createComment(ctx, p.owner, p.name, issue, text+"\n\n"+marker, marker); err != nil {
		p.c.log.Warn("github: reply", "repo", p.owner+"/"+p.name, "issue", issue, "err", err)
		return
	}
	st.notified[key] = true
	if p.c.refs != nil {
		if err := p.c.refs.SetRef(ctx, rkey, "posted"); err != nil {
			p.c.log.Warn("github: record a notice", "repo", p.owner+"/"+p.name, "issue", issue, "err", err)
		}
	}
}

// notifyDenied tells someone not allowed to answer so, at most once per
// person and set.
func (p *poller) notifyDenied(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, set questions.Set) {
	login := c.GetUser().GetLogin()
	key := "denied/" + strings.ToLower(login) + "/" + set.ID
	p.reply(ctx, issue, st, key, fmt.Sprintf("Thanks @%s, but only people with write access to this repository (or on the orchestrator's allowlist) can answer %s, so your reply was not taken.",
		login, questionRefs(set)))
}

// notifyWhich asks which set an answer is for when several wait.
func (p *poller) notifyWhich(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, waiting []*threadSet, mine map[string]*waiter) {
	var open []string
	example := ""
	for _, t := range waiting {
		var ref string
		if w := mine[t.id]; w != nil {
			ref = questionRefs(w.set)
			if example == "" {
				example = w.set.Questions[0].ID
			}
		} else {
			var ids []string
			for _, id := range t.qids {
				ids = append(ids, "`"+strings.ReplaceAll(cleanLine(id), "`", "'")+"`")
			}
			ref = strings.Join(ids, ", ")
		}
		open = append(open, ref)
	}
	p.reply(ctx, issue, st, fmt.Sprintf("which/%d", c.GetID()), fmt.Sprintf(
		"@%s several questions are waiting on this issue (%s): say which one you answer, one line per question, such as `/answer %s 1`. Nothing was taken.",
		c.GetUser().GetLogin(), strings.Join(open, "; "), example))
}

// notifyEdited says that an edited comment is not read as an answer.
func (p *poller) notifyEdited(ctx context.Context, issue int, st *issueState, c *gh.IssueComment) {
	p.reply(ctx, issue, st, fmt.Sprintf("edited/%d", c.GetID()), fmt.Sprintf(
		"@%s this comment was edited before it was read, and an edited comment is never taken as an answer (what was answered must not change afterwards). Nothing was taken: post your answer in a new comment.",
		c.GetUser().GetLogin()))
}

// notifyLate says that the set was closed before the answer came.
func (p *poller) notifyLate(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, set questions.Set, final *questions.Response) {
	msg := fmt.Sprintf("@%s %s is closed (it timed out, or its run ended), so your reply was not taken.", c.GetUser().GetLogin(), questionRefs(set))
	if final != nil {
		by := cleanLine(final.By)
		if final.Surface != "" && final.Surface != surfaceName {
			by += " on " + cleanLine(final.Surface)
		}
		msg = fmt.Sprintf("@%s %s was already answered elsewhere by %s, so your reply was not taken.", c.GetUser().GetLogin(), questionRefs(set), by)
	}
	p.reply(ctx, issue, st, fmt.Sprintf("late/%d/%s", c.GetID(), set.ID), msg)
}

// notifyInvalid says why an answer could not be read and what is valid.
func (p *poller) notifyInvalid(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, set questions.Set, err error) {
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
	p.reply(ctx, issue, st, fmt.Sprintf("invalid/%d/%s", c.GetID(), set.ID), b.String())
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

// remember keeps an answer taken from comment c as a rule, as its
// "--remember spec:7d" asked (surfaces.Rememberer), and tells its author
// what became of it.
func (p *poller) remember(ctx context.Context, issue int, st *issueState, c *gh.IssueComment, tg target, resp questions.Response, final *questions.Response, value, pattern string) {
	login := c.GetUser().GetLogin()
	key := fmt.Sprintf("remember/%s/%d", tg.w.set.ID, c.GetID())
	rm, ok := tg.w.answers.(surfaces.Rememberer)
	var text string
	switch {
	case final == nil:
		text = fmt.Sprintf("@%s your answer was taken, but not remembered: a rule keeps the answer to every question of %s; answer them in one comment with `--remember` after the last.", login, questionRefs(tg.w.set))
	case !ok:
		text = fmt.Sprintf("@%s your answer was taken, but this orchestrator does not keep rules here.", login)
	default:
		r, err := rm.Remember(ctx, surfaces.RememberRequest{SetID: tg.w.set.ID, By: resp.By, Surface: resp.Surface, Remember: value, Pattern: pattern})
		if err != nil {
			text = fmt.Sprintf("@%s your answer was taken, but not remembered: %s", login, cleanLine(err.Error()))
		} else {
			text = fmt.Sprintf("@%s %s.", login, cleanLine(r.Text))
		}
	}
	p.reply(ctx, issue, st, key, text)
}
