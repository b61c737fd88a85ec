package githubtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PullRequest is a pull request as the server holds it. Pull requests are
// numbered from 1001 in each repository, apart from its issues.
type PullRequest struct {
	Number    int
	Repo      string
	Title     string
	Body      string
	Head      string // the branch
	Base      string
	Draft     bool
	State     string // "open"
	Login     string
	Reviewers []string
	Labels    []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Pulls returns the pull requests of repo, in creation order.
func (s *Server) Pulls(repo string) []PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PullRequest
	for _, p := range s.pulls[strings.ToLower(repo)] {
		c := *p
		c.Reviewers, c.Labels = slices.Clone(p.Reviewers), slices.Clone(p.Labels)
		out = append(out, c)
	}
	return out
}

func (s *Server) pullLocked(r *repo, number int) *PullRequest {
	for _, p := range s.pulls[strings.ToLower(r.fullName)] {
		if p.Number == number {
			return p
		}
	}
	return nil
}

func (s *Server) pullJSON(r *repo, p *PullRequest) map[string]any {
	num := strconv.Itoa(p.Number)
	owner, _, _ := strings.Cut(r.fullName, "/")
	labels := []map[string]any{}
	for i, l := range p.Labels {
		labels = append(labels, map[string]any{"id": i + 1, "name": l})
	}
	reviewers := []map[string]any{}
	for _, rv := range p.Reviewers {
		reviewers = append(reviewers, s.userJSON(rv))
	}
	return map[string]any{
		"id":                  int64(p.Number) + r.id*1000,
		"node_id":             "PR_" + num,
		"number":              p.Number,
		"url":                 s.srv.URL + "/repos/" + r.fullName + "/pulls/" + num,
		"html_url":            "https://github.com/" + r.fullName + "/pull/" + num,
		"state":               p.State,
		"title":               p.Title,
		"body":                p.Body,
		"draft":               p.Draft,
		"user":                s.userJSON(p.Login),
		"labels":              labels,
		"requested_reviewers": reviewers,
		"head":                map[string]any{"ref": p.Head, "label": owner + ":" + p.Head, "repo": s.repoJSON(r)},
		"base":                map[string]any{"ref": p.Base, "label": owner + ":" + p.Base, "repo": s.repoJSON(r)},
		"created_at":          ts(p.CreatedAt),
		"updated_at":          ts(p.UpdatedAt),
	}
}

// routePulls serves the pull request endpoints: /pulls (list with state and
// head, create), /pulls/{n} (get, edit), /pulls/{n}/requested_reviewers and
// /issues/{n}/labels of a pull request. ok is false for other paths.
func (s *Server) routePulls(r *http.Request, rp *repo, rest []string) (out any, err error, ok bool) {
	unprocessable := &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
	key := strings.ToLower(rp.fullName)
	if rest[0] == "issues" {
		if len(rest) != 3 || rest[2] != "labels" || r.Method != http.MethodPost {
			return nil, nil, false
		}
		n, _ := strconv.Atoi(rest[1])
		p := s.pullLocked(rp, n)
		if p == nil {
			return nil, nil, false
		}
		var in []string
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return nil, unprocessable, true
		}
		var labels []map[string]any
		for _, l := range in {
			if !slices.Contains(p.Labels, l) {
				p.Labels = append(p.Labels, l)
			}
		}
		for i, l := range p.Labels {
			labels = append(labels, map[string]any{"id": i + 1, "name": l})
		}
		return labels, nil, true
	}
	if rest[0] != "pulls" {
		return nil, nil, false
	}
	notFound := &apiError{http.StatusNotFound, "Not Found"}
	if len(rest) == 1 {
		switch r.Method {
		case http.MethodGet:
			q := r.URL.Query()
			state := q.Get("state")
			if state == "" {
				state = "open"
			}
			items := []map[string]any{}
			owner, _, _ := strings.Cut(rp.fullName, "/")
			for _, p := range s.pulls[key] {
				if (state != "all" && p.State != state) || (q.Get("head") != "" && !strings.EqualFold(q.Get("head"), owner+":"+p.Head)) {
					continue
				}
				items = append(items, s.pullJSON(rp, p))
			}
			return items, nil, true
		case http.MethodPost:
			var in struct {
				Title string `json:"title"`
				Body  string `json:"body"`
				Head  string `json:"head"`
				Base  string `json:"base"`
				Draft bool   `json:"draft"`
			}
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" || in.Head == "" || in.Base == "" {
				return nil, unprocessable, true
			}
			for _, p := range s.pulls[key] {
				if p.State == "open" && p.Head == in.Head {
					return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed: A pull request already exists for " + in.Head + "."}, true
				}
			}
			if err := checkBody(in.Body); err != nil {
				return nil, err, true
			}
			now := s.tickLocked(time.Time{})
			p := &PullRequest{Number: 1001 + len(s.pulls[key]), Repo: rp.fullName, Title: in.Title, Body: in.Body, Head: in.Head,
				Base: in.Base, Draft: in.Draft, State: "open", Login: s.as, CreatedAt: now, UpdatedAt: now}
			s.pulls[key] = append(s.pulls[key], p)
			return s.pullJSON(rp, p), nil, true
		}
		return nil, notFound, true
	}
	n, err := strconv.Atoi(rest[1])
	p := s.pullLocked(rp, n)
	if err != nil || p == nil {
		return nil, notFound, true
	}
	switch {
	case len(rest) == 2 && r.Method == http.MethodGet:
		return s.pullJSON(rp, p), nil, true
	case len(rest) == 2 && r.Method == http.MethodPatch:
		var in struct {
			Title *string `json:"title"`
			Body  *string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return nil, unprocessable, true
		}
		if in.Title != nil {
			p.Title = *in.Title
		}
		if in.Body != nil {
			if err := checkBody(*in.Body); err != nil {
				return nil, err, true
			}
			p.Body = *in.Body
		}
		p.UpdatedAt = s.tickLocked(p.UpdatedAt)
		return s.pullJSON(rp, p), nil, true
	case len(rest) == 3 && rest[2] == "requested_reviewers" && r.Method == http.MethodPost:
		var in struct {
			Reviewers []string `json:"reviewers"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return nil, unprocessable, true
		}
		for _, rv := range in.Reviewers {
			if !slices.Contains(p.Reviewers, rv) {
				p.Reviewers = append(p.Reviewers, rv)
			}
		}
		return s.pullJSON(rp, p), nil, true
	}
	return nil, notFound, true
}
