package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v60/github"
)

// identity is the account the orchestrator posts as: the owner of its
// token, or its GitHub App's bot. A comment is the orchestrator's own only
// when this account wrote it; markers in anyone else's comment are
// ordinary text.
type identity struct {
	login string
	id    int64 // 0 if unknown: then the login decides
}

// wrote reports whether u is the account.
func (me identity) wrote(u *gh.User) bool {
	if u == nil {
		return false
	}
	if me.id != 0 && u.GetID() != 0 {
		return u.GetID() == me.id
	}
	return me.login != "" && strings.EqualFold(u.GetLogin(), me.login)
}

// owns reports whether c is a comment the orchestrator posted: written by
// its account and carrying one of its markers (under a personal access
// token the account may also be a person who answers by hand).
func (me identity) owns(c *gh.IssueComment) bool {
	return me.wrote(c.GetUser()) && isOwn(c.GetBody())
}

// ownOnly returns the comments of comments that the orchestrator posted.
func (me identity) ownOnly(comments []*gh.IssueComment) []*gh.IssueComment {
	var out []*gh.IssueComment
	for _, c := range comments {
		if me.owns(c) {
			out = append(out, c)
		}
	}
	return out
}

// self returns the client's identity, learned from GitHub at the first need
// and kept for the client's life (a process learns it again from the same
// credentials after a restart): GET /user for a token, GET /app (with the
// app's JWT) for an App, whose bot is "<slug>[bot]", and its user ID from
// GET /users/{login}. A failed lookup is tried again at the next need.
func (c *Client) self(ctx context.Context) (identity, error) {
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if c.me.login != "" {
		return c.me, nil
	}
	var me identity
	if c.appJWT == nil {
		u, _, err := c.api.Users.Get(ctx, "")
		var er *gh.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden {
			return identity{}, fmt.Errorf("github: who the token belongs to (GET /user): %w (an installation token, such as GitHub Actions' GITHUB_TOKEN, is no user: use a personal access token, or the app: block)", err)
		}
		if err != nil {
			return identity{}, fmt.Errorf("github: who the token belongs to (GET /user): %w", err)
		}
		me = identity{login: u.GetLogin(), id: u.GetID()}
	} else {
		app, _, err := c.appJWT.Apps.Get(ctx, "")
		if err != nil {
			return identity{}, fmt.Errorf("github: which app this is (GET /app): %w", err)
		}
		if app.GetSlug() == "" {
			return identity{}, errors.New("github: GET /app returned no slug")
		}
		me.login = app.GetSlug() + "[bot]"
		// The bot's user ID, where the API shows it.
		req, err := c.api.NewRequest(http.MethodGet, "users/"+url.PathEscape(me.login), nil)
		if err != nil {
			return identity{}, err
		}
		var u gh.User
		if _, err := c.api.Do(ctx, req, &u); err != nil {
			var er *gh.ErrorResponse
			if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != http.StatusNotFound {
				return identity{}, fmt.Errorf("github: the app's bot user (GET /users/%s): %w", me.login, err)
			}
		} else if strings.EqualFold(u.GetLogin(), me.login) {
			me.id = u.GetID()
		}
	}
	if me.login == "" {
		return identity{}, errors.New("github: GitHub returned no login for the orchestrator's credentials")
	}
	c.log.Info("github: posting as", "login", me.login, "id", me.id)
	c.me = me
	return me, nil
}
