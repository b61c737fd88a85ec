package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// feedReader follows the set feed as a watcher would: from a position,
// a page at a time.
type feedReader struct {
	t    *testing.T
	s    *Store
	pos  int64
	page int
	seen map[string]SetChange // the last change read of each set
}

func newFeedReader(t *testing.T, s *Store, page int) *feedReader {
	t.Helper()
	head, err := s.SetFeedHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &feedReader{t: t, s: s, pos: head, page: page, seen: map[string]SetChange{}}
}

// next reads the feed above the reader's position to its end and returns
// what it read, checking that positions rise.
func (r *feedReader) next() []SetChange {
	r.t.Helper()
	var out []SetChange
	for {
		page, err := r.s.SetFeed(context.Background(), r.pos, r.page)
		if err != nil {
			r.t.Error(err) // next may run in a goroutine of its own
			return out
		}
		for _, c := range page {
			if c.Seq <= r.pos {
				r.t.Errorf("feed position %d after %d (%+v)", c.Seq, r.pos, c)
				return out
			}
			r.pos = c.Seq
			r.seen[c.SetID] = c
		}
		out = append(out, page...)
		if len(page) < r.page {
			return out
		}
	}
}

// expect reads the feed and checks that the set is in it as want says.
func (r *feedReader) expect(what, setID string, state SetState, status RunStatus) {
	r.t.Helper()
	for _, c := range r.next() {
		if c.SetID == setID {
			if c.State != state || c.RunStatus != status {
				r.t.Fatalf("%s: the feed has %s as %s of a %s run; want %s of a %s run", what, setID, c.State, c.RunStatus, state, status)
			}
			return
		}
	}
	r.t.Fatalf("%s: set %s is not in the feed", what, setID)
}

// TestSetFeedReportsEveryChange: every kind of change of a set — made,
// answered in part and in whole, claimed, given back, resumed, expired —
// and every change of its run's status, moves the set up the feed, with
// its state and its run's status as they then are.
func TestSetFeedReportsEveryChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	if head, err := s.SetFeedHead(ctx); err != nil || head != 0 {
		t.Fatalf("head of an empty store = %d, %v", head, err)
	}
	r := newFeedReader(t, s, 2)

	if _, err := s.CreateRun(ctx, Run{ID: "r1", Spec: "nightly", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	turn, err := s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnStart, Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	set := testSet("r1", turn.Seq, "qa", "qb")
	if err := s.FinishTurn(ctx, "r1", turn.Seq, TurnResult{Status: "success"}, &set, nil); err != nil {
		t.Fatal(err)
	}
	r.expect("FinishTurn asking", set.ID, SetPending, RunWaiting)
	if c := r.seen[set.ID]; c.RunID != "r1" || c.Spec != "nightly" {
		t.Fatalf("feed row %+v", c)
	}
	if d, err := s.Offer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil || !d.Taken {
		t.Fatalf("partial answer: %+v, %v", d, err)
	}
	r.expect("a partial answer", set.ID, SetPending, RunWaiting)
	if _, err := s.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "bob", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qb", Labels: []string{"B"}}}}); err != nil {
		t.Fatal(err)
	}
	r.expect("the last answer", set.ID, SetAnswered, RunWaiting)
	turn, err = s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID, Prompt: "answers"})
	if err != nil {
		t.Fatal(err)
	}
	r.expect("a claim", set.ID, SetResuming, RunRunning)
	if err := s.AbandonTurn(ctx, "r1", turn.Seq); err != nil {
		t.Fatal(err)
	}
	r.expect("a turn abandoned", set.ID, SetAnswered, RunRunning)
	turn, err = s.BeginTurn(ctx, Turn{RunID: "r1", Kind: TurnAnswer, SetID: set.ID, Prompt: "answers"})
	if err != nil {
		t.Fatal(err)
	}
	r.next()
	set2 := testSet("r1", turn.Seq, "qc")
	if err := s.FinishTurn(ctx, "r1", turn.Seq, TurnResult{Status: "success"}, &set2, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]SetChange{}
	for _, c := range r.next() {
		got[c.SetID] = c
	}
	if c := got[set.ID]; c.State != SetResumed || c.RunStatus != RunWaiting {
		t.Fatalf("the answer turn finished: %+v in %+v", c, got)
	}
	if c := got[set2.ID]; c.State != SetPending || c.RunStatus != RunWaiting {
		t.Fatalf("the next question: %+v in %+v", c, got)
	}

	// The run's status alone moves its open sets.
	if err := s.UpdateRun(ctx, "r1", RunUpdate{Status: RunInterrupted}); err != nil {
		t.Fatal(err)
	}
	r.expect("the run interrupted", set2.ID, SetPending, RunInterrupted)
	if err := s.UpdateRun(ctx, "r1", RunUpdate{Status: RunWaiting}); err != nil {
		t.Fatal(err)
	}
	r.expect("the run waiting again", set2.ID, SetPending, RunWaiting)
	if err := s.ExpireSets(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	r.expect("ExpireSets", set2.ID, SetExpired, RunWaiting)

	// A cancel expires the open sets of a run and says it is cancelled.
	set3 := newWaitingRun(t, s, "r2", "qa")
	r.expect("a new waiting run", set3.ID, SetPending, RunWaiting)
	if err := s.CancelRun(ctx, "r2", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	r.expect("CancelRun", set3.ID, SetExpired, RunCancelled)

	// The run's own question.
	newRunningRun(t, s, "r3")
	own := questions.NewSet("r3", 1, []questions.Question{{Text: "Deliver?", Options: []questions.Option{{Label: "Yes"}, {Label: "No"}}}})
	own.Kind = questions.KindSecrets
	if _, err := s.AskRun(ctx, own, nil); err != nil {
		t.Fatal(err)
	}
	r.expect("AskRun", own.ID, SetPending, RunWaiting)

	// Approvals: asked, answered, its decision taken; dropped.
	newRunningRun(t, s, "r4")
	approval := askApproval(t, s, "r4", bashCall("toolu_1", "touch x"), true)
	r.expect("AskTool", approval.ID, SetPending, RunRunning)
	answer(t, s, approval, "Allow once")
	r.expect("an approval answered", approval.ID, SetAnswered, RunRunning)
	if _, take, err := s.TakeToolDecision(ctx, "toolu_1"); err != nil || take != TakeFirst {
		t.Fatalf("take: %v, %v", take, err)
	}
	r.expect("the decision taken", approval.ID, SetResumed, RunRunning)
	dropped := askApproval(t, s, "r4", bashCall("toolu_2", "touch y"), false)
	r.expect("AskTool, not live", dropped.ID, SetPending, RunWaiting)
	if err := s.DropToolCall(ctx, "toolu_2", "dropped by the CLI"); err != nil {
		t.Fatal(err)
	}
	r.expect("DropToolCall", dropped.ID, SetExpired, RunWaiting)

	// Several sets of a run change at once: a position each.
	newRunningRun(t, s, "r5")
	var two []string
	for _, id := range []string{"r5-a", "r5-b"} {
		set := questions.Set{ID: id, RunID: "r5", Questions: []questions.Question{{ID: "q", Text: "Go?"}}}
		if _, err := s.AskRun(ctx, set, nil); err != nil {
			t.Fatal(err)
		}
		two = append(two, id)
	}
	r.next()
	for _, change := range []struct {
		what   string
		do     func() error
		state  SetState
		status RunStatus
	}{
		{"the run interrupted", func() error { return s.UpdateRun(ctx, "r5", RunUpdate{Status: RunInterrupted}) }, SetPending, RunInterrupted},
		{"ExpireSets", func() error { return s.ExpireSets(ctx, "r5") }, SetExpired, RunInterrupted},
	} {
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		got := r.next()
		if len(got) != 2 || got[0].Seq == got[1].Seq {
			t.Fatalf("%s: %+v; want both sets of r5, at two positions", change.what, got)
		}
		for _, id := range two {
			if c := r.seen[id]; c.State != change.state || c.RunStatus != change.status {
				t.Fatalf("%s: %+v", change.what, c)
			}
		}
	}

	// Followed from the start, the feed holds each set once, as it is now.
	all := &feedReader{t: t, s: s, page: 3, seen: map[string]SetChange{}}
	all.next()
	recs, err := s.QuestionSets(ctx, SetFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.seen) != len(recs) {
		t.Fatalf("the feed from 0 has %d sets, the store %d", len(all.seen), len(recs))
	}
	for _, rec := range recs {
		if c := all.seen[rec.Set.ID]; c.State != rec.State {
			t.Errorf("set %s: the feed says %s, the store %s", rec.Set.ID, c.State, rec.State)
		}
	}
	if head, err := s.SetFeedHead(ctx); err != nil || head != all.pos {
		t.Fatalf("head %d, %v; the feed's last position %d", head, err, all.pos)
	}
}

// TestSetFeedMissesNothingUnderConcurrentWriters: a reader follows the
// feed while 8 writers make, answer and cancel sets at once (on PostgreSQL
// in concurrent transactions); once the writers are done and the reader
// has caught up, it has seen the final state of every set and its run,
// however its reads interleaved with the commits.
func TestSetFeedMissesNothingUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	r := newFeedReader(t, s, 5)
	const writers, perWriter = 8, 6
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		// Each writer is a process of its own: a store of its own on the
		// same database.
		ws := open(t, dir)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, err := ws.CreateRun(ctx, Run{ID: id, Prompt: "p", Spec: fmt.Sprintf("spec-%d", w)}); err != nil {
					t.Error(err)
					return
				}
				turn, err := ws.BeginTurn(ctx, Turn{RunID: id, Kind: TurnStart, Prompt: "p"})
				if err != nil {
					t.Error(err)
					return
				}
				set := testSet(id, turn.Seq, "qa", "qb")
				if err := ws.FinishTurn(ctx, id, turn.Seq, TurnResult{Status: "success"}, &set, nil); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					continue // left waiting
				}
				if _, err := ws.Offer(ctx, questions.Response{SetID: set.ID, By: "alice", Surface: "cli",
					Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 1 {
					if err := ws.CancelRun(ctx, id, "cancelled"); err != nil {
						t.Error(err)
					}
					continue
				}
				if _, err := ws.Offer(ctx, answerAll(set, "B")); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.next()
			time.Sleep(time.Millisecond) // a pause between looks, not a synchronisation
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	r.next() // catch up

	recs, err := s.QuestionSets(ctx, SetFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != writers*perWriter {
		t.Fatalf("%d sets, want %d", len(recs), writers*perWriter)
	}
	for _, rec := range recs {
		run, err := s.Run(ctx, rec.Set.RunID)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := r.seen[rec.Set.ID]
		switch {
		case !ok:
			t.Errorf("set %s never seen", rec.Set.ID)
		case c.State != rec.State || c.RunStatus != run.Status || c.Spec != run.Spec:
			t.Errorf("set %s: last seen %s of a %s run (%q); it is %s of a %s run", rec.Set.ID, c.State, c.RunStatus, c.Spec, rec.State, run.Status)
		}
	}
}

// TestWaitingSetsPages: WaitingSets lists the pending sets of waiting runs
// only, by ID, in pages that follow each other with no set twice or left
// out.
func TestWaitingSetsPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	var want []string
	for i := range 7 {
		set := newWaitingRun(t, s, fmt.Sprintf("run-%02d", i), "qa")
		want = append(want, set.ID)
	}
	answered := newWaitingRun(t, s, "answered", "qa")
	if _, err := s.RecordAnswer(ctx, answerAll(answered, "A")); err != nil {
		t.Fatal(err)
	}
	newWaitingRun(t, s, "interrupted", "qa")
	if err := s.UpdateRun(ctx, "interrupted", RunUpdate{Status: RunInterrupted}); err != nil {
		t.Fatal(err)
	}
	newWaitingRun(t, s, "cancelled", "qa")
	if err := s.CancelRun(ctx, "cancelled", "no"); err != nil {
		t.Fatal(err)
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, err := s.WaitingSets(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			if c.State != SetPending || c.RunStatus != RunWaiting || c.Seq <= 0 || c.RunID+"-s1" != c.SetID {
				t.Errorf("waiting set %+v", c)
			}
			got = append(got, c.SetID)
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].SetID
		if pages > 10 {
			t.Fatal("pages never end")
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waiting sets %v\nwant %v", got, want)
	}
	if _, err := s.WaitingSets(ctx, "", 0); err == nil {
		t.Fatal("a limit of 0 was taken")
	}
	if _, err := s.SetFeed(ctx, 0, -1); err == nil {
		t.Fatal("a limit of -1 was taken")
	}
}

// seedWaitingRuns stores n runs waiting on a pending set each, as
// FinishTurn leaves them, in a few statements (n transactions would take
// minutes on a synced disk): the runs are prefix and a number of six
// digits, their sets testSet's (the database gives their feed positions).
func seedWaitingRuns(tb testing.TB, s *Store, prefix string, n int) []string {
	tb.Helper()
	ctx := context.Background()
	now := nanos(time.Now())
	body, err := encodeJSON(testSet("TEMPLATE", 1, "qa"))
	if err != nil {
		tb.Fatal(err)
	}
	// n(i), the numbers 0 to n-1, and id, the run's ID, in each dialect.
	numbers := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) `
	from, id := `n`, `? || substr('000000' || i, -6)`
	if s.Shared() {
		numbers, from, id = ``, `generate_series(0, ? - 1) AS n(i)`, `? || lpad(i::text, 6, '0')`
	}
	seed := func(q string, args ...any) func(*txn) error {
		return func(tx *txn) error {
			if s.Shared() { // generate_series takes n at its place in the FROM
				args = append(args[1:len(args):len(args)], args[0])
			}
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}
	}
	err = s.tx(ctx, func(tx *txn) error {
		var head int64
		if err := tx.QueryRowContext(ctx, setFeedHeadQuery).Scan(&head); err != nil {
			return err
		}
		for _, step := range []func(*txn) error{
			seed(numbers+`INSERT INTO runs (`+runColumns+`) SELECT `+id+`, 'spec-' || (i % 10), '', 'p', '', '[]', '{}', ?, '', '', '', 0, ?, ?, '' FROM `+from,
				n, prefix, RunWaiting, now, now),
			// With their positions, after the head (SQLite's trigger then
			// leaves them; PostgreSQL's gives its own).
			seed(numbers+`INSERT INTO question_sets (id, run_id, turn, state, body, surfaces, created_at, kind, seq)
				SELECT `+id+` || '-s1', `+id+`, 1, ?, replace(?, 'TEMPLATE', `+id+`), '["terminal"]', ?, 'marker', ? + 1 + i FROM `+from,
				n, prefix, prefix, SetPending, body, prefix, now, head),
			seed(numbers+`INSERT INTO questions (id, set_id, position) SELECT 'qa', `+id+` || '-s1', 0 FROM `+from, n, prefix),
		} {
			if err := step(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%06d-s1", prefix, i)
	}
	return ids
}

// TestWaitSetWithMoreWaitersThanSQLiteParameters: 40,000 sets waited on
// at once — more than the 32,766 parameters a SQLite statement may have,
// which an `IN (…)` of every waited set exceeded (the poller then woke
// every waiter at every change) — and an answer given by another process
// wakes its set's waiter, and no other.
func TestWaitSetWithMoreWaitersThanSQLiteParameters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ids := seedWaitingRuns(t, s, "many-", 40000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // generous: -race on a loaded machine
	defer cancel()
	chans := make([]chan struct{}, len(ids))
	for i, id := range ids {
		chans[i] = s.watch(id)
	}
	const target = 31234
	got := make(chan SetRecord, 1)
	go func() {
		rec, err := s.WaitSet(ctx, ids[target])
		if err != nil {
			t.Error(err)
		}
		got <- rec
	}()
	other := open(t, dir)
	if _, err := other.RecordAnswer(ctx, questions.Response{SetID: ids[target], By: "alice", Surface: "cli",
		Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-got:
		if rec.State != SetAnswered {
			t.Fatalf("woken with the set %s", rec.State)
		}
	case <-ctx.Done():
		t.Fatal("the waiter of the answered set never woke")
	}
	// The poller wakes in one go the waiters of a look: the answer's look
	// is over, and it woke the target's waiters only.
	<-chans[target]
	for i, ch := range chans {
		if i == target {
			continue
		}
		select {
		case <-ch:
			t.Fatalf("the waiter of %s (still pending) was woken", ids[i])
		default:
		}
		s.unwatch(ids[i], ch)
	}
}

// checkFeedOfBefore: a store migrated from before the feed has its sets in
// it, each at a position of its own, and its waiting set among
// WaitingSets; a change then moves a set above them all.
func checkFeedOfBefore(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	recs, err := s.QuestionSets(ctx, SetFilter{})
	if err != nil {
		t.Fatal(err)
	}
	all := &feedReader{t: t, s: s, page: 1, seen: map[string]SetChange{}}
	all.next()
	if len(recs) == 0 || len(all.seen) != len(recs) {
		t.Fatalf("the feed has %d sets of the %d stored", len(all.seen), len(recs))
	}
	for _, rec := range recs {
		if c := all.seen[rec.Set.ID]; c.Seq <= 0 || c.State != rec.State {
			t.Errorf("set %s in the feed: %+v; stored %s", rec.Set.ID, c, rec.State)
		}
	}
	waiting, err := s.WaitingSets(ctx, "", 10)
	if err != nil || len(waiting) != 1 || waiting[0].SetID != "old-1-s1" || waiting[0].Spec != "nightly" {
		t.Fatalf("waiting sets %+v, %v; want old-1-s1 of nightly", waiting, err)
	}
	head := all.pos
	if err := s.UpdateRun(ctx, "old-1", RunUpdate{Status: RunInterrupted}); err != nil {
		t.Fatal(err)
	}
	if got := all.next(); len(got) != 1 || got[0].SetID != "old-1-s1" || got[0].Seq <= head || got[0].RunStatus != RunInterrupted {
		t.Fatalf("after a change: %+v", got)
	}
	if err := s.UpdateRun(ctx, "old-1", RunUpdate{Status: RunWaiting}); err != nil {
		t.Fatal(err)
	}
}

// seedClaimable adds to a store of waiting runs what ClaimableRuns finds:
// answered sets of waiting runs (the first n of ids) and a queued run.
func seedClaimable(tb testing.TB, s *Store, ids []string, n int) {
	tb.Helper()
	ctx := context.Background()
	for _, id := range ids[:n] {
		if _, err := s.RecordAnswer(ctx, questions.Response{SetID: id, By: "alice", Surface: "cli",
			Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := s.CreateRun(ctx, Run{ID: "queued", Prompt: "p", Status: RunQueued}); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `ANALYZE`); err != nil {
		tb.Fatal(err)
	}
}

// explain returns the plan of q with args, a line per step.
func explain(tb testing.TB, s *Store, q string, args ...any) []string {
	tb.Helper()
	ctx := context.Background()
	rows, err := s.db.QueryContext(ctx, `EXPLAIN `+map[bool]string{false: `QUERY PLAN `, true: ``}[s.Shared()]+q, args...)
	if err != nil {
		tb.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			tb.Fatal(err)
		}
		lines = append(lines, fmt.Sprint(vals[len(vals)-1])) // SQLite's detail, PostgreSQL's line
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return lines
}

// TestSetFeedQueriesUseIndexes: with 10,000 runs waiting, the feed's
// queries, the poller's and ClaimableRuns' read no table whole: on SQLite
// no step of the plan is a SCAN (a pass over a whole table or index), on
// PostgreSQL none is a Seq Scan of question_sets or runs. The plans are in
// the test's log (go test -v).
func TestSetFeedQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	ids := seedWaitingRuns(t, s, "w-", 10000)
	seedClaimable(t, s, ids, 20)
	head, err := s.SetFeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	claimable, claimableArgs := s.claimableQuery("host", 100)
	for _, q := range []struct {
		name string
		q    string
		args []any
	}{
		{"SetFeed", setFeedQuery, []any{head - 20, 100}},
		{"SetFeedHead", setFeedHeadQuery, nil},
		{"WaitingSets", waitingSetsQuery, []any{SetPending, ids[5000], RunWaiting, 100}},
		{"poller", pollFeedQuery, []any{head - 20, feedPage}},
		{"ClaimableRuns", claimable, claimableArgs},
		{"suggestRule", suggestQuery, []any{"fp", SetAnswered, SetResuming, SetResumed, "spec-a", ids[5000], suggestWindow}},
	} {
		plan := explain(t, s, q.q, q.args...)
		t.Logf("%s:\n\t%s", q.name, strings.Join(plan, "\n\t"))
		right := false // in the RIGHT of a SQLite UNION ALL
		for _, step := range plan {
			right = right || step == "RIGHT"
			if s.Shared() && (strings.Contains(step, "Seq Scan on question_sets") || strings.Contains(step, "Seq Scan on runs")) ||
				!s.Shared() && strings.HasPrefix(step, "SCAN ") && step != "SCAN answered" { // ClaimableRuns' answered sets (few)
				t.Errorf("%s reads a whole table: %s", q.name, step)
			}
			// Every waiting run, looked at through runs(status): the
			// waiting runs are found from their answered sets.
			if q.name == "ClaimableRuns" && (strings.Contains(step, "Index Cond: (status = 'waiting'") ||
				!s.Shared() && strings.Contains(step, "runs_status") && right) {
				t.Errorf("%s lists every waiting run: %s", q.name, step)
			}
		}
	}
	// And they answer as they should.
	runs, err := s.ClaimableRuns(ctx, "host", 0)
	if err != nil || len(runs) != 21 || runs[0].ID != ids[0][:len(ids[0])-3] {
		t.Fatalf("claimable: %d runs, %v", len(runs), err)
	}
}

// BenchmarkSetFeedAt10000Waiting: the reads a process watching every
// waiting set makes, on SQLite with 10,000 runs waiting (20 of them with
// an answered set): a page of the feed's last changes, its head, a page of
// WaitingSets, ClaimableRuns, and the poller's look when nothing changed.
// The …Before cases are the queries these replaced, side by side:
// ClaimableRuns testing every waiting run's sets, and the poller's IN (…)
// of every waited set.
func BenchmarkSetFeedAt10000Waiting(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := seedWaitingRuns(b, s, "w-", 10000)
	before, err := s.SetFeedHead(ctx)
	if err != nil {
		b.Fatal(err)
	}
	seedClaimable(b, s, ids, 20)
	head, err := s.SetFeedHead(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("SetFeed", func(b *testing.B) { // the 20 sets answered
		for b.Loop() {
			if c, err := s.SetFeed(ctx, before, 100); err != nil || len(c) != 20 {
				b.Fatal(len(c), err)
			}
		}
	})
	b.Run("SetFeedHead", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.SetFeedHead(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WaitingSets", func(b *testing.B) {
		for b.Loop() {
			if c, err := s.WaitingSets(ctx, ids[5000], 100); err != nil || len(c) != 100 {
				b.Fatal(len(c), err)
			}
		}
	})
	b.Run("ClaimableRuns", func(b *testing.B) {
		for b.Loop() {
			if runs, err := s.ClaimableRuns(ctx, "host", 0); err != nil || len(runs) != 21 {
				b.Fatal(len(runs), err)
			}
		}
	})
	b.Run("ClaimableRunsBefore", func(b *testing.B) {
		q := `SELECT ` + briefRunColumns + ` FROM runs WHERE
			(status IN (?, ?, ?) OR (status = ? AND EXISTS (SELECT 1 FROM question_sets qs WHERE qs.run_id = runs.id AND qs.state = ?)))
			AND (host = '' OR host = ?)
			AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.run_id = runs.id AND l.expires_at > ` + s.nowSQL() + `)
			ORDER BY created_at, id`
		for b.Loop() {
			if n := countRows(b, s, q, RunQueued, RunInterrupted, RunRunning, RunWaiting, SetAnswered, "host"); n != 21 {
				b.Fatal(n)
			}
		}
	})
	c, err := s.db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cn := conn{Conn: c, d: s.d}
	b.Run("PollerLook", func(b *testing.B) {
		for b.Loop() {
			if done, _, err := feedNotPending(ctx, cn, head); err != nil || len(done) != 0 {
				b.Fatal(len(done), err)
			}
		}
	})
	b.Run("PollerLookBefore", func(b *testing.B) {
		args := []any{SetPending}
		for _, id := range ids {
			args = append(args, id)
		}
		q := `SELECT id FROM question_sets WHERE state <> ? AND id IN (` + placeholders(len(ids)) + `)`
		for b.Loop() {
			if n := countRows(b, s, q, args...); n != 20 {
				b.Fatal(n)
			}
		}
	})
}

func countRows(tb testing.TB, s *Store, q string, args ...any) int {
	rows, err := s.db.QueryContext(context.Background(), q, args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}
