package githubtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pull requests' conversations, as GitHub's REST API serves them
// (docs.github.com/rest/pulls/comments, /rest/pulls/reviews,
// /rest/issues/comments, /rest/reactions): comments on a pull request's
// conversation are issue comments whose issue is the pull request (they
// are listed with the repository's issue comments, and the issue payload
// of their webhook has a pull_request key); review comments are on its
// diff, listed per pull request or for the whole repository (since, sort,
// direction), with their own reactions endpoint; reviews are listed per
// pull request, in the REST API with their state in capitals
// (CHANGES_REQUESTED), in webhooks in lower case (changes_requested).

// ReviewComment is a comment on a pull request's diff.
type ReviewComment struct {
	ID        int64
	Repo      string
	PR        int
	Login     string
	Body      string
	Path      string
	Line      int
	CreatedAt time.Time
	UpdatedAt time.Time
	Reactions []Reaction
}

// Review is a pull request review.
type Review struct {
	ID          int64
	Repo        string
	PR          int
	Login       string
	Body        string
	State       string // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	SubmittedAt time.Time
}

// reviewState holds the review comments and reviews (s.mu held).
type reviewState struct {
	comments map[string][]*ReviewComment // by lower-case repository name
	reviews  map[string][]*Review
}

func (rs *reviewState) init() {
	if rs.comments == nil {
		rs.comments = map[string][]*ReviewComment{}
		rs.reviews = map[string][]*Review{}
	}
}

// prRepoLocked returns repo when it has pull request pr; else it fails
// the test in the name of the helper fn and returns nil.
func (s *Server) prRepoLocked(fn, repo string, pr int) *repo {
	r := s.repoLocked(repo)
	if s.pullLocked(r, pr) == nil {
		s.t.Errorf("githubtest: %s: no pull request %d in %s", fn, pr, repo)
		return nil
	}
	return r
}

// AddPRComment posts a comment on pull request pr's conversation (an issue
// comment whose issue is the pull request) as login, and returns its ID.
// The pull request must exist.
func (s *Server) AddPRComment(repo string, pr int, login, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	r := s.prRepoLocked("AddPRComment", repo, pr)
	if r == nil {
		return 0
	}
	return s.addCommentLocked(r, pr, login, body).ID
}

// AddReviewComment posts a review comment on pull request pr's diff (on
// line 1 of path) as login, and returns its ID.
func (s *Server) AddReviewComment(repo string, pr int, login, path, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	r := s.prRepoLocked("AddReviewComment", repo, pr)
	if r == nil {
		return 0
	}
	s.rv.init()
	key := strings.ToLower(r.fullName)
	var last time.Time
	if n := len(s.rv.comments[key]); n > 0 {
		last = s.rv.comments[key][n-1].CreatedAt
	}
	now := s.tickLocked(last)
	c := &ReviewComment{ID: s.newIDLocked(), Repo: r.fullName, PR: pr, Login: login, Body: body, Path: path, Line: 1, CreatedAt: now, UpdatedAt: now}
	s.rv.comments[key] = append(s.rv.comments[key], c)
	s.userLocked(login)
	return c.ID
}

// EditReviewComment changes a review comment's body, as its author would.
func (s *Server) EditReviewComment(repo string, id int64, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	c := s.reviewCommentLocked(s.repoLocked(repo), id)
	if c == nil {
		s.t.Errorf("githubtest: EditReviewComment: no review comment %d in %s", id, repo)
		return
	}
	c.Body = body
	c.UpdatedAt = s.tickLocked(c.UpdatedAt.Add(time.Second))
}

// SubmitReview submits a review of pull request pr as login, with state
// APPROVED, CHANGES_REQUESTED or COMMENTED, and returns its ID.
func (s *Server) SubmitReview(repo string, pr int, login, state, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	r := s.prRepoLocked("SubmitReview", repo, pr)
	if r == nil {
		return 0
	}
	switch state {
	case "APPROVED", "CHANGES_REQUESTED", "COMMENTED":
	default:
		s.t.Errorf("githubtest: SubmitReview: state %q", state)
		return 0
	}
	s.rv.init()
	key := strings.ToLower(r.fullName)
	rv := &Review{ID: s.newIDLocked(), Repo: r.fullName, PR: pr, Login: login, Body: body, State: state, SubmittedAt: s.tickLocked(time.Time{})}
	s.rv.reviews[key] = append(s.rv.reviews[key], rv)
	s.userLocked(login)
	return rv.ID
}

// ReviewCommentReactions returns the reactions on a review comment.
func (s *Server) ReviewCommentReactions(repo string, id int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.reviewCommentLocked(s.repoLocked(repo), id)
	if c == nil {
		return nil
	}
	return contents(c.Reactions)
}

// PRComments returns the comments of pull request pr's conversation that
// were not deleted, oldest first.
func (s *Server) PRComments(repo string, pr int) []Comment { return s.Comments(repo, pr) }

func (s *Server) reviewCommentLocked(r *repo, id int64) *ReviewComment {
	for _, c := range s.rv.comments[strings.ToLower(r.fullName)] {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func (s *Server) reviewCommentJSON(r *repo, c *ReviewComment) map[string]any {
	id := strconv.FormatInt(c.ID, 10)
	num := strconv.Itoa(c.PR)
	counts := reactionCounts(s.srv.URL+"/repos/"+r.fullName+"/pulls/comments/"+id+"/reactions", c.Reactions)
	return map[string]any{
		"id":                     c.ID,
		"node_id":                "PRRC_" + id,
		"url":                    s.srv.URL + "/repos/" + r.fullName + "/pulls/comments/" + id,
		"pull_request_review_id": c.ID + 1,
		"diff_hunk":              "@@ -1 +1 @@",
		"path":                   c.Path,
		"commit_id":              strings.Repeat("0", 40),
		"original_commit_id":     strings.Repeat("0", 40),
		"user":                   s.userJSON(c.Login),
		"body":                   c.Body,
		"created_at":             ts(c.CreatedAt),
		"updated_at":             ts(c.UpdatedAt),
		"html_url":               "https://github.com/" + r.fullName + "/pull/" + num + "#discussion_r" + id,
		"pull_request_url":       s.srv.URL + "/repos/" + r.fullName + "/pulls/" + num,
		"author_association":     s.association(c.Login),
		"line":                   c.Line,
		"side":                   "RIGHT",
		"subject_type":           "line",
		"reactions":              counts,
	}
}

// reviewJSON is a review as the REST API (webhook false: state in
// capitals) or a webhook (lower case) shows it.
func (s *Server) reviewJSON(r *repo, rv *Review, webhook bool) map[string]any {
	id := strconv.FormatInt(rv.ID, 10)
	num := strconv.Itoa(rv.PR)
	state := rv.State
	if webhook {
		state = strings.ToLower(state)
	}
	return map[string]any{
		"id":                 rv.ID,
		"node_id":            "PRR_" + id,
		"user":               s.userJSON(rv.Login),
		"body":               rv.Body,
		"state":              state,
		"html_url":           "https://github.com/" + r.fullName + "/pull/" + num + "#pullrequestreview-" + id,
		"pull_request_url":   s.srv.URL + "/repos/" + r.fullName + "/pulls/" + num,
		"submitted_at":       ts(rv.SubmittedAt),
		"commit_id":          strings.Repeat("0", 40),
		"author_association": s.association(rv.Login),
	}
}

func (s *Server) association(login string) string {
	switch s.perms[strings.ToLower(login)] {
	case "admin", "maintain", "write", "triage":
		return "COLLABORATOR"
	}
	return "NONE"
}

// prIssueJSON is pull request p as the issues API shows it: an issue with
// a pull_request key.
func (s *Server) prIssueJSON(r *repo, p *PullRequest) map[string]any {
	num := strconv.Itoa(p.Number)
	return map[string]any{
		"id":             int64(p.Number) + r.id*1000,
		"node_id":        "PR_" + num,
		"url":            s.srv.URL + "/repos/" + r.fullName + "/issues/" + num,
		"repository_url": s.srv.URL + "/repos/" + r.fullName,
		"html_url":       "https://github.com/" + r.fullName + "/pull/" + num,
		"number":         p.Number,
		"state":          p.State,
		"title":          p.Title,
		"body":           p.Body,
		"user":           s.userJSON(p.Login),
		"labels":         []any{},
		"created_at":     ts(p.CreatedAt),
		"updated_at":     ts(p.UpdatedAt),
		"pull_request": map[string]any{
			"url":      s.srv.URL + "/repos/" + r.fullName + "/pulls/" + num,
			"html_url": "https://github.com/" + r.fullName + "/pull/" + num,
		},
		"author_association": "OWNER",
	}
}

// routeReviews serves /pulls/comments (the repository's review comments),
// /pulls/comments/{id}[/reactions], /pulls/{n}/comments, /pulls/{n}/reviews
// and /issues/{n}[/comments] of a pull request. ok is false for other
// paths.
func (s *Server) routeReviews(h http.Header, r *http.Request, rp *repo, rest []string) (out any, err error, ok bool) {
	notFound := &apiError{http.StatusNotFound, "Not Found"}
	unprocessable := &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
	key := strings.ToLower(rp.fullName)
	s.rv.init()
	if rest[0] == "issues" && len(rest) >= 2 {
		n, err := strconv.Atoi(rest[1])
		p := s.pullLocked(rp, n)
		if err != nil || p == nil {
			return nil, nil, false
		}
		switch {
		case len(rest) == 2 && r.Method == http.MethodGet:
			return s.prIssueJSON(rp, p), nil, true
		case len(rest) == 3 && rest[2] == "comments" && r.Method == http.MethodGet:
			out, err := s.listComments(h, r, rp, n)
			return out, err, true
		case len(rest) == 3 && rest[2] == "comments" && r.Method == http.MethodPost:
			var in struct {
				Body string `json:"body"`
			}
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
				return nil, unprocessable, true
			}
			if err := checkBody(in.Body); err != nil {
				return nil, err, true
			}
			return s.commentJSON(rp, s.addCommentLocked(rp, n, s.as, in.Body)), nil, true
		}
		return nil, nil, false // labels: pulls.go
	}
	if rest[0] != "pulls" || len(rest) < 2 {
		return nil, nil, false
	}
	if rest[1] == "comments" {
		if len(rest) == 2 {
			if r.Method != http.MethodGet {
				return nil, notFound, true
			}
			out, err := s.listReviewComments(h, r, rp, 0)
			return out, err, true
		}
		id, err := strconv.ParseInt(rest[2], 10, 64)
		c := s.reviewCommentLocked(rp, id)
		if err != nil || c == nil {
			return nil, notFound, true
		}
		switch {
		case len(rest) == 3 && r.Method == http.MethodGet:
			return s.reviewCommentJSON(rp, c), nil, true
		case len(rest) == 4 && rest[3] == "reactions" && r.Method == http.MethodPost:
			out, err := s.addReactionLocked(r, &c.Reactions)
			return out, err, true
		}
		return nil, notFound, true
	}
	if len(rest) != 3 || (rest[2] != "comments" && rest[2] != "reviews") {
		return nil, nil, false
	}
	n, err := strconv.Atoi(rest[1])
	if err != nil || s.pullLocked(rp, n) == nil {
		return nil, notFound, true
	}
	if r.Method != http.MethodGet {
		return nil, notFound, true
	}
	if rest[2] == "comments" {
		out, err := s.listReviewComments(h, r, rp, n)
		return out, err, true
	}
	items := []map[string]any{}
	for _, rv := range s.rv.reviews[key] {
		if rv.PR == n {
			items = append(items, s.reviewJSON(rp, rv, false))
		}
	}
	out, err = s.page(h, r, items)
	return out, err, true
}

// listReviewComments lists the review comments of pull request pr, or of
// the repository when pr is 0 (honouring since, sort and direction; a
// pull request's are in ascending order of ID).
func (s *Server) listReviewComments(h http.Header, r *http.Request, rp *repo, pr int) (any, error) {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed: since"}
		}
		since = t
	}
	switch q.Get("sort") {
	case "", "created", "updated":
	default:
		return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed: sort"}
	}
	cs := slices.Clone(s.rv.comments[strings.ToLower(rp.fullName)])
	if q.Get("sort") == "updated" {
		slices.SortStableFunc(cs, func(a, b *ReviewComment) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	}
	if pr == 0 && q.Get("direction") == "desc" {
		slices.Reverse(cs)
	}
	items := []map[string]any{}
	for _, c := range cs {
		if (pr != 0 && c.PR != pr) || c.UpdatedAt.Before(since) {
			continue
		}
		items = append(items, s.reviewCommentJSON(rp, c))
	}
	return s.page(h, r, items)
}

// PRCommentEvent is the payload of the issue_comment webhook event GitHub
// sends for a comment on a pull request's conversation (its issue has a
// pull_request key), with action "created", "edited" or "deleted".
func (s *Server) PRCommentEvent(repo string, commentID int64, action string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(repo)
	c := s.commentLocked(r, commentID)
	if c == nil || s.pullLocked(r, c.Issue) == nil {
		s.t.Errorf("githubtest: PRCommentEvent: no pull request comment %d in %s", commentID, repo)
		return nil
	}
	return s.event(map[string]any{"action": action, "issue": s.prIssueJSON(r, s.pullLocked(r, c.Issue)),
		"comment": s.commentJSON(r, c), "repository": s.repoJSON(r), "sender": s.userJSON(c.Login)})
}

// ReviewCommentEvent is the payload of the pull_request_review_comment
// webhook event ("created", "edited", "deleted").
func (s *Server) ReviewCommentEvent(repo string, id int64, action string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(repo)
	c := s.reviewCommentLocked(r, id)
	if c == nil {
		s.t.Errorf("githubtest: ReviewCommentEvent: no review comment %d in %s", id, repo)
		return nil
	}
	return s.event(map[string]any{"action": action, "comment": s.reviewCommentJSON(r, c),
		"pull_request": s.pullJSON(r, s.pullLocked(r, c.PR)), "repository": s.repoJSON(r), "sender": s.userJSON(c.Login)})
}

// ReviewEvent is the payload of the pull_request_review webhook event
// ("submitted", "edited", "dismissed"); the review's state is in lower
// case, as GitHub's webhooks send it.
func (s *Server) ReviewEvent(repo string, id int64, action string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(repo)
	var rv *Review
	for _, x := range s.rv.reviews[strings.ToLower(r.fullName)] {
		if x.ID == id {
			rv = x
		}
	}
	if rv == nil {
		s.t.Errorf("githubtest: ReviewEvent: no review %d in %s", id, repo)
		return nil
	}
	return s.event(map[string]any{"action": action, "review": s.reviewJSON(r, rv, true),
		"pull_request": s.pullJSON(r, s.pullLocked(r, rv.PR)), "repository": s.repoJSON(r), "sender": s.userJSON(rv.Login)})
}

func (s *Server) event(ev map[string]any) []byte {
	b, err := json.Marshal(ev)
	if err != nil {
		s.t.Errorf("githubtest: %v", err)
	}
	return b
}

// OpenPullRequest opens a pull request of head onto main in repo as login
// and returns its number.
func (s *Server) OpenPullRequest(repo, login, head, title string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	r := s.repoLocked(repo)
	key := strings.ToLower(r.fullName)
	now := s.tickLocked(time.Time{})
	p := &PullRequest{Number: 1001 + len(s.pulls[key]), Repo: r.fullName, Title: title, Head: head, Base: "main", State: "open",
		Login: login, CreatedAt: now, UpdatedAt: now}
	s.pulls[key] = append(s.pulls[key], p)
	s.userLocked(login)
	return p.Number
}
