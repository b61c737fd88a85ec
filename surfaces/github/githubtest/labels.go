package githubtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// issueEvent is an event of an issue's timeline as the issue events API
// lists it: a label put on ("labeled") or taken off ("unlabeled").
type issueEvent struct {
	id        int64
	issue     int
	event     string
	label     string
	actor     string
	createdAt time.Time
}

// AddLabel puts label on issue as login, as GitHub does when someone
// labels it: the issue's labels and updated_at change and a "labeled"
// event is recorded (GET /repos/{o}/{r}/issues/{n}/events). It returns the
// event's ID. A label the issue has already records nothing (0).
func (s *Server) AddLabel(repo string, issue int, login, label string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	r := s.repoLocked(repo)
	is := s.issueLocked(r, issue)
	if is == nil {
		s.t.Errorf("githubtest: AddLabel: no issue %d in %s", issue, repo)
		return 0
	}
	if slices.ContainsFunc(is.Labels, func(l string) bool { return strings.EqualFold(l, label) }) {
		return 0
	}
	is.Labels = append(is.Labels, label)
	return s.labelEventLocked(r, is, "labeled", label, login)
}

// RemoveLabel takes label off issue as login ("unlabeled").
func (s *Server) RemoveLabel(repo string, issue int, login, label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	r := s.repoLocked(repo)
	is := s.issueLocked(r, issue)
	if is == nil {
		s.t.Errorf("githubtest: RemoveLabel: no issue %d in %s", issue, repo)
		return
	}
	i := slices.IndexFunc(is.Labels, func(l string) bool { return strings.EqualFold(l, label) })
	if i < 0 {
		return
	}
	is.Labels = slices.Delete(is.Labels, i, i+1)
	s.labelEventLocked(r, is, "unlabeled", label, login)
}

func (s *Server) labelEventLocked(r *repo, is *Issue, event, label, login string) int64 {
	now := s.tickLocked(is.UpdatedAt)
	is.UpdatedAt = now
	if s.events == nil {
		s.events = make(map[string][]*issueEvent)
	}
	key := strings.ToLower(r.fullName)
	ev := &issueEvent{id: s.newIDLocked(), issue: is.Number, event: event, label: label, actor: login, createdAt: now}
	s.events[key] = append(s.events[key], ev)
	s.userLocked(login)
	return ev.id
}

// IssuesEvent returns the payload of the issues webhook event GitHub sends
// when label is put on ("labeled") or taken off ("unlabeled") an issue by
// login.
func (s *Server) IssuesEvent(repo string, issue int, action, label, login string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(repo)
	is := s.issueLocked(r, issue)
	if is == nil {
		s.t.Errorf("githubtest: IssuesEvent: no issue %d in %s", issue, repo)
		return nil
	}
	ev := map[string]any{
		"action":     action,
		"issue":      s.issueJSON(r, is),
		"label":      s.labelJSON(r, label),
		"repository": s.repoJSON(r),
		"sender":     s.userJSON(login),
	}
	b, err := json.Marshal(ev)
	if err != nil {
		s.t.Errorf("githubtest: %v", err)
	}
	return b
}

// labelJSON is a label as the REST API shows it.
func (s *Server) labelJSON(r *repo, name string) map[string]any {
	var id int64
	for _, c := range strings.ToLower(name) {
		id = id*31 + int64(c)
	}
	if id < 0 {
		id = -id
	}
	return map[string]any{
		"id":          id,
		"node_id":     "LA_" + strconv.FormatInt(id, 10),
		"url":         s.srv.URL + "/repos/" + r.fullName + "/labels/" + name,
		"name":        name,
		"color":       "ededed",
		"default":     false,
		"description": nil,
	}
}

// routeIssueEvents serves GET /repos/{o}/{r}/issues/{n}/events, oldest
// first, paginated.
func (s *Server) routeIssueEvents(h http.Header, r *http.Request, rp *repo, rest []string) (any, error, bool) {
	if len(rest) != 3 || rest[0] != "issues" || rest[2] != "events" {
		return nil, nil, false
	}
	if r.Method != http.MethodGet {
		return nil, &apiError{http.StatusNotFound, "Not Found"}, true
	}
	n, err := strconv.Atoi(rest[1])
	if err != nil || s.issueLocked(rp, n) == nil {
		return nil, &apiError{http.StatusNotFound, "Not Found"}, true
	}
	items := []map[string]any{}
	for _, ev := range s.events[strings.ToLower(rp.fullName)] {
		if ev.issue != n {
			continue
		}
		id := strconv.FormatInt(ev.id, 10)
		items = append(items, map[string]any{
			"id":                       ev.id,
			"node_id":                  "LE_" + id,
			"url":                      s.srv.URL + "/repos/" + rp.fullName + "/issues/events/" + id,
			"actor":                    s.userJSON(ev.actor),
			"event":                    ev.event,
			"commit_id":                nil,
			"commit_url":               nil,
			"created_at":               ts(ev.createdAt),
			"label":                    map[string]any{"name": ev.label, "color": "ededed"},
			"performed_via_github_app": nil,
		})
	}
	out, err := s.page(h, r, items)
	return out, err, true
}

// listIssues serves GET /repos/{o}/{r}/issues as GitHub's REST API does:
// state (open, closed, all; default open), labels (all of them), since
// (updated at or after), sort (created, updated, comments; default
// created) and direction (asc, desc; default desc), paginated.
func (s *Server) listIssues(h http.Header, r *http.Request, rp *repo) (any, error) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed: state"}
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed: since"}
		}
		since = t
	}
	sort := q.Get("sort")
	switch sort {
	case "", "created", "updated", "comments":
	default:
		return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed: sort"}
	}
	want := splitNonEmpty(q.Get("labels"))
	type listed struct {
		json    map[string]any
		created time.Time
		updated time.Time
	}
	var ls []listed
	for _, is := range rp.issues {
		st := is.State
		if st == "" {
			st = "open"
		}
		if state != "all" && st != state || !hasAll(is.Labels, want) {
			continue
		}
		j := s.issueJSON(rp, is)
		updated, _ := time.Parse(time.RFC3339, j["updated_at"].(string))
		if updated.Before(since) {
			continue
		}
		ls = append(ls, listed{j, is.CreatedAt, updated})
	}
	if sort == "updated" {
		slices.SortStableFunc(ls, func(a, b listed) int { return a.updated.Compare(b.updated) })
	}
	if q.Get("direction") != "asc" {
		slices.Reverse(ls)
	}
	items := make([]map[string]any, len(ls))
	for i, l := range ls {
		items[i] = l.json
	}
	return s.page(h, r, items)
}
