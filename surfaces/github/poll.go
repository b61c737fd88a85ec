package github

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// waiter is one Ask taking answers.
type waiter struct {
	s       *Surface
	p       *poller
	set     questions.Set
	answers surfaces.Answers
	issue   int
	afterID int64 // answers are comments after this one (the last question part)

	once sync.Once
	done chan struct{} // closed when the set is closed, or on a fatal error
	err  error
}

func (w *waiter) finish(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.done)
	})
}

// poller watches the issue comments of one repository while questions wait:
// one request per interval, whatever the number of waiters.
type poller struct {
	c           *Client
	owner, name string

	mu      sync.Mutex
	id      int64 // the repository's ID, once learnt: webhooks name a renamed repository by it
	waiters map[*waiter]bool
	watched map[string]*waiter // the sets of Watch, by Surface.key
	// released is the cursor when a set's waiter went, by Surface.key:
	// every comment before it was read while the set was watched (a
	// cache, bounded).
	released map[string]time.Time
	// base is the cursor recorded in Refs when it was first needed
	// (loaded): up to it, every comment was read before this process.
	base       time.Time
	baseLoaded bool
	saved      time.Time // the cursor last recorded in Refs
	running    bool
	kicked     bool               // PollNow: poll without waiting out the interval
	wake       context.CancelFunc // ends the wait between polls, while one is on
	cursor     time.Time          // since, for the next poll
	// pages is what the last read of each page of the listing since
	// pagesSince said, by URL: its ETag for a conditional request, and
	// enough to go on past it when it answers 304 Not Modified.
	pages      map[string]listedPage
	pagesSince time.Time

	proc   sync.Mutex          // serialises handling comments
	issues map[int]*issueState // by issue, while sets wait there (guarded by proc)
	ghosts []*ghost            // sets closed without an answer, watched a while (guarded by proc)
}

// issueState is what the poller knows of an issue where sets wait. It goes
// when the last Ask on the issue ends.
type issueState struct {
	sets     map[string]*threadSet      // the question sets asked there, by escaped ID
	notified map[string]bool            // notices posted
	retry    map[int64]*gh.IssueComment // comments to read again (a lookup failed)
	gone     map[string]bool            // sets the ledger says no longer wait
	openNow  map[string]bool            // sets the ledger says wait, during one handle
	indexed  bool                       // the sets Refs record waiting here are known
}

// threadSet is a question set as its question comments on the issue show
// it.
type threadSet struct {
	id      string   // unescaped
	qids    []string // its question IDs; nil if its marker predates them
	afterID int64    // its last question comment: answers come after
	// closedBy is the comment whose answer closed it, -1 if it was closed
	// elsewhere (the comment shows an answer from another surface), 0 while
	// it shows no answer.
	closedBy int64
	// dead: closed without an answer (cancelled, timed out).
	dead bool
	body string // its first question comment, for quotes
}

// openAt reports whether the set was waiting when comment id was posted.
func (t *threadSet) openAt(id int64) bool {
	return id > t.afterID && (t.closedBy == 0 || t.closedBy >= id)
}

// poller returns the repository's poller, creating it.
func (c *Client) poller(owner, name string) *poller {
	key := strings.ToLower(owner + "/" + name)
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pollers[key]
	if !ok {
		p = &poller{c: c, owner: owner, name: name, waiters: make(map[*waiter]bool),
			watched: make(map[string]*waiter), released: make(map[string]time.Time),
			issues: make(map[int]*issueState)}
		c.pollers[key] = p
	}
	return p
}

// learnID learns the repository's ID, once: a webhook delivery names the
// repository as it is called now, which after a rename is not the name
// the surface was configured with, but its ID stays.
func (p *poller) learnID(ctx context.Context) {
	p.mu.Lock()
	known := p.id != 0
	p.mu.Unlock()
	if known {
		return
	}
	r, _, err := p.c.api.Repositories.Get(ctx, p.owner, p.name)
	if err != nil {
		if ctx.Err() == nil {
			p.c.log.Info("github: could not read the repository's ID (webhook deliveries after a rename are matched by it); trying again at the next poll",
				"repo", p.owner+"/"+p.name, "err", err)
		}
		return
	}
	p.mu.Lock()
	p.id = r.GetID()
	p.mu.Unlock()
}

// pollerByID returns the poller of the repository whose ID is id, if it
// exists and has learnt its ID.
func (c *Client) pollerByID(id int64) *poller {
	if id == 0 {
		return nil
	}
	c.mu.Lock()
	ps := make([]*poller, 0, len(c.pollers))
	for _, p := range c.pollers {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	for _, p := range ps {
		p.mu.Lock()
		same := p.id == id
		p.mu.Unlock()
		if same {
			return p
		}
	}
	return nil
}

// lookupPoller returns the repository's poller if it exists.
func (c *Client) lookupPoller(fullName string) *poller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pollers[strings.ToLower(fullName)]
}

// add registers w; comments updated since since will be polled for it.
func (p *poller) add(w *waiter, since time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiters[w] = true
	if p.cursor.IsZero() || since.Before(p.cursor) {
		p.cursor = since.UTC().Truncate(time.Second)
	}
	if !p.running {
		p.running = true
		p.c.wg.Add(1)
		go p.run()
	}
}

// remove unregisters w; the issue's state goes with the last waiter on it.
func (p *poller) remove(w *waiter) {
	p.proc.Lock()
	defer p.proc.Unlock()
	p.mu.Lock()
	if p.waiters[w] {
		key := w.s.key(w.set.ID)
		evict(p.released, key)
		p.released[key] = p.cursor
	}
	delete(p.waiters, w)
	last := true
	for o := range p.waiters {
		if o.issue == w.issue {
			last = false
		}
	}
	for _, o := range p.watched { // registered, or about to be
		if o.issue == w.issue && o != w {
			last = false
		}
	}
	p.mu.Unlock()
	if last && len(p.ghostsFor(w.issue)) == 0 {
		delete(p.issues, w.issue)
	}
}

// watchedSet returns the waiter of the Watch of the set of key, nil if
// it is not watched.
func (p *poller) watchedSet(key string) *waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.watched[key]
}

// watch records w as the Watch of the set of key.
func (p *poller) watch(key string, w *waiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watched[key] = w
}

// unwatch forgets the Watch of the set of key and returns its waiter (nil
// if none).
func (p *poller) unwatch(key string) *waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.watched[key]
	delete(p.watched, key)
	return w
}

// forget lets go of what the issue's state keeps of a set no longer
// watched, once it is closed (an open set still matters to the replies of
// others).
func (p *poller) forget(issue int, setID string) {
	p.proc.Lock()
	defer p.proc.Unlock()
	if st := p.issues[issue]; st != nil {
		if t := st.sets[markerValue(setID)]; t != nil && t.closedBy != 0 {
			delete(st.sets, markerValue(setID))
		}
	}
}

// seed tells the issue's state of set, asked there as a says, and of the
// sets Refs record waiting there: what the question comments would say were
// the issue read.
func (p *poller) seed(ctx context.Context, issue int, set questions.Set, a *asked) error {
	p.proc.Lock()
	defer p.proc.Unlock()
	st := p.issue(issue)
	if p.c.refs != nil && !st.indexed {
		es, err := p.c.waitingOn(ctx, p.owner+"/"+p.name, issue)
		if err != nil {
			return err
		}
		for _, e := range es {
			if st.sets[markerValue(e.ID)] == nil {
				st.sets[markerValue(e.ID)] = &threadSet{id: e.ID, qids: e.QIDs, afterID: e.After}
			}
		}
		st.indexed = true
	}
	t := st.sets[markerValue(set.ID)]
	if t == nil {
		t = &threadSet{id: set.ID}
		st.sets[markerValue(set.ID)] = t
	}
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	t.qids = questionIDs(set)
	t.afterID = max(t.afterID, a.partIDs[len(a.partIDs)-1])
	if t.body == "" && len(a.bodies) > 0 {
		t.body = a.bodies[0]
	}
	if a.answered && t.closedBy == 0 {
		t.closedBy = a.answerID
		if t.closedBy == 0 {
			t.closedBy = -1
		}
	}
	return nil
}

// sinceFor returns where the poller must read the replies to a set asked
// at, found by its record (Refs) rather than on its issue: from when it
// was asked, or from when every comment was read while it was watched (by
// this process, or by the one before: the cursor recorded in Refs).
func (p *poller) sinceFor(ctx context.Context, key string, at time.Time) (time.Time, error) {
	since := at.Add(-overlap)
	p.mu.Lock()
	rel, released := p.released[key]
	loaded, base := p.baseLoaded, p.base
	p.mu.Unlock()
	if released {
		if rel.After(since) {
			since = rel
		}
		return since, nil
	}
	if !loaded {
		v, ok, err := p.c.refs.Ref(ctx, cursorRefKey(p.owner+"/"+p.name))
		if err != nil {
			return time.Time{}, fmt.Errorf("read the poll cursor of %s/%s: %w", p.owner, p.name, err)
		}
		if ok {
			if base, err = time.Parse(time.RFC3339, v); err != nil {
				return time.Time{}, fmt.Errorf("the poll cursor of %s/%s is recorded as %q, not a time", p.owner, p.name, v)
			}
		}
		p.mu.Lock()
		if !p.baseLoaded {
			p.base, p.baseLoaded, p.saved = base, true, base
		}
		base = p.base
		p.mu.Unlock()
	}
	if base.After(since) {
		since = base
	}
	return since, nil
}

// saveCursor records the cursor in Refs once it moved, short of the
// comments left to read again: the first poll after a restart starts
// there.
func (p *poller) saveCursor(ctx context.Context) {
	if p.c.refs == nil {
		return
	}
	p.mu.Lock()
	cur, saved := p.cursor, p.saved
	p.mu.Unlock()
	p.proc.Lock()
	for _, st := range p.issues {
		for _, c := range st.retry {
			if t := c.GetUpdatedAt().Add(-overlap).UTC().Truncate(time.Second); t.Before(cur) {
				cur = t
			}
		}
	}
	p.proc.Unlock()
	if cur.IsZero() || !cur.After(saved) {
		return
	}
	if err := p.c.refs.SetRef(ctx, cursorRefKey(p.owner+"/"+p.name), cur.UTC().Format(time.RFC3339)); err != nil {
		p.c.log.Warn("github: record the poll cursor", "repo", p.owner+"/"+p.name, "err", err)
		return
	}
	p.mu.Lock()
	p.saved = cur
	p.mu.Unlock()
}

// issue returns the state of issue n, creating it. p.proc is held.
func (p *poller) issue(n int) *issueState {
	st := p.issues[n]
	if st == nil {
		st = &issueState{sets: make(map[string]*threadSet), notified: make(map[string]bool), retry: make(map[int64]*gh.IssueComment),
			gone: make(map[string]bool), openNow: make(map[string]bool)}
		p.issues[n] = st
	}
	return st
}

// closed records that setID, asked on issue, was closed by comment
// answerID (0: elsewhere).
func (p *poller) closed(issue int, setID string, answerID int64) {
	p.proc.Lock()
	defer p.proc.Unlock()
	if st := p.issues[issue]; st != nil {
		if t := st.sets[markerValue(setID)]; t != nil && t.closedBy == 0 {
			t.closedBy = answerID
			if answerID == 0 {
				t.closedBy = -1
			}
		}
	}
}

// waitersFor returns the waiters on issue that still wait.
func (p *poller) waitersFor(issue int) []*waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ws []*waiter
	for w := range p.waiters {
		if w.issue == issue && !w.finished() {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *waiter) int { return cmp.Compare(a.afterID, b.afterID) })
	return ws
}

func (w *waiter) finished() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// run polls every interval while there are waiters.
func (p *poller) run() {
	defer p.c.wg.Done()
	ctx := p.c.ctx
	p.learnID(ctx)
	for {
		if err := p.pause(ctx); err != nil {
			p.stop()
			return
		}
		watching := p.watching()
		p.mu.Lock()
		if len(p.waiters) == 0 && !watching {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.learnID(ctx)
		err := p.poll(ctx)
		switch {
		case err == nil:
			p.c.pollServed(p.owner + "/" + p.name)
		case ctx.Err() != nil:
		case refusedPoll(err):
			// Refused until someone acts: unhealthy, one error an hour,
			// not a warning every interval.
			p.c.pollRefused(p.owner+"/"+p.name, err)
			if fatal(err) {
				p.failAll(err)
			}
		default:
			p.c.log.Warn("github: poll failed", "repo", p.owner+"/"+p.name, "err", err)
		}
	}
}

// pause waits out the interval between two polls, or less when kicked
// (PollNow). It fails only when ctx ends.
func (p *poller) pause(ctx context.Context) error {
	p.mu.Lock()
	if p.kicked {
		p.kicked = false
		p.mu.Unlock()
		return ctx.Err()
	}
	wctx, wake := context.WithCancel(ctx)
	defer wake()
	p.wake = wake
	p.mu.Unlock()
	_ = p.c.sleep(wctx, p.c.interval)
	p.mu.Lock()
	p.wake, p.kicked = nil, false
	p.mu.Unlock()
	return ctx.Err()
}

// kick makes the running poller poll at once, if an Ask waits on issue
// (any issue: 0). Kicks while a poll is on are folded into one poll after
// it: that poll lists whatever came in meanwhile.
func (p *poller) kick(issue int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return
	}
	waits := issue == 0
	for w := range p.waiters {
		waits = waits || w.issue == issue
	}
	if !waits {
		return
	}
	p.kicked = true
	if p.wake != nil {
		p.wake()
	}
}

func (p *poller) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = false
}

// fatal reports whether a poll error will not go away by itself: bad
// credentials, or a repository that is not there.
func fatal(err error) bool {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusUnauthorized, http.StatusNotFound:
			return true
		}
	}
	return false
}

func (p *poller) failAll(err error) {
	p.mu.Lock()
	ws := make([]*waiter, 0, len(p.waiters))
	for w := range p.waiters {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		w.finish(fmt.Errorf("github: wait for an answer to %s in %s/%s: %w", w.set.ID, p.owner, p.name, err))
	}
}

// listedPage is what one page of the comments listing said when it was
// last read.
type listedPage struct {
	etag   string
	next   bool      // a page came after it (Link rel="next"), or it was full
	newest time.Time // the newest updated_at on it
}

// perPage is the most comments GitHub lists on a page.
const perPage = 100

// maxPages bounds the pages one poll reads.
const maxPages = 50

// poll lists the repository's comments updated since the cursor and hands
// them to the waiters of their issues. Each page is a conditional request
// of its own: GitHub lists the oldest first (sort=updated, direction=asc),
// so with more than a page of comments since the cursor, an unchanged
// first page (304) says nothing of the pages after it, which are read
// too, each answering 304 while it has not changed. The cursor then moves
// past what the full pages hold (newest - overlap), so that the listing
// shrinks again.
func (p *poller) poll(ctx context.Context) error {
	p.mu.Lock()
	since := p.cursor
	if p.pages == nil || !since.Equal(p.pagesSince) {
		p.pages, p.pagesSince = make(map[string]listedPage), since
	}
	pages := p.pages
	p.mu.Unlock()

	u := fmt.Sprintf("repos/%s/%s/issues/comments?sort=updated&direction=asc&per_page=%d&since=%s",
		p.owner, p.name, perPage, since.UTC().Format(time.RFC3339))
	var all []*gh.IssueComment
	newest := since
	read := 0          // pages listed (200 or 304)
	var date time.Time // the server's time of the first page
	complete := false  // every page was read
	for page := 1; page <= maxPages; page++ {
		pu := u
		if page > 1 {
			pu += "&page=" + strconv.Itoa(page)
		}
		req, err := p.c.api.NewRequest(http.MethodGet, pu, nil)
		if err != nil {
			return err
		}
		p.mu.Lock()
		last, known := pages[pu]
		p.mu.Unlock()
		if known && last.etag != "" {
			req.Header.Set("If-None-Match", last.etag)
		}
		var cs []*gh.IssueComment
		resp, err := p.c.api.Do(ctx, req, &cs)
		read++
		if page == 1 && resp != nil {
			date = serverTime(resp, p.c.now())
		}
		if known && resp != nil && resp.StatusCode == http.StatusNotModified {
			// Unchanged since it was read: its comments were handled
			// then. The pages after it may have changed.
			if last.newest.After(newest) {
				newest = last.newest
			}
			if !last.next {
				complete = true
				break
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("list comments since %s (page %d): %w", since.Format(time.RFC3339), page, err)
		}
		lp := listedPage{etag: resp.Header.Get("ETag"), next: resp.NextPage != 0 || len(cs) >= perPage}
		for _, c := range cs {
			if t := c.GetUpdatedAt().Time; t.After(lp.newest) {
				lp.newest = t
			}
		}
		if lp.newest.After(newest) {
			newest = lp.newest
		}
		p.mu.Lock()
		if p.pagesSince.Equal(since) {
			p.pages[pu] = lp
		}
		p.mu.Unlock()
		all = append(all, cs...)
		if !lp.next {
			complete = true
			break
		}
	}

	byIssue := make(map[int][]*gh.IssueComment)
	var issues []int
	for _, c := range all {
		n := issueNumber(c.GetIssueURL())
		if n == 0 {
			continue
		}
		if _, ok := byIssue[n]; !ok {
			issues = append(issues, n)
		}
		byIssue[n] = append(byIssue[n], c)
	}
	p.mu.Lock()
	// The cursor moves in steps: each move changes the query, so the next
	// poll cannot be conditional; a few minutes of comments listed again
	// cost less than that. Past a full page it moves as soon as it can:
	// every page costs a request each poll. Every page read, it can move
	// a step up to the time of the listing (less the overlap) even though
	// nothing newer was listed: the pages of a thousand questions asked at
	// once are not read again and again, nor after a restart.
	next := newest.Add(-overlap).UTC().Truncate(time.Second)
	if byDate := date.Add(-overlap).UTC().Truncate(time.Second); read > 1 && complete && byDate.After(next) && byDate.Sub(p.cursor) >= cursorStep {
		next = byDate
	}
	if step := next.Sub(p.cursor); since.Equal(p.cursor) && (step >= cursorStep || (read > 1 && step > 0)) {
		p.cursor = next
	}
	p.mu.Unlock()
	p.proc.Lock()
	for n, st := range p.issues {
		if _, ok := byIssue[n]; !ok && len(st.retry) > 0 {
			issues = append(issues, n)
		}
	}
	p.proc.Unlock()
	for _, n := range issues {
		p.handle(ctx, n, byIssue[n])
	}
	p.saveCursor(ctx)
	return nil
}

// issueNumber is the number at the end of an issue API URL.
func issueNumber(issueURL string) int {
	i := strings.LastIndexByte(issueURL, '/')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(issueURL[i+1:])
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// deleted posts again the set whose question comment id was deleted, if
// one waits here.
func (p *poller) deleted(ctx context.Context, id int64) {
	p.mu.Lock()
	ws := make([]*waiter, 0, len(p.waiters))
	for w := range p.waiters {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		a := p.c.askedInfo(w.s.key(w.set.ID))
		if a == nil || w.finished() {
			continue
		}
		p.c.mu.Lock()
		mine := slices.Contains(a.partIDs, id)
		p.c.mu.Unlock()
		if !mine {
			continue
		}
		actx, done := p.c.ackContext(ctx)
		if err := w.s.repost(actx, w.set, a); err != nil {
			p.c.log.Warn("github: post a deleted question again", "set", w.set.ID, "err", err)
		}
		done()
		return
	}
}
