// Package webstore implements the web inbox's Backend on top of the store:
// pending sets, runs, a run's timeline (its turns, what the CLI wrote in
// each turn's transcript, its questions and answers), answers and cancel.
//
// Answers go through Offerer. The default, StoreOfferer, hands them to the
// store's Offer, the one path every surface's answers take: validated, the
// first valid answer wins in one transaction.
package webstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/internal/web"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// Offerer decides an offered answer (the surfaces' Answers contract).
type Offerer interface {
	Offer(ctx context.Context, resp questions.Response) (web.Decision, error)
}

// Backend is web.Backend on a store.
type Backend struct {
	Store *store.Store
	// Offerer defaults to StoreOfferer{Store}.
	Offerer Offerer
	// MaxRuns bounds the runs listed; default 500.
	MaxRuns int
	// IssueURL, when set, finds the address of the GitHub issue a run's
	// questions are asked in ("" when it has none). A run page links it,
	// next to the pull request of the run's delivery.
	IssueURL func(ctx context.Context, runID string) (string, error)

	// What IssueURL said, per run: an address is kept, a miss is asked
	// again after issueRetry (the live page reads the run twice a second).
	issueMu sync.Mutex
	issues  map[string]issueLookup

	// A live run page reads the run twice a second: what was read of each
	// transcript is kept while the file does not change.
	mu    sync.Mutex
	cache map[string]cachedTranscript
}

type issueLookup struct {
	url string
	at  time.Time
}

// issueRetry is how long a run without an issue address waits before it is
// looked up again.
const issueRetry = time.Minute

// links are a run's links: the GitHub issue its questions are asked in and
// the pull request of its delivery. A link that cannot be found is left out:
// the page is still worth showing.
func (b *Backend) links(ctx context.Context, runID string) []web.Link {
	var out []web.Link
	if u := b.issueURL(ctx, runID); u != "" {
		out = append(out, web.Link{Label: "GitHub issue", URL: u})
	}
	if d, ok, err := b.Store.Delivery(ctx, runID); err == nil && ok && webURL(d.PRURL) {
		label := "pull request"
		if d.PRNumber > 0 {
			label = fmt.Sprintf("pull request #%d", d.PRNumber)
		}
		out = append(out, web.Link{Label: label, URL: d.PRURL})
	}
	return out
}

func (b *Backend) issueURL(ctx context.Context, runID string) string {
	if b.IssueURL == nil {
		return ""
	}
	b.issueMu.Lock()
	l, ok := b.issues[runID]
	b.issueMu.Unlock()
	if ok && (l.url != "" || time.Since(l.at) < issueRetry) {
		return l.url
	}
	u, err := b.IssueURL(ctx, runID)
	if err != nil || !webURL(u) {
		u = ""
	}
	b.issueMu.Lock()
	defer b.issueMu.Unlock()
	if b.issues == nil {
		b.issues = make(map[string]issueLookup)
	}
	if len(b.issues) >= maxCached {
		clear(b.issues)
	}
	b.issues[runID] = issueLookup{url: u, at: time.Now()}
	return u
}

// webURL reports whether u is an absolute http(s) address, the only kind a
// run page links.
func webURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "https" || p.Scheme == "http") && p.Host != ""
}

type cachedTranscript struct {
	size  int64
	mod   time.Time
	items []web.Item
}

// maxCached bounds the transcripts whose timeline items are kept.
const maxCached = 256

func (b *Backend) transcriptItems(path string, seq int) []web.Item {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	c, ok := b.cache[path]
	b.mu.Unlock()
	if ok && c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
		return c.items
	}
	items := transcriptItems(path, seq)
	b.mu.Lock()
	if b.cache == nil || len(b.cache) >= maxCached {
		b.cache = map[string]cachedTranscript{}
	}
	b.cache[path] = cachedTranscript{size: fi.Size(), mod: fi.ModTime(), items: items}
	b.mu.Unlock()
	return items
}

var _ web.Backend = (*Backend)(nil)

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", web.ErrNotFound, err)
	}
	return err
}

// Pending implements web.Backend.
func (b *Backend) Pending(ctx context.Context) ([]web.Pending, error) {
	sets, err := b.Store.QuestionSets(ctx, store.SetFilter{State: []store.SetState{store.SetPending}})
	if err != nil {
		return nil, err
	}
	out := make([]web.Pending, 0, len(sets))
	runs := map[string]store.Run{}
	for _, rec := range sets {
		run, ok := runs[rec.Set.RunID]
		if !ok {
			if run, err = b.Store.Run(ctx, rec.Set.RunID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			runs[rec.Set.RunID] = run
		}
		n := 0
		if !rec.RemindedAt.IsZero() {
			n++
		}
		if !rec.EscalatedAt.IsZero() {
			n++
		}
		out = append(out, web.Pending{Set: rec.Set, Spec: run.Spec, RunTitle: run.Title, Surfaces: rec.Surfaces,
			AskedAt: rec.CreatedAt, Reminders: n, Given: rec.Response})
	}
	withGroups(out)
	return out, nil
}

func (b *Backend) toRun(ctx context.Context, r store.Run) (web.Run, []store.Turn, error) {
	turns, err := b.Store.Turns(ctx, r.ID)
	if err != nil {
		return web.Run{}, nil, err
	}
	return web.Run{ID: r.ID, Spec: r.Spec, Title: r.Title, Status: string(r.Status), WorkDir: r.WorkDir, Surfaces: r.Surfaces,
		SessionID: r.SessionID, FinalText: r.FinalText, CostUSD: r.CostUSD,
		Turns: len(turns), Error: r.Error, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, turns, nil
}

// Runs implements web.Backend.
func (b *Backend) Runs(ctx context.Context) ([]web.Run, error) {
	max := b.MaxRuns
	if max <= 0 {
		max = 500
	}
	runs, err := b.Store.ListRuns(ctx, store.RunFilter{Limit: max})
	if err != nil {
		return nil, err
	}
	out := make([]web.Run, 0, len(runs))
	for _, r := range runs {
		wr, _, err := b.toRun(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, wr)
	}
	return out, nil
}

// Run implements web.Backend.
func (b *Backend) Run(ctx context.Context, id string) (web.RunDetail, error) {
	r, err := b.Store.Run(ctx, id)
	if err != nil {
		return web.RunDetail{}, notFound(err)
	}
	wr, turns, err := b.toRun(ctx, r)
	if err != nil {
		return web.RunDetail{}, err
	}
	sets, err := b.Store.QuestionSets(ctx, store.SetFilter{RunID: r.ID})
	if err != nil {
		return web.RunDetail{}, err
	}
	d := web.RunDetail{Run: wr, Links: b.links(ctx, r.ID)}
	bySeq := map[int][]store.SetRecord{}
	for _, s := range sets {
		bySeq[s.Set.Turn] = append(bySeq[s.Set.Turn], s)
	}
	for _, t := range turns {
		// A transcript gc removed (retention.transcripts) is not offered.
		_, serr := os.Stat(t.TranscriptPath)
		d.Items = append(d.Items, web.Item{Kind: web.ItemTurn, Turn: t.Seq, At: t.StartedAt, Text: string(t.Kind), Transcript: t.TranscriptPath != "" && serr == nil})
		if t.TranscriptPath != "" {
			d.Items = append(d.Items, b.transcriptItems(t.TranscriptPath, t.Seq)...)
		}
		if t.Finished {
			text := string(t.Result.Status)
			if t.Result.Error != "" {
				text += ": " + t.Result.Error
			}
			d.Items = append(d.Items, web.Item{Kind: web.ItemResult, Turn: t.Seq, At: t.FinishedAt, Text: text, CostUSD: t.Result.CostUSD})
		}
		for _, s := range bySeq[t.Seq] {
			set := s.Set
			d.Items = append(d.Items, web.Item{Kind: web.ItemQuestion, Turn: t.Seq, At: s.CreatedAt, Set: &set})
			if len(s.Response.Answers) > 0 {
				resp := s.Response
				d.Items = append(d.Items, web.Item{Kind: web.ItemAnswer, Turn: t.Seq, At: s.AnsweredAt, Set: &set, Response: &resp})
			}
		}
	}
	// The decision log is the store's, as `show` and the pull request have it.
	log, err := b.Store.DecisionLog(ctx, r.ID)
	if err != nil {
		return web.RunDetail{}, err
	}
	for _, dc := range log {
		e := web.DecisionEntry{SetID: dc.SetID, Question: dc.Question, Header: dc.Header, State: string(dc.State), Answer: dc.Answer}
		if dc.Answer != "" {
			e.By, e.Surface, e.At = dc.By, dc.Surface, dc.AnsweredAt
		}
		d.Decisions = append(d.Decisions, e)
	}
	return d, nil
}

// maxToolInput bounds a tool use's input shown in the timeline.
const maxToolInput = 400

// transcriptItems reads what the model wrote and which tools it used from a
// turn's transcript, as far as it is written (a turn still streaming has a
// partial transcript; an unreadable one adds nothing).
func transcriptItems(path string, seq int) []web.Item {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []web.Item
	var p executor.Parser
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		ev, err := p.ParseLine(sc.Bytes())
		if err != nil {
			continue
		}
		m, ok := ev.(*executor.AssistantMessage)
		if !ok {
			continue
		}
		for _, t := range m.Texts() {
			if strings.TrimSpace(t) != "" {
				out = append(out, web.Item{Kind: web.ItemText, Turn: seq, Text: t})
			}
		}
		for _, u := range m.ToolUses() {
			in := compact(u.Input)
			if len(in) > maxToolInput {
				in = strings.ToValidUTF8(in[:maxToolInput], "") + "…"
			}
			out = append(out, web.Item{Kind: web.ItemTool, Turn: seq, Tool: u.ToolName, Text: in})
		}
	}
	return out
}

func compact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Offer implements web.Backend.
func (b *Backend) Offer(ctx context.Context, resp questions.Response) (web.Decision, error) {
	o := b.Offerer
	if o == nil {
		o = StoreOfferer{Store: b.Store}
	}
	return o.Offer(ctx, resp)
}

var _ web.GroupOfferer = (*Backend)(nil)

// withGroups fills each pending set's Group with the other pending sets of
// its fingerprint among list (all of them: no read more), other runs only,
// at most questions.GroupShown (GroupMore when there are more).
func withGroups(list []web.Pending) {
	byFP := map[string][]int{}
	for i, p := range list {
		if fp := questions.Fingerprint(p.Set); fp != "" {
			byFP[fp] = append(byFP[fp], i)
		}
	}
	for _, idx := range byFP {
		for _, i := range idx {
			for _, j := range idx {
				if list[j].Set.RunID == list[i].Set.RunID {
					continue
				}
				if len(list[i].Set.Group) == questions.GroupShown {
					list[i].Set.GroupMore = true
					break
				}
				list[i].Set.Group = append(list[i].Set.Group, questions.GroupRun{SetID: list[j].Set.ID, RunID: list[j].Set.RunID,
					Spec: list[j].Spec, Title: list[j].RunTitle})
			}
		}
	}
}

// OfferGroup implements web.GroupOfferer: the group as the store has it
// now, answered in one transaction (store.AnswerGroup).
func (b *Backend) OfferGroup(ctx context.Context, resp questions.Response) (questions.GroupDecision, error) {
	group, err := b.Store.Group(ctx, resp.SetID, 0)
	if errors.Is(err, store.ErrNotFound) {
		return questions.GroupDecision{}, notFound(err)
	}
	if err != nil {
		return questions.GroupDecision{}, err
	}
	others := make([]string, len(group))
	for i, g := range group {
		others[i] = g.SetID
	}
	return b.Store.AnswerGroup(ctx, resp, others)
}

// StoreOfferer decides answers the way every surface's answers are decided:
// through the store's Offer, which validates, keeps a partial answer while
// the set stays pending, and lets the first valid answer win in one
// transaction.
type StoreOfferer struct{ Store *store.Store }

// Offer implements Offerer.
func (s StoreOfferer) Offer(ctx context.Context, resp questions.Response) (web.Decision, error) {
	d, err := s.Store.Offer(ctx, resp)
	if err != nil {
		return web.Decision{}, err
	}
	if errors.Is(d.Invalid, store.ErrNotFound) {
		return web.Decision{}, notFound(d.Invalid)
	}
	return web.Decision{Taken: d.Taken, Invalid: d.Invalid, Final: d.Final, Closed: d.Closed}, nil
}

// Cancel implements web.Backend.
func (b *Backend) Cancel(ctx context.Context, runID, by string) error {
	r, err := b.Store.Run(ctx, runID)
	if err != nil {
		return notFound(err)
	}
	if r.Status.Final() {
		return fmt.Errorf("run %s is %w (%s)", r.ID, web.ErrFinal, r.Status)
	}
	return b.Store.CancelRun(ctx, r.ID, "cancelled by "+by+" on the web")
}

// Transcript implements web.Backend.
func (b *Backend) Transcript(ctx context.Context, runID string, seq int) (io.ReadCloser, error) {
	turns, err := b.Store.Turns(ctx, runID)
	if err != nil {
		return nil, notFound(err)
	}
	for _, t := range turns {
		if t.Seq == seq && t.TranscriptPath != "" {
			f, err := os.Open(t.TranscriptPath)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", web.ErrNotFound, err)
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("turn %d of run %s: %w", seq, runID, web.ErrNotFound)
}
