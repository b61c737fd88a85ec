package githubtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// What a token may do, as GitHub tells it (what `orchestrator doctor`
// reads):
//
//   - a classic personal access token: every response to it carries the
//     header X-OAuth-Scopes, its scopes ("repo, read:org"); SetTokenScopes;
//   - a fine-grained personal access token: no such header; a request the
//     token has no permission for is refused with 403 "Resource not
//     accessible by personal access token" and the header
//     X-Accepted-GitHub-Permissions naming the permission it needs
//     ("pull_requests=read"); SetTokenPermissions;
//   - GET /repos/{owner}/{repo} has "permissions", the account's role on
//     the repository (admin, maintain, push, triage, pull);
//   - a GitHub App's installation: GET /app/installations/{id}, with the
//     app's JWT, has the installation's "permissions"; SetAppPermissions.

// tokenAuth is what the fake knows of the static token's grants (zero: it
// may do everything and says nothing of it).
type tokenAuth struct {
	scopes []string          // classic: sent as X-OAuth-Scopes
	perms  map[string]string // fine-grained: permission → "read" or "write"
}

// hook is a repository webhook.
type hook struct {
	id     int64
	url    string
	events []string
	active bool
}

// SetTokenScopes makes the token given to RequireToken a classic personal
// access token with scopes: every response to it names them in
// X-OAuth-Scopes.
func (s *Server) SetTokenScopes(scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = tokenAuth{scopes: append([]string{}, scopes...)}
}

// SetTokenPermissions makes the token given to RequireToken a fine-grained
// personal access token with perms (permission name → "read" or "write"),
// such as {"issues": "write", "metadata": "read"}. Requests to issues,
// pull requests, contents (commits, git refs) and webhooks it has no
// permission for are refused as GitHub refuses them.
func (s *Server) SetTokenPermissions(perms map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := make(map[string]string, len(perms))
	for k, v := range perms {
		p[k] = v
	}
	s.auth = tokenAuth{perms: p}
}

// SetAppPermissions sets the permissions of the app installed as
// installationID (default issues: write, metadata: read), as
// GET /app/installations/{id} and its installation tokens describe them.
func (s *Server) SetAppPermissions(installationID int64, perms map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.appPerms == nil {
		s.appPerms = make(map[int64]map[string]string)
	}
	p := make(map[string]string, len(perms))
	for k, v := range perms {
		p[k] = v
	}
	s.appPerms[installationID] = p
}

// AddHook registers a webhook on repo ("owner/name") that delivers events
// to url, as GET /repos/{owner}/{repo}/hooks lists it.
func (s *Server) AddHook(repo, url string, events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooks == nil {
		s.hooks = make(map[string][]hook)
	}
	key := strings.ToLower(repo)
	s.hooks[key] = append(s.hooks[key], hook{id: s.newIDLocked(), url: url, events: append([]string{}, events...), active: true})
}

func (s *Server) appPermsLocked(inst int64) map[string]string {
	if p, ok := s.appPerms[inst]; ok {
		return p
	}
	return map[string]string{"issues": "write", "metadata": "read"}
}

// staticTokenLocked reports whether r carries the token of RequireToken.
func (s *Server) staticTokenLocked(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "token "} {
		if tok, ok := strings.CutPrefix(auth, p); ok && s.token != "" && tok == s.token {
			return true
		}
	}
	return false
}

// grantsLocked applies the static token's grants to r: the scopes header
// of a classic token, or the refusal of a request a fine-grained token has
// no permission for (nil when it may).
func (s *Server) grantsLocked(h http.Header, r *http.Request, segs []string) *apiError {
	if !s.staticTokenLocked(r) {
		return nil
	}
	if s.auth.scopes != nil {
		h.Set("X-OAuth-Scopes", strings.Join(s.auth.scopes, ", "))
		h.Set("X-Accepted-OAuth-Scopes", "repo")
		return nil
	}
	if s.auth.perms == nil || len(segs) < 4 || segs[0] != "repos" {
		return nil
	}
	var perm string
	switch segs[3] {
	case "issues":
		perm = "issues"
	case "pulls":
		perm = "pull_requests"
	case "contents", "commits", "git", "branches":
		perm = "contents"
	case "hooks":
		perm = "repository_hooks"
	default:
		return nil
	}
	level := "read"
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		level = "write"
	}
	if got := s.auth.perms[perm]; got == "write" || (got == "read" && level == "read") {
		return nil
	}
	h.Set("X-Accepted-GitHub-Permissions", perm+"="+level)
	return &apiError{http.StatusForbidden, "Resource not accessible by personal access token"}
}

// repoPermissions is the "permissions" of GET /repos/{owner}/{repo}: the
// role of login on it.
func (s *Server) repoPermissions(login string) map[string]bool {
	perm := s.perms[strings.ToLower(login)]
	if strings.HasSuffix(login, "[bot]") && perm == "" {
		perm = "write" // an installed app acts with its permissions
	}
	if perm == "" {
		perm = "read"
	}
	rank := slices.Index([]string{"none", "read", "triage", "write", "maintain", "admin"}, perm)
	return map[string]bool{"pull": rank >= 1, "triage": rank >= 2, "push": rank >= 3, "maintain": rank >= 4, "admin": rank >= 5}
}

// routeHooks serves GET /repos/{owner}/{repo}/hooks (and /commits, of an
// empty repository); ok is false for other requests. Only admins may list a repository's webhooks.
func (s *Server) routeHooks(r *http.Request, rp *repo, rest []string) (any, error, bool) {
	if len(rest) == 1 && rest[0] == "commits" && r.Method == http.MethodGet {
		// The fake's repositories hold no git data: GitHub answers an
		// empty repository's commits with 409.
		return nil, &apiError{http.StatusConflict, "Git Repository is empty."}, true
	}
	if len(rest) != 1 || rest[0] != "hooks" || r.Method != http.MethodGet {
		return nil, nil, false
	}
	if !s.repoPermissions(s.as)["admin"] && !strings.HasSuffix(s.as, "[bot]") {
		return nil, &apiError{http.StatusNotFound, "Not Found"}, true
	}
	out := []map[string]any{}
	for _, hk := range s.hooks[strings.ToLower(rp.fullName)] {
		id := strconv.FormatInt(hk.id, 10)
		out = append(out, map[string]any{
			"type": "Repository", "id": hk.id, "name": "web", "active": hk.active, "events": hk.events,
			"config": map[string]any{"content_type": "json", "insecure_ssl": "0", "url": hk.url},
			"url":    s.srv.URL + "/repos/" + rp.fullName + "/hooks/" + id,
		})
	}
	return out, nil, true
}

// getInstallation serves GET /app/installations/{id} with the app's JWT.
func (s *Server) getInstallation(w http.ResponseWriter, r *http.Request, inst string) int {
	id, err := strconv.ParseInt(inst, 10, 64)
	a, ok := s.apps[id]
	if err != nil || !ok {
		return writeError(w, &apiError{http.StatusNotFound, "Not Found"})
	}
	jwt, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err := verifyJWT(jwt, a); err != nil {
		return writeError(w, &apiError{http.StatusUnauthorized, "A JSON web token could not be decoded: " + err.Error()})
	}
	data, _ := json.Marshal(map[string]any{
		"id": id, "app_id": a.id, "app_slug": a.slug, "target_type": "Organization",
		"account":              s.userJSON("octocat"),
		"permissions":          s.appPermsLocked(id),
		"events":               []string{"issue_comment"},
		"repository_selection": "all",
		"created_at":           ts(s.now()), "updated_at": ts(s.now()),
	})
	w.WriteHeader(http.StatusOK)
	w.Write(data)
	return http.StatusOK
}
