package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// Runs started from issues. A comment that starts with the mention
// ("@orchestrator run SPEC", "@orchestrator <text>") or a label put on an
// issue, by someone who may answer questions in the repository (write
// permission or the allow list; deny by default), is handed to a
// TriggerHandler, which starts one run of it whatever delivers it: the
// issue_comment and issues webhooks, or a poll of the repository's
// comments and labelled issues (with a webhook too, as its safety net: an
// event whose handling failed after the webhook's 202 is taken by the
// next poll, and its key makes a webhook and a poll of it one run). Edited and
// deleted comments, comments on pull requests (the review loop's), the
// orchestrator's own comments and bots start nothing. A stranger gets one
// polite reply.

// Kinds of IssueTrigger.
const (
	TriggerComment = "comment"
	TriggerLabel   = "label"
)

// IssueTrigger is an event on a GitHub issue that asks for a run. Its
// texts are what people typed: untrusted.
type IssueTrigger struct {
	Repo  string // "owner/name", as configured
	Issue int
	// Title and Body are the issue's, as GitHub has them now.
	Title, Body string
	Kind        string // TriggerComment or TriggerLabel
	// CommentID and Comment: the triggering comment, and what follows
	// the mention in it (TriggerComment).
	CommentID int64
	Comment   string
	// Spec is the spec the comment names ("@orchestrator run SPEC"), ""
	// for the configured one.
	Spec string
	// Label is the label put on the issue (TriggerLabel), and LabelEvent
	// the ID of that "labeled" event of the issue's timeline.
	Label      string
	LabelEvent int64
	// Author is who commented or labelled.
	Author string
	// Key names the event whatever delivered it (a webhook, a redelivery,
	// a poll, another instance).
	Key string
}

// Origin says what started a run, for people.
func (t IssueTrigger) Origin() string {
	if t.Kind == TriggerLabel {
		return fmt.Sprintf("github issue %s#%d label %q by %s", t.Repo, t.Issue, t.Label, t.Author)
	}
	return fmt.Sprintf("github issue %s#%d comment %d by %s", t.Repo, t.Issue, t.CommentID, t.Author)
}

// TriggerStart is what became of a trigger handed to TriggerHandler.Start.
type TriggerStart struct {
	// RunID is the run this call started ("" if none).
	RunID string
	// Reply, when this call refused the event (and recorded it, so no
	// other call does), is posted on the issue: too many runs this hour,
	// no such spec.
	Reply string
}

// TriggerHandler starts the runs of issue events. Its methods are called
// from several goroutines at once, in several processes for the same event.
type TriggerHandler interface {
	// Start starts the run of t, exactly once per t.Key: an event started
	// or refused already (here, before a restart, at another instance)
	// gives a zero TriggerStart and no error.
	Start(ctx context.Context, t IssueTrigger) (TriggerStart, error)
	// Refuse records that t came from someone not allowed to start runs,
	// and reports whether this call recorded it (first): only then is the
	// person told.
	Refuse(ctx context.Context, t IssueTrigger) (first bool, err error)
}

// TriggerConfig says which events of which repositories start runs.
type TriggerConfig struct {
	// Repos are "owner/name".
	Repos []string
	// Mention starts a comment that starts a run, such as "@orchestrator".
	Mention string
	// Labels: an issue that gets one of them starts a run.
	Labels []string
	// PerRepo sets Mention and Labels apart for some of Repos (keys
	// "owner/name", any case).
	PerRepo map[string]RepoTriggers
	// Allow lists logins that may start runs besides those with write,
	// maintain or admin permission; with AllowOnly, only them (as for
	// answers: surfaces.github.allow, allow_only).
	Allow     []string
	AllowOnly bool
	Handler   TriggerHandler
	// Poll reads the repositories' comments and labelled issues every
	// poll interval: without a webhook, how events come; with one, its
	// safety net (a delivery lost, or whose handling failed after the
	// 202: a permission lookup, the handler). The event's key makes a
	// webhook and a poll of one event one run.
	Poll bool
	// Leading, if set, says whether this process polls now: on a cluster
	// only the instance that leads does (the others would find the same
	// events, which the handler recognises, at as many times the
	// requests). A poll after a time of not leading starts from the
	// cursor in Refs, where the last leader left it.
	Leading func() bool
}

// RepoTriggers is what starts runs in one repository when it is not
// TriggerConfig's: an empty Mention is TriggerConfig.Mention, nil Labels
// are TriggerConfig.Labels (an empty list: none).
type RepoTriggers struct {
	Mention string
	Labels  []string
}

// triggers is a Client's intake of issue events.
type triggers struct {
	c     *Client
	cfg   TriggerConfig
	repos map[string]*repoTriggers // lower-case "owner/name"
	allow map[string]bool
}

// repoTriggers is what starts runs in one repository.
type repoTriggers struct {
	name    string            // "owner/name" as configured
	mention string            // trimmed
	labels  map[string]string // lower-case → as configured
	list    []string          // the labels as configured, in order
}

// of returns the settings of repo (watched: triggersFor found it).
func (t *triggers) of(repo string) *repoTriggers {
	if r, ok := t.repos[strings.ToLower(repo)]; ok {
		return r
	}
	return &repoTriggers{name: repo, labels: map[string]string{}}
}

// StartTriggers makes the client hand the issue events of cfg to its
// Handler: from the webhook, and when cfg.Poll by polling each repository
// every poll interval from a cursor kept in Refs (a restart reads only what
// came since). The first poll of a repository without a cursor starts now:
// older events start nothing. Call it once, before the webhook is served.
func (c *Client) StartTriggers(ctx context.Context, cfg TriggerConfig) error {
	if cfg.Handler == nil {
		return errors.New("github triggers: no handler")
	}
	if strings.TrimSpace(cfg.Mention) == "" {
		return errors.New("github triggers: no mention")
	}
	t := &triggers{c: c, cfg: cfg, repos: map[string]*repoTriggers{}, allow: map[string]bool{}}
	per := map[string]RepoTriggers{}
	for r, rt := range cfg.PerRepo {
		per[strings.ToLower(r)] = rt
	}
	for _, r := range cfg.Repos {
		owner, name, ok := strings.Cut(r, "/")
		if !ok || owner == "" || name == "" {
			return fmt.Errorf("github triggers: repository %q: want owner/name", r)
		}
		rt := &repoTriggers{name: r, mention: strings.TrimSpace(cfg.Mention), labels: map[string]string{}, list: cfg.Labels}
		if o, ok := per[strings.ToLower(r)]; ok {
			if m := strings.TrimSpace(o.Mention); m != "" {
				rt.mention = m
			}
			if o.Labels != nil {
				rt.list = o.Labels
			}
		}
		for _, l := range rt.list {
			rt.labels[strings.ToLower(l)] = l
		}
		t.repos[strings.ToLower(r)] = rt
	}
	for _, l := range cfg.Allow {
		t.allow[strings.ToLower(l)] = true
	}
	c.mu.Lock()
	if c.triggers != nil {
		c.mu.Unlock()
		return errors.New("github triggers: started already")
	}
	c.triggers = t
	c.mu.Unlock()
	if !cfg.Poll {
		return nil
	}
	for _, r := range cfg.Repos {
		tp := &triggerPoller{t: t, repo: r, pages: map[string]string{}}
		if err := tp.loadCursor(ctx); err != nil {
			return err
		}
		c.wg.Add(1)
		go tp.run()
	}
	return nil
}

// triggersFor returns the intake that watches repo, nil if none does.
func (c *Client) triggersFor(repo string) *triggers {
	c.mu.Lock()
	t := c.triggers
	c.mu.Unlock()
	if t == nil {
		return nil
	}
	if _, ok := t.repos[strings.ToLower(repo)]; !ok {
		return nil
	}
	return t
}

// ParseMention reads a comment that starts with mention (any case,
// followed by a space or the end): "run SPEC [text]" names a spec; any
// other text is the task. ok is false when the comment does not start
// with the mention.
func ParseMention(body, mention string) (spec, text string, ok bool) {
	b := strings.TrimLeftFunc(body, unicode.IsSpace)
	if len(b) < len(mention) || !strings.EqualFold(b[:len(mention)], mention) {
		return "", "", false
	}
	rest := b[len(mention):]
	if rest != "" {
		r := []rune(rest)[0]
		if !unicode.IsSpace(r) && r != ',' && r != ':' {
			return "", "", false // "@orchestrator-bot", "@orchestrators"
		}
	}
	rest = strings.TrimSpace(strings.TrimLeft(rest, ",:"))
	if word, after, _ := strings.Cut(rest, " "); strings.EqualFold(word, "run") {
		name, more, _ := strings.Cut(strings.TrimLeft(after, " "), "\n")
		name, tail, _ := strings.Cut(strings.TrimSpace(name), " ")
		if name != "" {
			return name, strings.TrimSpace(tail + "\n" + more), true
		}
	}
	return "", rest, true
}

// commentKey names a triggering comment.
func triggerCommentKey(repo string, id int64) string {
	return "github:" + strings.ToLower(repo) + ":comment:" + strconv.FormatInt(id, 10)
}

// triggerLabelKey names a "labeled" event.
func triggerLabelKey(repo string, issue int, label string, event int64) string {
	return "github:" + strings.ToLower(repo) + ":label:" + strconv.Itoa(issue) + ":" + strings.ToLower(label) + ":" + strconv.FormatInt(event, 10)
}

// comment takes a new comment (its issue as GitHub sent it) if it starts a
// run. An error says the comment must be read again (a lookup or the
// handler failed).
func (t *triggers) comment(ctx context.Context, repo string, issue *gh.Issue, c *gh.IssueComment) error {
	if issue == nil || c == nil || issue.IsPullRequest() {
		return nil // a pull request's comments are the review loop's
	}
	spec, text, ok := ParseMention(c.GetBody(), t.of(repo).mention)
	if !ok {
		return nil
	}
	me, err := t.c.self(ctx)
	if err != nil {
		return err
	}
	if me.wrote(c.GetUser()) {
		return nil // the orchestrator's own words start nothing
	}
	ev := IssueTrigger{Repo: repo, Issue: issue.GetNumber(), Title: issue.GetTitle(), Body: issue.GetBody(),
		Kind: TriggerComment, CommentID: c.GetID(), Comment: text, Spec: spec, Author: c.GetUser().GetLogin(),
		Key: triggerCommentKey(repo, c.GetID())}
	return t.take(ctx, ev, c.GetUser())
}

// labeled takes a label put on an issue by sender if it is one of the
// labels. The event's ID is read from the issue's timeline, so that a
// webhook delivery and a poll name it alike.
func (t *triggers) labeled(ctx context.Context, repo string, issue *gh.Issue, label string, sender *gh.User) {
	want, ok := t.of(repo).labels[strings.ToLower(label)]
	if !ok || issue == nil || issue.IsPullRequest() {
		return
	}
	owner, name, _ := strings.Cut(repo, "/")
	evs, err := t.issueEvents(ctx, owner, name, issue.GetNumber())
	if err != nil {
		t.c.log.Warn("github: read the events of a labelled issue; it starts nothing now", "repo", repo, "issue", issue.GetNumber(), "err", err)
		return
	}
	var last *gh.IssueEvent
	for _, e := range evs {
		if e.GetEvent() == "labeled" && e.Label != nil && strings.EqualFold(e.Label.GetName(), label) {
			last = e
		}
	}
	if last == nil {
		t.c.log.Warn("github: a labelled issue shows no such label event; it starts nothing", "repo", repo, "issue", issue.GetNumber(), "label", label)
		return
	}
	if sender == nil {
		sender = last.GetActor()
	}
	if err := t.takeLabel(ctx, repo, issue, want, last.GetID(), sender); err != nil && ctx.Err() == nil {
		t.c.log.Warn("github: a label event starts nothing now", "repo", repo, "issue", issue.GetNumber(), "err", err)
	}
}

func (t *triggers) takeLabel(ctx context.Context, repo string, issue *gh.Issue, label string, event int64, who *gh.User) error {
	ev := IssueTrigger{Repo: repo, Issue: issue.GetNumber(), Title: issue.GetTitle(), Body: issue.GetBody(),
		Kind: TriggerLabel, Label: label, LabelEvent: event, Author: who.GetLogin(),
		Key: triggerLabelKey(repo, issue.GetNumber(), label, event)}
	return t.take(ctx, ev, who)
}

// issueEvents lists an issue's timeline events (oldest first).
func (t *triggers) issueEvents(ctx context.Context, owner, name string, issue int) ([]*gh.IssueEvent, error) {
	var all []*gh.IssueEvent
	opts := &gh.ListOptions{PerPage: perPage}
	for page := 0; page < maxPages; page++ {
		evs, resp, err := t.c.api.Issues.ListIssueEvents(ctx, owner, name, issue, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return all, nil
}

// take decides an event: a bot is ignored, a stranger is told once, and
// the event of someone allowed is handed to the handler; the comment that
// started a run gets 👀. An error (a permission lookup, the handler) says
// the event must be taken again: a poll reads it again.
func (t *triggers) take(ctx context.Context, ev IssueTrigger, who *gh.User) error {
	log := t.c.log.With("repo", ev.Repo, "issue", ev.Issue, "event", ev.Key)
	if who == nil || isBot(who) {
		log.Debug("github: an event of a bot starts nothing")
		return nil
	}
	owner, name, _ := strings.Cut(ev.Repo, "/")
	ok, err := t.c.allowed(ctx, owner, name, who.GetLogin(), t.allow, t.cfg.AllowOnly)
	if err != nil {
		return fmt.Errorf("who may start a run: %w", err)
	}
	if !ok {
		first, err := t.cfg.Handler.Refuse(ctx, ev)
		if err != nil {
			return fmt.Errorf("record a refused event: %w", err)
		}
		if first {
			log.Info("github: refused a run asked by someone who may not start one", "by", ev.Author)
			t.reply(ctx, ev, fmt.Sprintf("Thank you, @%s. Only people with write access to this repository (or on the orchestrator's allow list) can start a run; a maintainer can start it for you.", who.GetLogin()))
		}
		return nil
	}
	st, err := t.cfg.Handler.Start(ctx, ev)
	if err != nil {
		return fmt.Errorf("start a run: %w", err)
	}
	if st.Reply != "" {
		t.reply(ctx, ev, st.Reply)
	}
	if st.RunID == "" {
		return nil
	}
	log.Info("github: run started from an issue", "run", st.RunID, "by", ev.Author)
	if ev.Kind == TriggerComment {
		rctx, done := t.c.accepted(ctx) // started: its 👀 lands even if Close comes meanwhile
		if _, _, err := t.c.api.Reactions.CreateIssueCommentReaction(rctx, owner, name, ev.CommentID, "eyes"); err != nil {
			log.Warn("github: react 👀", "comment", ev.CommentID, "err", err)
		}
		done()
		return nil
	}
	t.reply(ctx, ev, fmt.Sprintf("👀 Run `%s` started for the label %q.", st.RunID, questions.Clean(ev.Label)))
	return nil
}

// reply posts text on the event's issue, once (its marker names the event).
func (t *triggers) reply(ctx context.Context, ev IssueTrigger, text string) {
	owner, name, _ := strings.Cut(ev.Repo, "/")
	marker := "<!-- orchestrator:trigger " + strings.ReplaceAll(ev.Key, "--", "") + " -->"
	if _, err := t.c.createComment(ctx, owner, name, ev.Issue, text+"\n\n"+marker, marker); err != nil {
		t.c.log.Warn("github: reply to an event", "repo", ev.Repo, "issue", ev.Issue, "event", ev.Key, "err", err)
	}
}

// allowed reports whether login may answer questions, and start runs, in
// owner/name: deny by default; write, maintain or admin permission, or
// the allowlist (allow, lower-case logins; with allowOnly, only it).
func (c *Client) allowed(ctx context.Context, owner, name, login string, allow map[string]bool, allowOnly bool) (bool, error) {
	if login == "" {
		return false, nil
	}
	if allow[strings.ToLower(login)] {
		return true, nil
	}
	if allowOnly {
		return false, nil
	}
	level, err := c.permission(ctx, owner, name, login)
	if err != nil {
		return false, err
	}
	switch level {
	case "admin", "maintain", "write":
		return true, nil
	}
	return false, nil
}

// triggerPoller polls one repository for triggering events.
type triggerPoller struct {
	t    *triggers
	repo string

	mu     sync.Mutex
	cursor time.Time         // since, for the next poll
	pages  map[string]string // URL → ETag of its last read
	idle   bool              // did not poll (not leading): read the cursor again
}

// triggerCursorKey names a repository's trigger cursor in Refs.
func triggerCursorKey(repo string) string { return "trigger-cursor/" + strings.ToLower(repo) }

// loadCursor reads the cursor from Refs, else starts it now (and records
// it, so that a restart before the first poll misses nothing).
func (tp *triggerPoller) loadCursor(ctx context.Context) error {
	c := tp.t.c
	if c.refs != nil {
		v, ok, err := c.refs.Ref(ctx, triggerCursorKey(tp.repo))
		if err != nil {
			return fmt.Errorf("github triggers: the poll cursor of %s: %w", tp.repo, err)
		}
		if ok {
			at, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return fmt.Errorf("github triggers: the poll cursor of %s is %q, not a time", tp.repo, v)
			}
			tp.cursor = at
			return nil
		}
	}
	tp.cursor = c.now().UTC().Truncate(time.Second)
	return tp.saveCursor(ctx, tp.cursor)
}

// resume reads the cursor again after a time of not polling: another
// instance polled meanwhile and moved it.
func (tp *triggerPoller) resume(ctx context.Context) error {
	if !tp.idle {
		return nil
	}
	if err := tp.loadCursor(ctx); err != nil {
		return err
	}
	tp.mu.Lock()
	tp.pages = map[string]string{}
	tp.mu.Unlock()
	tp.idle = false
	return nil
}

func (tp *triggerPoller) saveCursor(ctx context.Context, at time.Time) error {
	if tp.t.c.refs == nil {
		return nil
	}
	if err := tp.t.c.refs.SetRef(ctx, triggerCursorKey(tp.repo), at.UTC().Format(time.RFC3339)); err != nil {
		return fmt.Errorf("github triggers: record the poll cursor of %s: %w", tp.repo, err)
	}
	return nil
}

func (tp *triggerPoller) run() {
	c := tp.t.c
	defer c.wg.Done()
	for {
		if lead := tp.t.cfg.Leading; lead != nil && !lead() {
			tp.idle = true
		} else if err := tp.resume(c.ctx); err != nil && c.ctx.Err() == nil {
			c.log.Warn("github: read the poll cursor for runs asked in issues; trying again at the next poll", "repo", tp.repo, "err", err)
		} else if err := tp.poll(c.ctx); err != nil && c.ctx.Err() == nil {
			c.log.Warn("github: poll for runs asked in issues; trying again at the next poll", "repo", tp.repo, "err", err)
		}
		if err := c.sleep(c.ctx, c.interval); err != nil {
			return
		}
	}
}

// poll reads the comments and the labelled issues updated since the
// cursor, takes what starts runs, and moves the cursor to the server's
// time of the listing less the overlap (the events of the overlap are
// listed again, and recognised by their keys).
func (tp *triggerPoller) poll(ctx context.Context) error {
	owner, name, _ := strings.Cut(tp.repo, "/")
	tp.mu.Lock()
	since := tp.cursor
	tp.mu.Unlock()
	sinceQ := since.UTC().Format(time.RFC3339)
	var date time.Time
	// The ETags of the pages read are kept once every event on them was
	// taken: a page whose events failed is read whole again.
	etags := map[string]string{}
	comments, d, err := tp.list(ctx, etags, fmt.Sprintf("repos/%s/%s/issues/comments?sort=updated&direction=asc&per_page=%d&since=%s", owner, name, perPage, sinceQ), func() any { return &[]*gh.IssueComment{} })
	if err != nil {
		return fmt.Errorf("list comments since %s: %w", sinceQ, err)
	}
	date = d
	issues := map[int]*gh.Issue{}
	getIssue := func(n int) (*gh.Issue, error) {
		if is, ok := issues[n]; ok {
			return is, nil
		}
		is, _, err := tp.t.c.api.Issues.Get(ctx, owner, name, n)
		if err != nil {
			return nil, err
		}
		issues[n] = is
		return is, nil
	}
	for _, page := range comments {
		for _, cm := range *page.(*[]*gh.IssueComment) {
			// Only comments as they were created: an edited one starts
			// nothing (the webhook's "created" has the first words).
			if cm.GetCreatedAt().Before(since) || !cm.GetUpdatedAt().Equal(cm.GetCreatedAt()) {
				continue
			}
			if _, _, ok := ParseMention(cm.GetBody(), tp.t.of(tp.repo).mention); !ok {
				continue
			}
			n := issueNumber(cm.GetIssueURL())
			if n == 0 || strings.Contains(cm.GetHTMLURL(), "/pull/") {
				continue
			}
			is, err := getIssue(n)
			if err != nil {
				return fmt.Errorf("read issue %d: %w", n, err)
			}
			if err := tp.t.comment(ctx, tp.repo, is, cm); err != nil {
				return fmt.Errorf("comment %d: %w", cm.GetID(), err)
			}
		}
	}
	for _, label := range tp.t.of(tp.repo).list {
		pages, d, err := tp.list(ctx, etags, fmt.Sprintf("repos/%s/%s/issues?state=open&sort=updated&direction=asc&per_page=%d&labels=%s&since=%s",
			owner, name, perPage, url.QueryEscape(label), sinceQ), func() any { return &[]*gh.Issue{} })
		if err != nil {
			return fmt.Errorf("list issues labelled %q since %s: %w", label, sinceQ, err)
		}
		if date.IsZero() || (!d.IsZero() && d.Before(date)) {
			date = d
		}
		for _, page := range pages {
			for _, is := range *page.(*[]*gh.Issue) {
				if is.IsPullRequest() {
					continue
				}
				evs, err := tp.t.issueEvents(ctx, owner, name, is.GetNumber())
				if err != nil {
					return fmt.Errorf("read the events of issue %d: %w", is.GetNumber(), err)
				}
				for _, e := range evs {
					if e.GetEvent() != "labeled" || e.Label == nil || !strings.EqualFold(e.Label.GetName(), label) || e.GetCreatedAt().Before(since) {
						continue
					}
					if err := tp.t.takeLabel(ctx, tp.repo, is, label, e.GetID(), e.GetActor()); err != nil {
						return fmt.Errorf("label event %d: %w", e.GetID(), err)
					}
				}
			}
		}
	}
	tp.mu.Lock()
	for u, e := range etags {
		tp.pages[u] = e
	}
	tp.mu.Unlock()
	if date.IsZero() {
		return nil
	}
	next := date.Add(-overlap).UTC().Truncate(time.Second)
	if !next.After(since) {
		return nil
	}
	if err := tp.saveCursor(ctx, next); err != nil {
		return err
	}
	tp.mu.Lock()
	tp.cursor = next
	tp.pages = map[string]string{} // another since: other queries
	tp.mu.Unlock()
	return nil
}

// list reads every page of a listing; a page unchanged since its last
// read (304 to its ETag) gives nothing, as what it held was taken then.
// The ETags of the pages read go to etags. date is the server's time of
// the first page.
func (tp *triggerPoller) list(ctx context.Context, etags map[string]string, u string, newPage func() any) (pages []any, date time.Time, err error) {
	for page := 1; page <= maxPages; page++ {
		pu := u
		if page > 1 {
			pu += "&page=" + strconv.Itoa(page)
		}
		req, err := tp.t.c.api.NewRequest(http.MethodGet, pu, nil)
		if err != nil {
			return nil, date, err
		}
		tp.mu.Lock()
		etag := tp.pages[pu]
		tp.mu.Unlock()
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		out := newPage()
		resp, err := tp.t.c.api.Do(ctx, req, out)
		if page == 1 && resp != nil {
			date = serverTime(resp, tp.t.c.now())
		}
		if resp != nil && resp.StatusCode == http.StatusNotModified {
			if resp.NextPage == 0 && resp.Header.Get("Link") == "" {
				return pages, date, nil
			}
			continue
		}
		if err != nil {
			return nil, date, err
		}
		etags[pu] = resp.Header.Get("ETag")
		pages = append(pages, out)
		if resp.NextPage == 0 {
			return pages, date, nil
		}
	}
	return pages, date, nil
}
