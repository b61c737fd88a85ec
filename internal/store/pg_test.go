package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// The store's tests run against SQLite and against PostgreSQL: TestPostgres
// runs the tests of both as its subtests, whose open (store_test.go) opens
// a PostgreSQL store. The database is ORCHESTRATOR_TEST_DATABASE_URL when
// set, else a throwaway cluster started with Debian's server
// binaries (package postgresql). Each test directory gets a schema of its
// own, so tests run in parallel and a second open of the same directory
// sees the same data, as a second process would.

// EnvTestDatabaseURL names a PostgreSQL database the tests may fill with
// schemas of their own instead of starting a cluster.
const EnvTestDatabaseURL = "ORCHESTRATOR_TEST_DATABASE_URL"

var pgTest struct {
	start sync.Once // the first test that needs the database starts it
	stop  func()    // TestMain stops it
	url   string    // the database; "" when none could be had
	err   string    // why not
	mu    sync.Mutex
	dirs  map[string]string // test directory → its schema's URL
	count atomic.Int64
}

// TestMain stops the cluster the tests started, one per test binary.
func TestMain(m *testing.M) {
	code := m.Run()
	if pgTest.stop != nil {
		pgTest.stop()
	}
	os.Exit(code)
}

// needPostgres starts the database on first use; t fails when there is
// none.
func needPostgres(t testing.TB) {
	t.Helper()
	pgTest.start.Do(func() {
		stop, err := startPostgres()
		pgTest.stop = stop
		if err != nil {
			pgTest.err = err.Error()
		}
	})
	if pgTest.url == "" {
		t.Fatalf("no PostgreSQL for the store's tests: %s", pgTest.err)
	}
}

// startPostgres sets pgTest.url: ORCHESTRATOR_TEST_DATABASE_URL, or a
// cluster in a temporary directory listening only on a unix socket there.
// As root the server runs as the user postgres (it refuses to run as root).
func startPostgres() (stop func(), err error) {
	if u := os.Getenv(EnvTestDatabaseURL); u != "" {
		pgTest.url = u
		return nil, nil
	}
	bin, err := postgresBin(postgresBinGlob)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	dir, err := os.MkdirTemp("", "orchestrator-pg-")
	if err != nil {
		return nil, err
	}
	var runAs []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, PostgreSQL's server needs the user postgres: %v (apt-get install -y postgresql makes it)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(name string, args ...string) error {
		argv := append(append(append([]string{}, runAs...), filepath.Join(bin, name)), args...)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-locale", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400", dir)
	if err := run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-s", "start"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "store tests: PostgreSQL cluster started in %v\n", time.Since(start).Round(time.Millisecond))
	pgTest.url = "postgres://postgres@/postgres?host=" + url.QueryEscape(dir) + "&sslmode=disable"
	return func() {
		run("pg_ctl", "-D", data, "-m", "immediate", "-s", "stop")
		os.RemoveAll(dir)
	}, nil
}

// postgresBinGlob is where Debian's postgresql package puts initdb.
const postgresBinGlob = "/usr/lib/postgresql/*/bin/initdb"

// postgresBin finds the newest Debian PostgreSQL server's binaries (glob
// matches their initdb).
func postgresBin(glob string) (string, error) {
	found, _ := filepath.Glob(glob)
	sort.Slice(found, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[j]))))
		return vi > vj
	})
	for _, initdb := range found {
		bin := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(bin, "pg_ctl")); err == nil {
			return bin, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL's server binaries (initdb, pg_ctl under /usr/lib/postgresql/*/bin) are missing: install them with `apt-get install -y postgresql`, or set %s to a database the tests may use", EnvTestDatabaseURL)
}

// onPostgres reports whether t runs under TestPostgres.
func onPostgres(t testing.TB) bool { return strings.HasPrefix(t.Name(), "TestPostgres/") }

// pgURL returns the URL of the schema of a test directory, creating the
// schema on first use. The test fails when there is no database.
func pgURL(t testing.TB, dir string) string {
	t.Helper()
	needPostgres(t)
	pgTest.mu.Lock()
	defer pgTest.mu.Unlock()
	if u, ok := pgTest.dirs[dir]; ok {
		return u
	}
	schema := fmt.Sprintf("t%d_%d", os.Getpid(), pgTest.count.Add(1))
	db, err := sql.Open("pgx", pgTest.url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", pgTest.url)
		if err != nil {
			return
		}
		defer db.Close()
		db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
	})
	u, err := url.Parse(pgTest.url)
	if err != nil {
		t.Fatalf("%s: %v", EnvTestDatabaseURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema) // finds this test's connections in pg_stat_activity
	u.RawQuery = q.Encode()
	if pgTest.dirs == nil {
		pgTest.dirs = map[string]string{}
	}
	pgTest.dirs[dir] = u.String()
	return u.String()
}

var _ = stdlib.GetDefaultDriver // the driver "pgx" of pgURL

// pgTests are the store's tests that hold for any database; TestPostgres
// runs them on PostgreSQL. The tests of SQLite's file (damage, creation by
// several processes) and of the lock files are not among them.
var pgTests = []struct {
	name string
	fn   func(*testing.T)
}{
	{"TestRunLifecycle", TestRunLifecycle},
	{"TestClaimExactlyOnceUnderContention", TestClaimExactlyOnceUnderContention},
	{"TestPartialAnswersAndFindQuestion", TestPartialAnswersAndFindQuestion},
	{"TestWaitSetSeesAnotherProcess", TestWaitSetSeesAnotherProcess},
	{"TestWaitSetWokenByPoke", TestWaitSetWokenByPoke},
	{"TestWaitSetSlowPollWithoutPokes", TestWaitSetSlowPollWithoutPokes},
	{"TestWaitSetWokenInProcess", TestWaitSetWokenInProcess},
	{"TestReopenKeepsStateAndAbandon", TestReopenKeepsStateAndAbandon},
	{"TestWaitRunFinalSeesAnotherProcessCancel", TestWaitRunFinalSeesAnotherProcessCancel},
	{"TestLostTurnCategoriesAreTyped", TestLostTurnCategoriesAreTyped},
	{"TestToolDecisionExactlyOnce", TestToolDecisionExactlyOnce},
	{"TestToolDecisionDenyReasonAndRunRule", TestToolDecisionDenyReasonAndRunRule},
	{"TestToolDecisionAskToolAnswers", TestToolDecisionAskToolAnswers},
	{"TestDecideToolByPolicy", TestDecideToolByPolicy},
	{"TestDropToolCall", TestDropToolCall},
	{"TestCommentDecisionsFirstWinsAcrossReopen", TestCommentDecisionsFirstWinsAcrossReopen},
	{"TestPlaceholdersNumbered", TestPlaceholdersNumbered},
	{"TestMigrateConcurrentlyOnAnEmptyDatabase", testMigrateConcurrentlyOnAnEmptyDatabase},
	{"TestCostAndTimesKeepTheirPrecision", TestCostAndTimesKeepTheirPrecision},
	{"TestNotifyWakesAnotherInstanceAndSurvivesALostListener", testNotifyWakesAnotherInstanceAndSurvivesALostListener},
}

// TestPostgres runs the store's tests on PostgreSQL.
func TestPostgres(t *testing.T) {
	needPostgres(t)
	for _, tc := range pgTests {
		t.Run(tc.name, tc.fn)
	}
}

// TestPostgresBinMissingSaysHowToInstall: without the server's binaries
// the tests fail with the command that installs them.
func TestPostgresBinMissingSaysHowToInstall(t *testing.T) {
	t.Parallel()
	_, err := postgresBin(filepath.Join(t.TempDir(), "*", "bin", "initdb"))
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y postgresql") || !strings.Contains(err.Error(), EnvTestDatabaseURL) {
		t.Fatalf("postgresBin: %v", err)
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
// round trip (PostgreSQL's INTEGER and REAL are 32 bits; the migrations
// are run with 64-bit types there).
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
		WHERE application_name = ? AND query LIKE 'LISTEN%'`, u.Query().Get("application_name")).Scan(&killed); err != nil {
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
