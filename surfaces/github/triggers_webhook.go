package github

import (
	"encoding/json"
	"net/http"

	gh "github.com/google/go-github/v60/github"
)

// triggerComment hands a new comment delivered by the issue_comment
// webhook ("created") to the intake of its repository, if any, in the
// background.
func (c *Client) triggerComment(ev gh.IssueCommentEvent) {
	repo := ev.GetRepo().GetFullName()
	t := c.triggersFor(repo)
	if t == nil || c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := t.comment(c.ctx, t.of(repo).name, ev.Issue, ev.Comment); err != nil && c.ctx.Err() == nil {
			c.log.Warn("github: a comment delivered by webhook starts nothing now; the poll reads it again",
				"repo", repo, "comment", ev.GetComment().GetID(), "err", err)
		}
	}()
}

// triggerIssuesEvent answers an issues webhook delivery: a label put on an
// issue ("labeled") is handed to the intake of its repository. A delivery
// seen already (X-GitHub-Delivery) is not handled again; the intake
// recognises the same event delivered otherwise by its key.
func (c *Client) triggerIssuesEvent(w http.ResponseWriter, delivery string, payload []byte) {
	var ev gh.IssuesEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		http.Error(w, "invalid issues payload", http.StatusBadRequest)
		return
	}
	if ev.GetAction() != "labeled" || ev.Issue == nil || ev.Label == nil || ev.Repo == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	repo := ev.GetRepo().GetFullName()
	t := c.triggersFor(repo)
	if t == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if delivery != "" {
		c.mu.Lock()
		fresh := c.deliveries.add(delivery)
		c.mu.Unlock()
		if !fresh {
			w.WriteHeader(http.StatusOK) // a redelivery: already handled
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t.labeled(c.ctx, t.of(repo).name, ev.Issue, ev.Label.GetName(), ev.Sender)
	}()
}
