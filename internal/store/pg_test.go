package store

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// The store's tests run against SQLite and against PostgreSQL: TestPostgres
// runs them again as its subtests, whose open (store_test.go) opens a
// PostgreSQL store: internal/pgtest's database (a throwaway cluster, or
// ORCHESTRATOR_TEST_DATABASE_URL). Each test directory gets a schema of
// its own, so tests run in parallel and a second open of the same
// directory sees the same data, as a second process would.

// TestMain stops the cluster the tests started, one per test binary.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

var pgTest struct {
	mu   sync.Mutex
	dirs map[string]string // test directory → its schema's URL
}

// onPostgres reports whether t runs under TestPostgres.
func onPostgres(t testing.TB) bool { return strings.HasPrefix(t.Name(), "TestPostgres/") }

// pgURL returns the URL of the schema of a test directory, made on first
// use. The test fails when there is no database.
func pgURL(t testing.TB, dir string) string {
	t.Helper()
	pgTest.mu.Lock()
	defer pgTest.mu.Unlock()
	if u, ok := pgTest.dirs[dir]; ok {
		return u
	}
	u := pgtest.Schema(t)
	if pgTest.dirs == nil {
		pgTest.dirs = map[string]string{}
	}
	pgTest.dirs[dir] = u
	return u
}

// pgTests are the store's tests that hold for any database; TestPostgres
// runs them on PostgreSQL. The tests of SQLite's file (damage, creation by
// several processes) and of the lock files are not among them.
var pgTests = []struct {
	name string
	fn   func(*testing.T)
}{
	{"TestRunLifecycle", TestRunLifecycle},
	{"TestInbox", TestInbox},
	{"TestRunRequestOnce", TestRunRequestOnce},
	{"TestSpendByFinishTime", TestSpendByFinishTime},
	{"TestCapQuestionHoldsAnsweredRun", TestCapQuestionHoldsAnsweredRun},
	{"TestCapReservationOneOfTwoAtOnce", TestCapReservationOneOfTwoAtOnce},
	{"TestClaimExactlyOnceUnderContention", TestClaimExactlyOnceUnderContention},
	{"TestPartialAnswersAndFindQuestion", TestPartialAnswersAndFindQuestion},
	{"TestOfferDecidesOnceUnderContention", TestOfferDecidesOnceUnderContention},
	{"TestOfferDecisions", TestOfferDecisions},
	{"TestOpenSetsInOneStatement", TestOpenSetsInOneStatement},
	{"TestWaitSetSeesAnotherProcess", TestWaitSetSeesAnotherProcess},
	{"TestWaitSetWokenByPoke", TestWaitSetWokenByPoke},
	{"TestWaitSetSlowPollWithoutPokes", TestWaitSetSlowPollWithoutPokes},
	{"TestWaitSetWokenInProcess", TestWaitSetWokenInProcess},
	{"TestReopenKeepsStateAndAbandon", TestReopenKeepsStateAndAbandon},
	{"TestWaitRunFinalSeesAnotherProcessCancel", TestWaitRunFinalSeesAnotherProcessCancel},
	{"TestLostTurnCategoriesAreTyped", TestLostTurnCategoriesAreTyped},
	{"TestSpecCostsSumEachSpecsRuns", TestSpecCostsSumEachSpecsRuns},
	{"TestToolDecisionExactlyOnce", TestToolDecisionExactlyOnce},
	{"TestToolDecisionDenyReasonAndRunRule", TestToolDecisionDenyReasonAndRunRule},
	{"TestToolDecisionAskToolAnswers", TestToolDecisionAskToolAnswers},
	{"TestRulesAnswerSetsInScope", TestRulesAnswerSetsInScope},
	{"TestApprovalRulesNeverPastThePolicy", TestApprovalRulesNeverPastThePolicy},
	{"TestSuggestAfterTheSameAnswerKTimes", TestSuggestAfterTheSameAnswerKTimes},
	{"TestDecideToolByPolicy", TestDecideToolByPolicy},
	{"TestDropToolCall", TestDropToolCall},
	{"TestCommentDecisionsFirstWinsAcrossReopen", TestCommentDecisionsFirstWinsAcrossReopen},
	{"TestSetAnswerIsTheAnswerTaken", TestSetAnswerIsTheAnswerTaken},
	{"TestSessionsRoundTrip", TestSessionsRoundTrip},
	{"TestPlaceholdersNumbered", TestPlaceholdersNumbered},
	{"TestMigrateConcurrentlyOnAnEmptyDatabase", testMigrateConcurrentlyOnAnEmptyDatabase},
	{"TestCostAndTimesKeepTheirPrecision", TestCostAndTimesKeepTheirPrecision},
	{"TestNotifyWakesAnotherInstanceAndSurvivesALostListener", testNotifyWakesAnotherInstanceAndSurvivesALostListener},
	{"TestScheduleTickMakesOneRun", TestScheduleTickMakesOneRun},
	{"TestTriggerMakesOneRun", TestTriggerMakesOneRun},
	{"TestSessionRecordRoundTrip", TestSessionRecordRoundTrip},
	{"TestClaimableRuns", TestClaimableRuns},
	{"TestLeaseOneHolderAndTakeOver", TestLeaseOneHolderAndTakeOver},
	{"TestFencingToken", TestFencingToken},
	{"TestFencingTakeOverRefusesTheStalledHolder", TestFencingTakeOverRefusesTheStalledHolder},
	{"TestLeaseLostBeforeItCanBeTakenOver", TestLeaseLostBeforeItCanBeTakenOver},
	{"TestLeadOneAtATime", TestLeadOneAtATime},
	{"TestWaitChangeWokenByAnotherInstance", TestWaitChangeWokenByAnotherInstance},
	{"TestTwoSchemasLeadApart", testTwoSchemasLeadApart},
	{"TestInstancesHeartbeatAndGoodbye", TestInstancesHeartbeatAndGoodbye},
	{"TestNudgeReachesEveryInstance", TestNudgeReachesEveryInstance},
	{"TestOneListenerForPokesAndNudges", TestOneListenerForPokesAndNudges},
	{"TestRetryToolCallGrantsTheSameCallOnce", TestRetryToolCallGrantsTheSameCallOnce},
	{"TestAskRunIsIdempotent", TestAskRunIsIdempotent},
	{"TestNewStoreSchema", TestNewStoreSchema},
	{"TestOpenStoreOfBefore", TestOpenStoreOfBefore},
	{"TestOpenStoreOfBeforeConcurrently", TestOpenStoreOfBeforeConcurrently},
	{"TestBulkReadsMatchTheOneByOne", TestBulkReadsMatchTheOneByOne},
	{"TestSetFeedReportsEveryChange", TestSetFeedReportsEveryChange},
	{"TestSetFeedMissesNothingUnderConcurrentWriters", TestSetFeedMissesNothingUnderConcurrentWriters},
	{"TestWaitingSetsPages", TestWaitingSetsPages},
	{"TestSetFeedQueriesUseIndexes", TestSetFeedQueriesUseIndexes},
	{"TestAggregatesCountWithoutListing", TestAggregatesCountWithoutListing},
	{"TestPurgeRunsRemovesOnlyFinishedOldRuns", TestPurgeRunsRemovesOnlyFinishedOldRuns},
	{"TestPurgeCoversEveryRunTable", TestPurgeCoversEveryRunTable},
	{"TestPurgeRefsByRunAndAge", TestPurgeRefsByRunAndAge},
	{"TestLazyCommitsLeaveThePoolFull", TestLazyCommitsLeaveThePoolFull},
	{"TestWakeStampChangesWithAPoke", TestWakeStampChangesWithAPoke},
	{"TestSchedulePauseAndFailureStreak", TestSchedulePauseAndFailureStreak},
	{"TestScheduleSkipsCountAndNoticeOncePerDay", TestScheduleSkipsCountAndNoticeOncePerDay},
	{"TestNotificationOutbox", TestNotificationOutbox},
	{"TestAnswerGroup", TestAnswerGroup},
	{"TestAnswerGroupOnceUnderContention", TestAnswerGroupOnceUnderContention},
	{"TestGroupQueryUsesTheIndex", TestGroupQueryUsesTheIndex},
	{"TestQueueFollowUpRequeuesOnce", TestQueueFollowUpRequeuesOnce},
	{"TestQueueFollowUpRefusals", TestQueueFollowUpRefusals},
	{"TestFollowUpWhileRunningRequeuedAfterDone", TestFollowUpWhileRunningRequeuedAfterDone},
	{"TestReopenDelivery", TestReopenDelivery},
	{"TestRunOfPullRequest", TestRunOfPullRequest},
	{"TestRememberOfferOnceAcrossInstances", TestRememberOfferOnceAcrossInstances},
}

// TestPostgres runs the store's tests on PostgreSQL.
func TestPostgres(t *testing.T) {
	pgtest.Shared(t)
	for _, tc := range pgTests {
		t.Run(tc.name, tc.fn)
	}
}

// TestPostgresBinMissingSaysHowToInstall: without the server's binaries
// the tests fail with the command that installs them.
func TestPostgresBinMissingSaysHowToInstall(t *testing.T) {
	t.Parallel()
	_, err := pgtest.Bin(filepath.Join(t.TempDir(), "*", "bin", "initdb"))
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y postgresql") || !strings.Contains(err.Error(), pgtest.EnvURL) {
		t.Fatalf("pgtest.Bin: %v", err)
	}
}

// TestPlaceholdersNumbered: `?` becomes $1, $2, … except inside quotes.
func TestPlaceholdersNumbered(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`SELECT 1`:                       `SELECT 1`,
		`a = ? AND b IN (?, ?)`:          `a = $1 AND b IN ($2, $3)`,
		`x = '?' AND y = ? AND z = "?"`:  `x = '?' AND y = $1 AND z = "?"`,
		`'it''s ?' , ?`:                  `'it''s ?' , $1`,
		strings.Repeat("?,", 11) + "?":   "$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12",
		`decided_by = 'orchestrator', ?`: `decided_by = 'orchestrator', $1`,
	} {
		if got := numberPlaceholders(in); got != want {
			t.Errorf("numberPlaceholders(%q) = %q, want %q", in, got, want)
		}
	}
}

// testMigrateConcurrentlyOnAnEmptyDatabase: several stores opened at once
// on an empty database migrate it once, and all of them work (PostgreSQL
// only: SQLite's case is TestOpenConcurrentlyOnANewDirectory).
func testMigrateConcurrentlyOnAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	u := pgURL(t, dir)
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = OpenDatabase(ctx, dir, u)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	migrations, err := migrationsOf("postgres")
	if err != nil {
		t.Fatal(err)
	}
	var rows, max int
	if err := stores[0].db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&rows, &max); err != nil {
		t.Fatal(err)
	}
	if rows != len(migrations) || max != len(migrations) {
		t.Fatalf("schema_migrations: %d rows up to %d, want %d", rows, max, len(migrations))
	}
	for i, s := range stores {
		id := fmt.Sprintf("r%d", i)
		if _, err := s.CreateRun(ctx, Run{ID: id, Prompt: "p"}); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
	}
	if runs, err := stores[n-1].ListRuns(ctx, RunFilter{}); err != nil || len(runs) != n {
		t.Fatalf("runs: %d, %v", len(runs), err)
	}
	// A schema newer than this program is refused, not used.
	if _, err := stores[0].db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenDatabase(ctx, dir, u); err == nil || !strings.Contains(err.Error(), "newer than this orchestrator") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open a newer schema: %v", err)
	}
}

// TestCostAndTimesKeepTheirPrecision: costs and nanosecond times survive a
// round trip (PostgreSQL's INTEGER and REAL are 32 bits; its migrations
// are written with 64-bit types).
func TestCostAndTimesKeepTheirPrecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	at := time.Date(2026, 11, 23, 21, 0, 0, 123456789, time.UTC)
	s.now = func() time.Time { return at }
	if _, err := s.CreateRun(ctx, Run{ID: "r1", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, "r1", RunUpdate{AddCost: 0.123456789012}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r.CostUSD != 0.123456789012 || !r.CreatedAt.Equal(at) {
		t.Fatalf("cost %v created %v, want 0.123456789012 and %v", r.CostUSD, r.CreatedAt, at)
	}
}

// TestOpenDatabaseRefusesABadURL: a database_url that is neither empty nor
// PostgreSQL's is refused by name, and the error never shows the URL (it
// may hold a password).
func TestOpenDatabaseRefusesABadURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{"mysql://u:s3cret@h/db", "postgres://u:s3cret@h:notaport/db"} {
		s, err := OpenDatabase(ctx, t.TempDir(), u)
		if err == nil {
			s.Close()
			t.Fatalf("OpenDatabase(%q) worked", u)
		}
		if !strings.Contains(err.Error(), "database_url") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("OpenDatabase(%q): %v", u, err)
		}
	}
	// Empty is the SQLite database in the directory.
	dir := t.TempDir()
	s, err := OpenDatabase(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
}

// testNotifyWakesAnotherInstanceAndSurvivesALostListener (PostgreSQL): an
// answer recorded by another store on the database wakes a waiter through
// NOTIFY, with no slow poll; when the listening connection is lost, the
// listener reconnects and looks again, so an answer given meanwhile still
// wakes the waiter.
func testNotifyWakesAnotherInstanceAndSurvivesALostListener(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := open(t, dir)
	s.pollEvery = time.Hour // only a poke may wake the waiter
	other := open(t, dir)
	wait := func(set questions.Set) <-chan error {
		got := make(chan error, 1)
		go func() {
			rec, err := s.WaitSet(ctx, set.ID)
			if err == nil && rec.State != SetAnswered {
				err = fmt.Errorf("state %s", rec.State)
			}
			got <- err
		}()
		// Past the poller's first look: from here only NOTIFY wakes it.
		time.Sleep(300 * time.Millisecond)
		return got
	}
	answer := func(set questions.Set) time.Time {
		at := time.Now()
		if _, err := other.RecordAnswer(ctx, questions.Response{SetID: set.ID, By: "cli", Surface: "cli",
			Answers: []questions.Answer{{QuestionID: "qa", Labels: []string{"A"}}}}); err != nil {
			t.Fatal(err)
		}
		return at
	}

	set := newWaitingRun(t, s, "r1", "qa")
	got := wait(set)
	at := answer(set)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	t.Logf("woken %v after the answer", time.Since(at).Round(time.Microsecond))

	set2 := newWaitingRun(t, s, "r2", "qa")
	got = wait(set2)
	u, _ := url.Parse(pgURL(t, dir))
	var killed int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = ? AND query ILIKE 'LISTEN%'`, u.Query().Get("application_name")).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("terminated %d listening connections, want 1", killed)
	}
	answer(set2)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// sqliteOnly are the store's tests that TestPostgres does not run: SQLite's
// file (damage, creation by several processes), the lock files (the same
// for both), and the tests of this file's own machinery.
var sqliteOnly = map[string]bool{
	"TestOpenRefusesADamagedFile":            true,
	"TestOpenConcurrentlyOnANewDirectory":    true,
	"TestRunDriven":                          true,
	"TestLockRun":                            true,
	"TestPostgres":                           true,
	"TestPostgresBinMissingSaysHowToInstall": true,
	"TestOpenDatabaseRefusesABadURL":         true,
	"TestEveryTestRunsOnPostgres":            true,
	"TestMigrationFiles":                     true,
	"TestLoadMigrationsRefusesBadFiles":      true,
	"TestParseRemember":                      true, // no database
	// SQLite's bound on a statement's parameters (32,766); PostgreSQL's
	// poller follows the same feed.
	"TestWaitSetWithMoreWaitersThanSQLiteParameters": true,
}

// TestEveryTestRunsOnPostgres: a new test of the store runs on PostgreSQL
// too, unless it is listed as SQLite's own: adding it to one list or the
// other is not forgotten.
func TestEveryTestRunsOnPostgres(t *testing.T) {
	t.Parallel()
	onPG := map[string]bool{}
	for _, tc := range pgTests {
		onPG[tc.name] = true
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			name, ok := strings.CutPrefix(line, "func Test")
			if !ok || !strings.Contains(name, "(t *testing.T)") {
				continue
			}
			name = "Test" + name[:strings.Index(name, "(")]
			found++
			if !onPG[name] && !sqliteOnly[name] {
				t.Errorf("%s (%s) is neither in pgTests nor in sqliteOnly", name, f)
			}
		}
	}
	if found < len(sqliteOnly) {
		t.Fatalf("found %d tests in %v", found, files)
	}
}
