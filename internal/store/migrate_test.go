package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
)

// TestMigrationFiles: both databases have the same migrations, under the
// same names, and PostgreSQL's are written in its 64-bit types.
func TestMigrationFiles(t *testing.T) {
	t.Parallel()
	lite, err := migrationsOf("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrationsOf("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if len(lite) != len(pg) {
		t.Fatalf("%d SQLite migrations, %d PostgreSQL ones", len(lite), len(pg))
	}
	sqliteTypes := regexp.MustCompile(`\b(INTEGER|REAL|BLOB)\b`)
	for i := range lite {
		if path.Base(lite[i].file) != path.Base(pg[i].file) {
			t.Errorf("version %d is %s on SQLite, %s on PostgreSQL", i+1, lite[i].file, pg[i].file)
		}
		for n, line := range strings.Split(pg[i].sql, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "--") && sqliteTypes.MatchString(line) {
				t.Errorf("%s:%d: %q: PostgreSQL's INTEGER and REAL are 32 bits: write BIGINT, DOUBLE PRECISION (and BYTEA for BLOB)", pg[i].file, n+1, line)
			}
		}
	}
}

// TestLoadMigrationsRefusesBadFiles: a misnamed, missing or empty
// migration is an error that names the file.
func TestLoadMigrationsRefusesBadFiles(t *testing.T) {
	t.Parallel()
	ok := &fstest.MapFile{Data: []byte("CREATE TABLE t (x TEXT);\n")}
	for _, tc := range []struct {
		files fstest.MapFS
		want  string
	}{
		{fstest.MapFS{"m/0001_a.sql": ok, "m/2_b.sql": ok}, "m/2_b.sql: want a file named NNNN_what.sql"},
		{fstest.MapFS{"m/0001_a.sql": ok, "m/0002_b.txt": ok}, "m/0002_b.txt: want a file named NNNN_what.sql"},
		{fstest.MapFS{"m/0001_a.sql": ok, "m/0002.sql": ok}, "m/0002.sql: want a file named NNNN_what.sql"},
		{fstest.MapFS{"m/0001_a.sql": ok, "m/0003_c.sql": ok}, "m/0003_c.sql: version 3 where 2 is next"},
		{fstest.MapFS{"m/0001_a.sql": ok, "m/0001_b.sql": ok}, "m/0001_b.sql: version 1 where 2 is next"},
		{fstest.MapFS{"m/0001_a.sql": {Data: []byte("\n-- only a comment\n")}}, "m/0001_a.sql: empty"},
		{fstest.MapFS{"m/0001_a.sql": {Data: nil}}, "m/0001_a.sql: empty"},
		{fstest.MapFS{"m/x/0001_a.sql": ok}, "m/x: want a file named"},
		{fstest.MapFS{"n/0001_a.sql": ok}, "m"},
	} {
		_, err := loadMigrations(tc.files, "m")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error with %q", tc.files, err, tc.want)
		}
	}
	ms, err := loadMigrations(fstest.MapFS{"m/0001_a.sql": ok, "m/0002_b_c.sql": ok}, "m")
	if err != nil || len(ms) != 2 || ms[1].version != 2 || ms[1].file != "m/0002_b_c.sql" {
		t.Fatalf("%+v, %v", ms, err)
	}
}

// TestNewStoreSchema: a new store's schema is the one the orchestrator
// made before the migrations were files (testdata/schema, written then),
// on each database.
func TestNewStoreSchema(t *testing.T) {
	t.Parallel()
	checkSchema(t, open(t, t.TempDir()))
}

// updateSchema rewrites testdata/schema from the migrations (after adding
// one: go test ./internal/store -run 'TestNewStoreSchema|TestPostgres/TestNewStoreSchema' -update).
var updateSchema = flag.Bool("update", false, "rewrite testdata/schema from the migrations")

// checkSchema compares the schema of s with the one of testdata/schema.
func checkSchema(t *testing.T, s *Store) {
	t.Helper()
	name := "sqlite.txt"
	if onPostgres(t) {
		name = "postgres.txt"
	}
	want, err := os.ReadFile(filepath.Join("testdata", "schema", name))
	if err != nil {
		t.Fatal(err)
	}
	got := describeSchema(t, s)
	if *updateSchema {
		if err := os.WriteFile(filepath.Join("testdata", "schema", name), []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("schema differs from testdata/schema/%s at line %d:\n got: %q\nwant: %q", name, i+1, g, w)
		}
	}
}

// TestOpenStoreOfBefore: the stores of testdata, made by the orchestrator
// of before the migrations were files at schema versions 4 and 8, open
// under this code: the pending migrations apply, the rows are all there,
// the schema is a new store's, and the store works.
func TestOpenStoreOfBefore(t *testing.T) {
	t.Parallel()
	for _, version := range []int{4, 8} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := storeOfBefore(t, version)
			s := open(t, dir)
			checkSchema(t, s)
			checkRowsOfBefore(t, s)
			if version == 8 {
				checkRowsOfBeforeAPI(t, s)
			}
			checkFeedOfBefore(t, s)
			// The store works: the pending set takes its last answer, and
			// a new run has the columns of the later migrations.
			rec, err := s.RecordAnswer(ctx, questions.Response{SetID: "old-1-s1", By: "bob", Surface: "terminal",
				Answers: []questions.Answer{{QuestionID: "qb", Text: "because"}}})
			if err != nil || rec.State != SetAnswered || len(rec.Response.Answers) != 2 {
				t.Fatalf("answer the pending set: %+v, %v", rec, err)
			}
			if _, err := s.CreateRun(ctx, Run{ID: "after", Prompt: "p", Host: "h1"}); err != nil {
				t.Fatal(err)
			}
			if r, err := s.Run(ctx, "after"); err != nil || r.Host != "h1" {
				t.Fatalf("new run: %+v, %v", r, err)
			}
			// Opened again, it is up to date: nothing to migrate.
			open(t, dir)
		})
	}
}

// TestOpenStoreOfBeforeConcurrently: several processes opening a store of
// before at once migrate it once; all of them get an up-to-date store.
func TestOpenStoreOfBeforeConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := storeOfBefore(t, 4)
	var u string
	if onPostgres(t) {
		u = pgURL(t, dir)
	}
	const n = 4
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
	checkSchema(t, stores[n-1])
	checkRowsOfBefore(t, stores[0])
}

// storeOfBefore returns a state directory whose store is the fixture of
// the given schema version: the SQLite file copied into it, or the
// pg_dump loaded into its PostgreSQL schema.
func storeOfBefore(t *testing.T, version int) string {
	t.Helper()
	dir := t.TempDir()
	if onPostgres(t) {
		loadDump(t, pgURL(t, dir), filepath.Join("testdata", postgresFixture(version)))
		return dir
	}
	b, err := os.ReadFile(filepath.Join("testdata", sqliteFixture(version)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// loadDump loads a pg_dump of testdata into the schema of url.
func loadDump(t *testing.T, url, file string) {
	t.Helper()
	dump, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), string(dump)); err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
}

// checkRowsOfBefore checks the rows both fixtures hold (testdata/README.md).
func checkRowsOfBefore(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	at := func(n int64) time.Time { return time.Unix(0, 1795000000000000000+n).UTC() }
	r, err := s.Run(ctx, "old-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != RunWaiting || r.Spec != "nightly" || r.Prompt != "tidy the docs" || r.CostUSD != 0.25 ||
		r.SessionID != "sess-old-1" || !r.CreatedAt.Equal(at(0)) || strings.Join(r.Surfaces, ",") != "terminal,github" || r.Host != "" {
		t.Errorf("run old-1: %+v", r)
	}
	if r, err := s.Run(ctx, "old-2"); err != nil || r.Status != RunDone || r.FinalText != "Fixed." || r.CostUSD != 1.5 {
		t.Errorf("run old-2: %+v, %v", r, err)
	}
	if turns, err := s.Turns(ctx, "old-1"); err != nil || len(turns) != 1 || turns[0].Result.InputTokens != 1200 || !turns[0].FinishedAt.Equal(at(4)) {
		t.Errorf("turns of old-1: %+v, %v", turns, err)
	}
	set, err := s.QuestionSet(ctx, "old-1-s1")
	if err != nil {
		t.Fatal(err)
	}
	if set.State != SetPending || len(set.Set.Questions) != 2 || len(set.Response.Answers) != 1 ||
		set.Response.Answers[0].Labels[0] != "A" || set.Response.By != "@octocat" || questions.KindOf(set.Set) != questions.KindMarker {
		t.Errorf("set old-1-s1: %+v", set)
	}
	d, ok, err := s.Delivery(ctx, "old-2")
	if err != nil || !ok || d.Branch != "orchestrator/old-2" || d.State != DeliveryOpened || d.PRNumber != 7 || !d.Pushed || d.Pending || d.Attempts != 0 {
		t.Errorf("delivery of old-2: %+v, %v, %v", d, ok, err)
	}
	if c, err := s.ToolCall(ctx, "toolu_01"); err != nil || c.Decision != DecisionAllow || c.Tool != "Bash" || !c.UsedAt.Equal(at(2)) {
		t.Errorf("tool call: %+v, %v", c, err)
	}
	if rules, err := s.RunRules(ctx, "old-1"); err != nil || len(rules) != 1 || rules[0] != "Bash(make:*)" {
		t.Errorf("run rules: %v, %v", rules, err)
	}
	if p, err := s.RunPolicy(ctx, "old-1"); err != nil || !jsonEqual(p, `{"ask":["Bash"]}`) {
		t.Errorf("run policy: %s, %v", p, err)
	}
	if dec, err := s.CommentDecision(ctx, "github:o/r#42:1001"); err != nil || dec != "answer" {
		t.Errorf("comment decision: %q, %v", dec, err)
	}
	if v, ok, err := s.Ref(ctx, "github", "issue:old-1"); err != nil || !ok || v != "42" {
		t.Errorf("surface ref: %q, %v, %v", v, ok, err)
	}
	// A ref stored before refs knew their run and age is of no run, and
	// its age starts with the migration.
	var refRun string
	var refAt int64
	if err := s.db.QueryRowContext(ctx, `SELECT run_id, updated_at FROM surface_refs WHERE surface = 'github' AND key = 'issue:old-1'`).Scan(&refRun, &refAt); err != nil ||
		refRun != "" || refAt <= 0 || time.Since(fromNanos(refAt)) > 24*time.Hour || time.Until(fromNanos(refAt)) > 24*time.Hour {
		t.Errorf("surface ref's run %q and time %v (%v), want none and the migration's", refRun, fromNanos(refAt), err)
	}
	if last, ok, err := s.LastScheduled(ctx, "nightly"); err != nil || !ok || !last.Equal(at(0)) {
		t.Errorf("schedule: %v, %v, %v", last, ok, err)
	}
}

// checkRowsOfBeforeAPI checks the rows the fixtures of version 8 hold,
// made through the store's API.
func checkRowsOfBeforeAPI(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if set, err := s.QuestionSet(ctx, "new-1-s1"); err != nil || set.State != SetAnswered || set.Response.By != "alice" {
		t.Errorf("set new-1-s1: %+v, %v", set, err)
	}
	if b, ok, err := s.Session(ctx, "new-1", "sess-1"); err != nil || !ok || string(b) != `{"type":"user"}`+"\n" {
		t.Errorf("session: %q, %v, %v", b, ok, err)
	}
	if g, ok, err := s.GitGuard(ctx, "new-1"); err != nil || !ok || g.CommonDir != "/srv/repo/.git" || string(g.Snapshot) != "snapshot" {
		t.Errorf("git guard: %+v, %v, %v", g, ok, err)
	}
	if d, ok, err := s.Delivery(ctx, "new-1"); err != nil || !ok || !d.Pending || d.Attempts != 2 || d.LastError != "push: connection refused" {
		t.Errorf("delivery of new-1: %+v, %v, %v", d, ok, err)
	}
	if calls, err := s.ToolCallsOf(ctx, "new-1"); err != nil || len(calls) != 1 || calls[0].ToolUseID != "toolu_02" {
		t.Errorf("turn tool calls: %+v, %v", calls, err)
	}
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}
