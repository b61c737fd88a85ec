// Package githubtest is a fake GitHub REST API for tests: an httptest server
// that speaks the payload shapes of the endpoints the github surface uses
// (issues, issue comments with since, ETag and 304, reactions, collaborator
// permission, rate-limit headers, GitHub App installation tokens), and
// helpers to act as people on it and to look at what happened.
//
//	srv := githubtest.NewServer(t)
//	srv.SetPermission("octocat", "write")
//	id := srv.AddComment("acme/app", 1, "octocat", "2")
//	srv.Reactions("acme/app", id) // ["eyes"]
//
// Repositories and users exist as soon as they are named. Everything is kept
// in memory; the server is closed when the test ends.
package githubtest

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request the server received.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	// IfNoneMatch is the request's If-None-Match header (an ETag).
	IfNoneMatch string
	// Status is the status code the server answered.
	Status int
	At     time.Time
}

// Comment is an issue comment as the server holds it.
type Comment struct {
	ID        int64
	Repo      string
	Issue     int
	Login     string
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time
	Deleted   bool
	Reactions []Reaction
}

// Edited reports whether the comment was edited after it was created.
func (c Comment) Edited() bool { return c.UpdatedAt.After(c.CreatedAt) }

// Reaction is an emoji reaction on a comment ("eyes", "rocket", "+1"...).
type Reaction struct {
	Content string
	Login   string
}

// Issue is an issue as the server holds it.
type Issue struct {
	Number    int
	Repo      string
	Title     string
	Body      string
	Labels    []string
	Login     string
	CreatedAt time.Time
	// State is "open" or "closed"; StateReason is why it was closed
	// ("completed", "not_planned").
	State       string
	StateReason string
	ClosedAt    time.Time
	// UpdatedAt is when a label was put on or taken off it last (labels.go);
	// its updated_at is the latest of that, its creation and its comments.
	UpdatedAt time.Time
}

// Server is a fake GitHub REST API. Its methods are safe for concurrent use.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	now     func() time.Time
	nextID  int64
	repos   map[string]*repo
	events  map[string][]*issueEvent // by lower-case repository name (labels.go)
	users   map[string]*user
	perms   map[string]string // lower login → permission
	// repoPerms are permissions on one repository (lower "owner/name",
	// a NUL, lower login), before perms.
	repoPerms map[string]string
	token     string           // required token, if any
	apps      map[int64]app    // installation ID → app
	appToks   map[string]int64 // installation tokens handed out → installation ID
	requests  []Request
	used      int // requests counted against the rate limit (304s are not)
	faults    []fault
	lasting   []*fault
	renamed   map[string]*repo // old lower-case name → the repository now
	hangs     []*hang
	holding   map[string]int // "METHOD path" → requests a hang holds now
	botLogin  string
	as        string                    // the login the request being served acts as (authLocked)
	pulls     map[string][]*PullRequest // by lower-case repository name (pulls.go)
	auth      tokenAuth                 // the static token's grants (tokens.go)
	appPerms  map[int64]map[string]string
	hooks     map[string][]hook // by lower-case repository name (tokens.go)
	rv        reviewState       // pull requests' review comments and reviews (reviews.go)
}

type repo struct {
	fullName string
	id       int64
	issues   []*Issue
	comments []*Comment // in creation order
}

type user struct {
	login string
	id    int64
	typ   string // "User" or "Bot"
}

type app struct {
	id   int64
	slug string
	key  *rsa.PublicKey
}

type fault struct {
	method, path string
	status       int
	header       http.Header
	body         string
	after        bool // serve the request, then fail: the response is lost
	drop         bool // serve the request, then close the connection unanswered
	always       bool // every matching request, until ClearFaults
	lasting      bool // until removed (Refuse)
}

// NewServer starts a fake GitHub and closes it when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{
		t:         t,
		changed:   make(chan struct{}),
		now:       time.Now,
		nextID:    1000,
		repos:     make(map[string]*repo),
		users:     make(map[string]*user),
		perms:     make(map[string]string),
		repoPerms: make(map[string]string),
		apps:      make(map[int64]app),
		appToks:   make(map[string]int64),
		pulls:     make(map[string][]*PullRequest),
		holding:   make(map[string]int),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the API's base URL (the surface's base_url).
func (s *Server) URL() string { return s.srv.URL }

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// RequireToken makes the server refuse requests (401) that do not carry
// token (or an installation token it handed out).
func (s *Server) RequireToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// AddApp registers a GitHub App installation whose JWTs are signed by the
// private key of pub, with the slug "orchestrator" (AddAppSlug names
// another). POST /app/installations/{installationID}/access_tokens then
// hands out installation tokens, which RequireToken accepts; what they
// create is authored by the app's bot, "<slug>[bot]" (type "Bot"), and
// GET /app with the app's JWT describes the app.
func (s *Server) AddApp(appID, installationID int64, pub *rsa.PublicKey) {
	s.AddAppSlug(appID, installationID, "orchestrator", pub)
}

// AddAppSlug is AddApp for an app whose slug is slug.
func (s *Server) AddAppSlug(appID, installationID int64, slug string, pub *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[installationID] = app{id: appID, slug: slug, key: pub}
	if s.token == "" {
		s.token = "\x00no static token"
	}
}

// SetBotLogin sets the login the token given to RequireToken belongs to:
// the author of the comments, issues and reactions it creates, and who
// GET /user says it is (default "orchestrator-bot"). Tests of a personal
// access token shared with a human set it to the human's login.
func (s *Server) SetBotLogin(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botLogin = login
}

// SetPermission sets login's permission on every repository: "admin",
// "maintain", "write", "triage", "read" or "none". Unknown users have "read".
func (s *Server) SetPermission(login, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perms[strings.ToLower(login)] = permission
}

// SetRepoPermission sets login's permission on one repository ("owner/name"),
// before what SetPermission set for every repository.
func (s *Server) SetRepoPermission(repo, login, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoPerms[strings.ToLower(repo)+"\x00"+strings.ToLower(login)] = permission
}

// SetBot makes login a bot account (user type "Bot"). Logins ending in
// "[bot]" are bots without it.
func (s *Server) SetBot(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.userLocked(login).typ = "Bot"
}

// SetNow replaces the server's clock (time.Now by default).
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Fail makes the next request matching method and path (exact, without the
// query) fail with status, header and body instead of being served.
func (s *Server) Fail(method, path string, status int, header http.Header, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method: method, path: path, status: status, header: header.Clone(), body: body})
}

// Rename renames repository from ("owner/name") to to: its ID, issues and
// comments stay; payloads name it to from then on, and requests to its old
// name are redirected as GitHub does (301 for GET, 307 for the others).
func (s *Server) Rename(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(from)
	delete(s.repos, strings.ToLower(from))
	r.fullName = to
	s.repos[strings.ToLower(to)] = r
	if s.renamed == nil {
		s.renamed = make(map[string]*repo)
	}
	s.renamed[strings.ToLower(from)] = r
	s.notifyLocked()
}

// Refuse makes every request matching method and path (exact, without the
// query) fail with status and GitHub's JSON message until stop is called:
// a lasting refusal (403 for a token that lost access, 410 for a
// repository whose issues were disabled).
func (s *Server) Refuse(method, path string, status int, message string) (stop func()) {
	f := &fault{method: method, path: path, status: status, lasting: true,
		body: fmt.Sprintf(`{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, message)}
	s.mu.Lock()
	s.lasting = append(s.lasting, f)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.lasting = slices.DeleteFunc(s.lasting, func(x *fault) bool { return x == f })
		s.mu.Unlock()
	}
}

// Hang holds every request matching method and path (exact, without the
// query) unanswered until release is called or its client gives up, as a
// GitHub that accepts the connection and never answers. Requests held are
// served once released.
func (s *Server) Hang(method, path string) (release func()) {
	ch := make(chan struct{})
	h := &hang{method: method, path: path, release: ch}
	s.mu.Lock()
	s.hangs = append(s.hangs, h)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.hangs = slices.DeleteFunc(s.hangs, func(x *hang) bool { return x == h })
			s.mu.Unlock()
			close(ch)
		})
	}
}

type hang struct {
	method, path string
	release      chan struct{}
}

// held returns the release channel of a hang matching r, or nil, and
// counts r as held (Holding) until the returned done is called.
func (s *Server) held(r *http.Request) (release <-chan struct{}, done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hangs {
		if h.method == r.Method && h.path == r.URL.Path {
			k := r.Method + " " + r.URL.Path
			s.holding[k]++
			s.notifyLocked()
			return h.release, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.holding[k]--
				s.notifyLocked()
			}
		}
	}
	return nil, nil
}

// Holding returns how many requests matching method and path a Hang holds
// now: a test waits for one to be in flight.
func (s *Server) Holding(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding[method+" "+path]
}

// LoseResponse makes the next request matching method and path be served
// (a comment is created, an issue opened...) but answered with status and
// a plain body instead of its response, as a proxy that lost the response
// would.
func (s *Server) LoseResponse(method, path string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method: method, path: path, status: status, body: `{"message":"Server Error"}`, after: true})
}

// DropResponse makes the next request matching method and path be served
// (a pull request is created...) and its connection then closed with no
// response at all: the client sees a network error, as when a response is
// lost on the way.
func (s *Server) DropResponse(method, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method: method, path: path, after: true, drop: true})
}

// FailAlways makes every request matching method and path fail with status,
// header and body instead of being served, until ClearFaults: an outage.
func (s *Server) FailAlways(method, path string, status int, header http.Header, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method: method, path: path, status: status, header: header.Clone(), body: body, always: true})
}

// ClearFaults drops every fault not yet served (the outage is over).
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// SecondaryRateLimit makes the next request matching method and path fail
// the way GitHub's secondary rate limit does: status (403 or 429) with a
// Retry-After of retryAfter seconds and GitHub's message.
func (s *Server) SecondaryRateLimit(method, path string, status, retryAfter int) {
	h := http.Header{}
	h.Set("Retry-After", strconv.Itoa(retryAfter))
	h.Set("Content-Type", "application/json; charset=utf-8")
	s.Fail(method, path, status, h, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000:0000:00000000.","documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
}

// CreateIssue opens an issue in repo ("owner/name") and returns its number.
func (s *Server) CreateIssue(repo, title string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	return s.createIssueLocked(repo, title, "", nil, "octocat").Number
}

// OpenIssue opens an issue in repo as login, with body and labels, and
// returns its number.
func (s *Server) OpenIssue(repo, login, title, body string, labels ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	return s.createIssueLocked(repo, title, body, labels, login).Number
}

// AddComment posts a comment on issue as login and returns its ID. The issue
// is created if it does not exist.
func (s *Server) AddComment(repo string, issue int, login, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	r := s.repoLocked(repo)
	if s.issueLocked(r, issue) == nil {
		for len(r.issues) < issue {
			s.createIssueLocked(repo, fmt.Sprintf("Issue %d", len(r.issues)+1), "", nil, "octocat")
		}
	}
	return s.addCommentLocked(r, issue, login, body).ID
}

// EditComment changes a comment's body, as its author editing it would.
func (s *Server) EditComment(repo string, id int64, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	c := s.commentLocked(s.repoLocked(repo), id)
	if c == nil {
		s.t.Errorf("githubtest: EditComment: no comment %d in %s", id, repo)
		return
	}
	c.Body = body
	// An edit shows on GitHub as an updated_at after created_at (both in
	// seconds): a person does not edit within the second they posted.
	c.UpdatedAt = s.tickLocked(c.UpdatedAt.Add(time.Second))
}

// DeleteComment deletes a comment.
func (s *Server) DeleteComment(repo string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	if c := s.commentLocked(s.repoLocked(repo), id); c != nil {
		c.Deleted = true
	}
}

// Comments returns the comments of an issue that were not deleted, oldest first.
func (s *Server) Comments(repo string, issue int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.repoLocked(repo).comments {
		if c.Issue == issue && !c.Deleted {
			out = append(out, copyComment(c))
		}
	}
	return out
}

// Comment returns one comment, deleted or not.
func (s *Server) Comment(repo string, id int64) (Comment, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.commentLocked(s.repoLocked(repo), id)
	if c == nil {
		return Comment{}, false
	}
	return copyComment(c), true
}

// QuestionMarker starts the hidden marker the github surface puts in its
// question comments.
const QuestionMarker = "<!-- orchestrator:question "

// Questions returns the question comments (those carrying QuestionMarker)
// on repo, on every issue, oldest first.
func (s *Server) Questions(repo string) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.repoLocked(repo).comments {
		if !c.Deleted && strings.Contains(c.Body, QuestionMarker) {
			out = append(out, copyComment(c))
		}
	}
	return out
}

// WaitQuestion waits until repo has at least n question comments and
// returns the n-th (from 1), failing the test after timeout.
func (s *Server) WaitQuestion(t testing.TB, repo string, n int, timeout time.Duration) Comment {
	t.Helper()
	var c Comment
	s.WaitFor(t, timeout, fmt.Sprintf("question comment %d on %s", n, repo), func() bool {
		qs := s.Questions(repo)
		if len(qs) >= n {
			c = qs[n-1]
			return true
		}
		return false
	})
	return c
}

// Reactions returns the contents of the reactions on a comment, in the
// order they were made ("eyes", "rocket"...).
func (s *Server) Reactions(repo string, commentID int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.commentLocked(s.repoLocked(repo), commentID)
	if c == nil {
		return nil
	}
	return contents(c.Reactions)
}

// Issues returns the issues of repo, in number order.
func (s *Server) Issues(repo string) []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Issue
	for _, is := range s.repoLocked(repo).issues {
		c := *is
		c.Labels = slices.Clone(is.Labels)
		out = append(out, c)
	}
	return out
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ResetRequests forgets the requests received so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// WaitFor waits until cond, evaluated after every change to the server's
// state (comments, reactions, issues, requests) and every 25 ms, is true,
// and fails the test after timeout. cond must not call WaitFor.
func (s *Server) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// cond may also read what the client under test changed outside the
	// server (a store, a sink of the test's): it is read again at least
	// every 25 ms, not only at the server's changes.
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("githubtest: waited %v for %s", timeout, what)
			return
		}
	}
}

// Changed returns a channel closed at the next change to the server's state.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// IssueCommentEvent returns the payload of the issue_comment webhook event
// GitHub sends for a comment, with the given action ("created", "edited",
// "deleted").
func (s *Server) IssueCommentEvent(repo string, commentID int64, action string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(repo)
	c := s.commentLocked(r, commentID)
	if c == nil {
		s.t.Errorf("githubtest: IssueCommentEvent: no comment %d in %s", commentID, repo)
		return nil
	}
	ev := map[string]any{
		"action":     action,
		"issue":      s.issueJSON(r, s.issueLocked(r, c.Issue)),
		"comment":    s.commentJSON(r, c),
		"repository": s.repoJSON(r),
		"sender":     s.userJSON(c.Login),
	}
	b, err := json.Marshal(ev)
	if err != nil {
		s.t.Errorf("githubtest: %v", err)
	}
	return b
}

// Signature returns the X-Hub-Signature-256 header GitHub sends for body
// signed with secret.
func Signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// --- state helpers (s.mu held) ---

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// tickLocked returns the current time truncated to GitHub's one-second
// precision, and never before after.
func (s *Server) tickLocked(after time.Time) time.Time {
	t := s.now().UTC().Truncate(time.Second)
	if t.Before(after) {
		t = after
	}
	return t
}

func (s *Server) newIDLocked() int64 {
	s.nextID++
	return s.nextID
}

func (s *Server) repoLocked(fullName string) *repo {
	key := strings.ToLower(fullName)
	r, ok := s.repos[key]
	if !ok {
		r = &repo{fullName: fullName, id: s.newIDLocked()}
		s.repos[key] = r
	}
	return r
}

func (s *Server) userLocked(login string) *user {
	key := strings.ToLower(login)
	u, ok := s.users[key]
	if !ok {
		u = &user{login: login, id: s.newIDLocked(), typ: "User"}
		if strings.HasSuffix(login, "[bot]") {
			u.typ = "Bot"
		}
		s.users[key] = u
	}
	return u
}

func (s *Server) issueLocked(r *repo, number int) *Issue {
	if number < 1 || number > len(r.issues) {
		return nil
	}
	return r.issues[number-1]
}

func (s *Server) commentLocked(r *repo, id int64) *Comment {
	for _, c := range r.comments {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func (s *Server) createIssueLocked(repoName, title, body string, labels []string, login string) *Issue {
	r := s.repoLocked(repoName)
	is := &Issue{
		Number:    len(r.issues) + 1,
		Repo:      r.fullName,
		Title:     title,
		Body:      body,
		Labels:    labels,
		Login:     login,
		CreatedAt: s.tickLocked(time.Time{}),
	}
	r.issues = append(r.issues, is)
	s.userLocked(login)
	return is
}

func (s *Server) addCommentLocked(r *repo, issue int, login, body string) *Comment {
	var last time.Time
	if n := len(r.comments); n > 0 {
		last = r.comments[n-1].CreatedAt
	}
	now := s.tickLocked(last)
	c := &Comment{
		ID:        s.newIDLocked(),
		Repo:      r.fullName,
		Issue:     issue,
		Login:     login,
		Body:      body,
		CreatedAt: now,
		UpdatedAt: now,
	}
	r.comments = append(r.comments, c)
	s.userLocked(login)
	return c
}

func (s *Server) apiLogin() string {
	if s.botLogin != "" {
		return s.botLogin
	}
	return "orchestrator-bot"
}

func copyComment(c *Comment) Comment {
	out := *c
	out.Reactions = slices.Clone(c.Reactions)
	return out
}

// --- JSON shapes (as GitHub's REST API returns them) ---

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (s *Server) userJSON(login string) map[string]any {
	u := s.userLocked(login)
	return map[string]any{
		"login":      u.login,
		"id":         u.id,
		"node_id":    "U_" + strconv.FormatInt(u.id, 10),
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(u.id, 10) + "?v=4",
		"url":        s.srv.URL + "/users/" + u.login,
		"html_url":   "https://github.com/" + u.login,
		"type":       u.typ,
		"site_admin": false,
	}
}

func (s *Server) repoJSON(r *repo) map[string]any {
	owner, name, _ := strings.Cut(r.fullName, "/")
	return map[string]any{
		"id":        r.id,
		"node_id":   "R_" + strconv.FormatInt(r.id, 10),
		"name":      name,
		"full_name": r.fullName,
		"private":   false,
		"owner":     s.userJSON(owner),
		"html_url":  "https://github.com/" + r.fullName,
		"url":       s.srv.URL + "/repos/" + r.fullName,
	}
}

func (s *Server) issueJSON(r *repo, is *Issue) map[string]any {
	labels := []map[string]any{}
	for i, l := range is.Labels {
		labels = append(labels, map[string]any{"id": i + 1, "name": l, "color": "ededed", "default": false})
	}
	n := 0
	updated := is.CreatedAt
	if is.UpdatedAt.After(updated) {
		updated = is.UpdatedAt
	}
	for _, c := range r.comments {
		if c.Issue == is.Number && !c.Deleted {
			n++
			if c.UpdatedAt.After(updated) {
				updated = c.UpdatedAt
			}
		}
	}
	num := strconv.Itoa(is.Number)
	state, reason, closedAt := "open", any(nil), any(nil)
	if is.State == "closed" {
		state, reason, closedAt = "closed", is.StateReason, ts(is.ClosedAt)
	}
	return map[string]any{
		"id":                 int64(is.Number) + r.id*1000,
		"node_id":            "I_" + num,
		"url":                s.srv.URL + "/repos/" + r.fullName + "/issues/" + num,
		"repository_url":     s.srv.URL + "/repos/" + r.fullName,
		"comments_url":       s.srv.URL + "/repos/" + r.fullName + "/issues/" + num + "/comments",
		"html_url":           "https://github.com/" + r.fullName + "/issues/" + num,
		"number":             is.Number,
		"state":              state,
		"state_reason":       reason,
		"title":              is.Title,
		"body":               is.Body,
		"user":               s.userJSON(is.Login),
		"labels":             labels,
		"locked":             false,
		"comments":           n,
		"created_at":         ts(is.CreatedAt),
		"updated_at":         ts(updated),
		"closed_at":          closedAt,
		"author_association": "OWNER",
	}
}

// reactionContents are the reactions GitHub takes, as its API names them.
var reactionContents = []string{"+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"}

// reactionCounts is the reactions rollup of a comment whose reactions are
// listed at url: every content's count, zero included, and their total.
func reactionCounts(url string, rs []Reaction) map[string]any {
	counts := map[string]any{"url": url, "total_count": len(rs)}
	for _, k := range reactionContents {
		counts[k] = 0
	}
	for _, re := range rs {
		counts[re.Content] = counts[re.Content].(int) + 1
	}
	return counts
}

// contents returns the contents of rs, in order.
func contents(rs []Reaction) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Content)
	}
	return out
}

// addReactionLocked serves POST .../reactions on a comment whose
// reactions are *rs: the content must be one GitHub takes (else 422); the
// same reaction by the same person is kept once.
func (s *Server) addReactionLocked(r *http.Request, rs *[]Reaction) (any, error) {
	var in struct {
		Content string `json:"content"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || !slices.Contains(reactionContents, in.Content) {
		return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
	}
	login := s.as
	if !slices.Contains(*rs, Reaction{in.Content, login}) {
		*rs = append(*rs, Reaction{in.Content, login})
	}
	return map[string]any{
		"id":         s.newIDLocked(),
		"node_id":    "REA_x",
		"user":       s.userJSON(login),
		"content":    in.Content,
		"created_at": ts(s.now()),
	}, nil
}

func (s *Server) commentJSON(r *repo, c *Comment) map[string]any {
	id := strconv.FormatInt(c.ID, 10)
	counts := reactionCounts(s.srv.URL+"/repos/"+r.fullName+"/issues/comments/"+id+"/reactions", c.Reactions)
	return map[string]any{
		"id":                 c.ID,
		"node_id":            "IC_" + id,
		"url":                s.srv.URL + "/repos/" + r.fullName + "/issues/comments/" + id,
		"html_url":           "https://github.com/" + r.fullName + "/issues/" + strconv.Itoa(c.Issue) + "#issuecomment-" + id,
		"issue_url":          s.srv.URL + "/repos/" + r.fullName + "/issues/" + strconv.Itoa(c.Issue),
		"body":               c.Body,
		"user":               s.userJSON(c.Login),
		"created_at":         ts(c.CreatedAt),
		"updated_at":         ts(c.UpdatedAt),
		"author_association": s.association(c.Login),
		"reactions":          counts,
	}
}

// --- HTTP ---

type apiError struct {
	status  int
	message string
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if held, done := s.held(r); held != nil {
		// Held: no answer until released, or until the client gives up.
		// The body read first, the server sees the client go (net/http
		// watches the connection only once the body was read).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			done()
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-held:
			done()
		case <-r.Context().Done():
			done()
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	rec := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, IfNoneMatch: r.Header.Get("If-None-Match"), At: time.Now()}
	status := s.serveLocked(w, r)
	rec.Status = status
	if status != http.StatusNotModified {
		s.used++
	}
	s.requests = append(s.requests, rec)
}

// serveLocked answers r and returns the status code.
func (s *Server) serveLocked(w http.ResponseWriter, r *http.Request) int {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-GitHub-Request-Id", fmt.Sprintf("0000:%04X", len(s.requests)))
	h.Set("Date", s.now().UTC().Format(http.TimeFormat))

	for i, f := range s.faults {
		if f.method == r.Method && f.path == r.URL.Path {
			if !f.always {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
			if f.after {
				status := s.serveLocked(httptest.NewRecorder(), r)
				if f.drop {
					if hj, ok := w.(http.Hijacker); ok {
						if conn, _, err := hj.Hijack(); err == nil {
							conn.Close()
							return status
						}
					}
					s.t.Errorf("githubtest: cannot drop the connection of %s %s", r.Method, r.URL.Path)
				}
			}
			for k, v := range f.header {
				h[k] = v
			}
			w.WriteHeader(f.status)
			fmt.Fprint(w, f.body)
			return f.status
		}
	}

	for _, f := range s.lasting {
		if f.method == r.Method && f.path == r.URL.Path {
			w.WriteHeader(f.status)
			fmt.Fprint(w, f.body)
			return f.status
		}
	}

	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(segs) >= 3 && segs[0] == "repos" {
		if to, ok := s.renamed[strings.ToLower(segs[1]+"/"+segs[2])]; ok {
			// A renamed repository: GitHub redirects its old URLs, 301
			// for GET and HEAD, 307 for the others.
			u := *r.URL
			u.Path = "/repos/" + to.fullName + "/" + strings.Join(segs[3:], "/")
			u.Path = strings.TrimSuffix(u.Path, "/")
			code := http.StatusTemporaryRedirect
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				code = http.StatusMovedPermanently
			}
			h.Set("Location", u.String())
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"message":"Moved Permanently","url":%q}`, u.String())
			return code
		}
	}
	if r.Method == http.MethodPost && len(segs) == 4 && segs[0] == "app" && segs[1] == "installations" && segs[3] == "access_tokens" {
		return s.accessToken(w, r, segs[2])
	}
	if r.Method == http.MethodGet && len(segs) == 1 && segs[0] == "app" {
		return s.getApp(w, r)
	}
	if r.Method == http.MethodGet && len(segs) == 3 && segs[0] == "app" && segs[1] == "installations" {
		return s.getInstallation(w, r, segs[2]) // tokens.go
	}
	if err := s.authLocked(r); err != nil {
		return writeError(w, err)
	}
	if err := s.grantsLocked(h, r, segs); err != nil { // tokens.go
		return writeError(w, err)
	}
	s.rateHeaders(h)

	body, err := s.route(h, r, segs)
	if err != nil {
		return writeError(w, err)
	}
	status := http.StatusOK
	if r.Method == http.MethodPost {
		status = http.StatusCreated
	}
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	}
	data, jerr := json.Marshal(body)
	if jerr != nil {
		return writeError(w, &apiError{http.StatusInternalServerError, jerr.Error()})
	}
	if r.Method == http.MethodGet {
		sum := sha256.Sum256(append([]byte(r.URL.RawQuery+"\n"), data...))
		etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
		h.Set("ETag", etag)
		h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
		if inm := r.Header.Get("If-None-Match"); inm != "" && inm == etag {
			h.Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return http.StatusNotModified
		}
	}
	w.WriteHeader(status)
	w.Write(data)
	return status
}

func writeError(w http.ResponseWriter, e error) int {
	ae, ok := e.(*apiError)
	if !ok {
		ae = &apiError{http.StatusInternalServerError, e.Error()}
	}
	w.WriteHeader(ae.status)
	data, _ := json.Marshal(map[string]string{
		"message":           ae.message,
		"documentation_url": "https://docs.github.com/rest",
	})
	w.Write(data)
	return ae.status
}

func (e *apiError) Error() string { return e.message }

func (s *Server) rateHeaders(h http.Header) {
	reset := s.now().Add(time.Hour).Unix()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, 4999-s.used)))
	h.Set("X-RateLimit-Used", strconv.Itoa(min(5000, s.used+1)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	h.Set("X-RateLimit-Resource", "core")
}

// authLocked checks r's credentials and sets s.as to who they act as: the
// token's owner (apiLogin), or an installation's bot.
func (s *Server) authLocked(r *http.Request) error {
	s.as = s.apiLogin()
	if s.token == "" {
		return nil
	}
	auth := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "token "} {
		tok, ok := strings.CutPrefix(auth, p)
		if !ok {
			continue
		}
		if tok == s.token {
			return nil
		}
		if inst, ok := s.appToks[tok]; ok {
			s.as = s.apps[inst].slug + "[bot]"
			return nil
		}
	}
	return &apiError{http.StatusUnauthorized, "Bad credentials"}
}

// installationLocked reports whether r is authenticated by an installation
// token.
func (s *Server) installationLocked(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "token "} {
		if tok, ok := strings.CutPrefix(auth, p); ok {
			if _, ok := s.appToks[tok]; ok {
				return true
			}
		}
	}
	return false
}

// getApp serves GET /app: the app whose JWT authenticates r. Other
// credentials are refused as GitHub does: a JWT is required.
func (s *Server) getApp(w http.ResponseWriter, r *http.Request) int {
	jwt, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	for _, a := range s.apps {
		if verifyJWT(jwt, a) != nil {
			continue
		}
		bot := s.userLocked(a.slug + "[bot]")
		bot.typ = "Bot"
		data, _ := json.Marshal(map[string]any{
			"id":           a.id,
			"slug":         a.slug,
			"node_id":      "A_" + strconv.FormatInt(a.id, 10),
			"client_id":    "Iv1.fake" + strconv.FormatInt(a.id, 10),
			"owner":        s.userJSON("octocat"),
			"name":         a.slug,
			"description":  "",
			"external_url": "https://example.com",
			"html_url":     "https://github.com/apps/" + a.slug,
			"created_at":   ts(s.now()),
			"updated_at":   ts(s.now()),
			"permissions":  map[string]string{"issues": "write", "metadata": "read"},
			"events":       []string{"issue_comment"},
		})
		w.WriteHeader(http.StatusOK)
		w.Write(data)
		return http.StatusOK
	}
	return writeError(w, &apiError{http.StatusUnauthorized, "A JSON web token could not be decoded"})
}

// accessToken serves POST /app/installations/{id}/access_tokens: it checks
// the app's RS256 JWT and hands out an installation token.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request, inst string) int {
	id, err := strconv.ParseInt(inst, 10, 64)
	a, ok := s.apps[id]
	if err != nil || !ok {
		return writeError(w, &apiError{http.StatusNotFound, "Not Found"})
	}
	jwt, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err := verifyJWT(jwt, a); err != nil {
		return writeError(w, &apiError{http.StatusUnauthorized, "A JSON web token could not be decoded: " + err.Error()})
	}
	tok := fmt.Sprintf("ghs_fake%d", s.newIDLocked())
	s.appToks[tok] = id
	data, _ := json.Marshal(map[string]any{
		"token":                tok,
		"expires_at":           ts(s.now().Add(time.Hour)),
		"permissions":          s.appPermsLocked(id),
		"repository_selection": "all",
	})
	w.WriteHeader(http.StatusCreated)
	w.Write(data)
	return http.StatusCreated
}

func verifyJWT(tok string, a app) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Exp int64           `json:"exp"`
	}
	for i, v := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("alg %q, want RS256", header.Alg)
	}
	if iss := strings.Trim(string(claims.Iss), `"`); iss != strconv.FormatInt(a.id, 10) {
		return fmt.Errorf("iss %s, want the app ID %d", claims.Iss, a.id)
	}
	if time.Unix(claims.Exp, 0).Before(time.Now()) {
		return fmt.Errorf("expired")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	return rsa.VerifyPKCS1v15(a.key, crypto.SHA256, sum[:], sig)
}

// route serves the REST endpoints; segs is the path split on "/".
func (s *Server) route(h http.Header, r *http.Request, segs []string) (any, error) {
	notFound := &apiError{http.StatusNotFound, "Not Found"}
	switch {
	// GET /user: who the token belongs to; an installation token is no user.
	case len(segs) == 1 && segs[0] == "user" && r.Method == http.MethodGet:
		if s.installationLocked(r) {
			return nil, &apiError{http.StatusForbidden, "Resource not accessible by integration"}
		}
		u := s.userJSON(s.as)
		u["name"] = s.as
		return u, nil
	// GET /users/{login}: users exist as soon as they are named.
	case len(segs) == 2 && segs[0] == "users" && r.Method == http.MethodGet:
		return s.userJSON(segs[1]), nil
	// GET /repos/{owner}/{name}: the repository (its ID).
	case len(segs) == 3 && segs[0] == "repos" && r.Method == http.MethodGet:
		out := s.repoJSON(s.repoLocked(segs[1] + "/" + segs[2]))
		out["permissions"] = s.repoPermissions(s.as) // tokens.go
		return out, nil
	}
	if len(segs) < 4 || segs[0] != "repos" {
		return nil, notFound
	}
	rp := s.repoLocked(segs[1] + "/" + segs[2])
	rest := segs[3:]
	if out, err, ok := s.routeReviews(h, r, rp, rest); ok { // reviews.go
		return out, err
	}
	if out, err, ok := s.routePulls(r, rp, rest); ok { // pulls.go
		return out, err
	}
	if out, err, ok := s.routeHooks(r, rp, rest); ok { // tokens.go
		return out, err
	}
	if out, err, ok := s.routeIssueEvents(h, r, rp, rest); ok { // labels.go
		return out, err
	}
	switch {
	// /collaborators/{user}/permission
	case len(rest) == 3 && rest[0] == "collaborators" && rest[2] == "permission" && r.Method == http.MethodGet:
		perm, ok := s.repoPerms[strings.ToLower(rp.fullName)+"\x00"+strings.ToLower(rest[1])]
		if !ok {
			perm = s.perms[strings.ToLower(rest[1])]
		}
		if perm == "" {
			perm = "read"
		}
		legacy := perm
		switch perm {
		case "maintain":
			legacy = "write"
		case "triage":
			legacy = "read"
		}
		return map[string]any{"permission": legacy, "role_name": perm, "user": s.userJSON(rest[1])}, nil

	case rest[0] != "issues":
		return nil, notFound

	// /issues
	case len(rest) == 1 && r.Method == http.MethodGet:
		return s.listIssues(h, r, rp) // labels.go
	case len(rest) == 1 && r.Method == http.MethodPost:
		var in struct {
			Title  string   `json:"title"`
			Body   string   `json:"body"`
			Labels []string `json:"labels"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" {
			return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
		}
		is := s.createIssueLocked(rp.fullName, in.Title, in.Body, in.Labels, s.as)
		return s.issueJSON(rp, is), nil

	// /issues/comments
	case len(rest) == 2 && rest[1] == "comments" && r.Method == http.MethodGet:
		return s.listComments(h, r, rp, 0)

	// /issues/comments/{id}[/reactions]
	case len(rest) >= 3 && rest[1] == "comments":
		id, err := strconv.ParseInt(rest[2], 10, 64)
		c := s.commentLocked(rp, id)
		if err != nil || c == nil || c.Deleted {
			return nil, notFound
		}
		switch {
		case len(rest) == 3 && r.Method == http.MethodGet:
			return s.commentJSON(rp, c), nil
		case len(rest) == 3 && r.Method == http.MethodPatch:
			var in struct {
				Body *string `json:"body"`
			}
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
				return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
			}
			if err := checkBody(*in.Body); err != nil {
				return nil, err
			}
			c.Body = *in.Body
			c.UpdatedAt = s.tickLocked(c.UpdatedAt)
			return s.commentJSON(rp, c), nil
		case len(rest) == 3 && r.Method == http.MethodDelete:
			c.Deleted = true
			return nil, nil
		case len(rest) == 4 && rest[3] == "reactions" && r.Method == http.MethodPost:
			return s.addReactionLocked(r, &c.Reactions)
		case len(rest) == 4 && rest[3] == "reactions" && r.Method == http.MethodGet:
			var items []map[string]any
			for i, re := range c.Reactions {
				items = append(items, map[string]any{"id": i + 1, "user": s.userJSON(re.Login), "content": re.Content})
			}
			return s.page(h, r, items)
		}
		return nil, notFound

	// /issues/{number}[/comments]
	default:
		n, err := strconv.Atoi(rest[1])
		is := s.issueLocked(rp, n)
		if err != nil || is == nil {
			return nil, notFound
		}
		switch {
		case len(rest) == 2 && r.Method == http.MethodGet:
			return s.issueJSON(rp, is), nil
		case len(rest) == 2 && r.Method == http.MethodPatch:
			var in struct {
				State       *string `json:"state"`
				StateReason *string `json:"state_reason"`
			}
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
			}
			if in.State != nil {
				switch *in.State {
				case "open":
					is.State, is.StateReason, is.ClosedAt = "open", "", time.Time{}
				case "closed":
					if is.State != "closed" {
						is.ClosedAt = s.tickLocked(time.Time{})
					}
					is.State, is.StateReason = "closed", "completed"
					if in.StateReason != nil && *in.StateReason != "" {
						is.StateReason = *in.StateReason
					}
				default:
					return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
				}
				s.notifyLocked()
			}
			return s.issueJSON(rp, is), nil
		case len(rest) == 3 && rest[2] == "comments" && r.Method == http.MethodGet:
			return s.listComments(h, r, rp, n)
		case len(rest) == 3 && rest[2] == "comments" && r.Method == http.MethodPost:
			var in struct {
				Body string `json:"body"`
			}
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
				return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed"}
			}
			if err := checkBody(in.Body); err != nil {
				return nil, err
			}
			return s.commentJSON(rp, s.addCommentLocked(rp, n, s.as, in.Body)), nil
		}
		return nil, notFound
	}
}

// checkBody enforces GitHub's limit on a comment's length.
func checkBody(body string) error {
	if n := len([]rune(body)); n > 65536 {
		return &apiError{http.StatusUnprocessableEntity, fmt.Sprintf("Validation Failed: body is too long (maximum is 65536 characters, got %d)", n)}
	}
	return nil
}

// listComments lists the comments of one issue, or of the whole repository
// when issue is 0, honouring since, sort and direction.
func (s *Server) listComments(h http.Header, r *http.Request, rp *repo, issue int) (any, error) {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, &apiError{http.StatusUnprocessableEntity, "Validation Failed: since"}
		}
		since = t
	}
	cs := slices.Clone(rp.comments)
	if issue == 0 && q.Get("sort") == "updated" {
		slices.SortStableFunc(cs, func(a, b *Comment) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	}
	if issue == 0 && q.Get("sort") != "" && q.Get("direction") == "desc" {
		slices.Reverse(cs)
	}
	items := []map[string]any{}
	for _, c := range cs {
		if c.Deleted || (issue != 0 && c.Issue != issue) || c.UpdatedAt.Before(since) {
			continue
		}
		items = append(items, s.commentJSON(rp, c))
	}
	return s.page(h, r, items)
}

// page applies per_page and page to items and sets the Link header.
func (s *Server) page(h http.Header, r *http.Request, items []map[string]any) (any, error) {
	q := r.URL.Query()
	per := 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		per = min(v, 100)
	}
	pg := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		pg = v
	}
	last := max(1, (len(items)+per-1)/per)
	from := min(len(items), (pg-1)*per)
	to := min(len(items), from+per)
	out := items[from:to]
	if out == nil {
		out = []map[string]any{}
	}
	// GitHub's Link header: prev and first past the first page, next and
	// last before the last one.
	link := func(p int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		qq := r.URL.Query()
		qq.Set("page", strconv.Itoa(p))
		u.RawQuery = qq.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if pg > 1 {
		links = append(links, link(min(pg-1, last), "prev"))
	}
	if pg < last {
		links = append(links, link(pg+1, "next"), link(last, "last"))
	}
	if pg > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		h.Set("Link", strings.Join(links, ", "))
	}
	return out, nil
}

func splitNonEmpty(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, w) }) {
			return false
		}
	}
	return true
}
