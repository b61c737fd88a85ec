package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// backupDoc is docs/operations.md's "Backup and restore" section: its
// shell blocks (the SQLite backup, then the PostgreSQL one) and the
// pg_restore command shown inline.
type backupDoc struct {
	prose             string
	sqliteBackup      string
	pgDump, pgRestore string
}

func readBackupDoc(t *testing.T) backupDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Backup and restore\n")
	if i < 0 {
		t.Fatal(`docs/operations.md: no section "Backup and restore"`)
	}
	sec := doc[i+1:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)\n```").FindAllStringSubmatch(sec, -1)
	restore := regexp.MustCompile("`(pg_restore [^`]*)`").FindStringSubmatch(sec)
	if len(blocks) != 2 || restore == nil {
		t.Fatalf("docs/operations.md, Backup and restore: want two sh blocks (SQLite, PostgreSQL) and an inline pg_restore command, found %d blocks, pg_restore %v", len(blocks), restore != nil)
	}
	d := backupDoc{prose: sec, sqliteBackup: blocks[0][1], pgDump: blocks[1][1], pgRestore: restore[1]}
	if !strings.HasPrefix(d.sqliteBackup, "sqlite3 ") || !strings.HasPrefix(d.pgDump, "pg_dump ") {
		t.Fatalf("docs/operations.md, Backup and restore: blocks %q and %q, want sqlite3 then pg_dump", d.sqliteBackup, d.pgDump)
	}
	return d
}

// shell runs a command the doc shows, as a shell would, in dir with env
// added; the doc's /backups/ folder is backups here.
func shell(t *testing.T, dir, backups, command string, env ...string) {
	t.Helper()
	command = strings.ReplaceAll(command, "/backups/", backups+"/")
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
}

// waitingRun makes a run waiting on one question in st.
func waitingRun(t *testing.T, st *store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateRun(ctx, store.Run{ID: id, Prompt: "back me up"}); err != nil {
		t.Fatal(err)
	}
	turn, err := st.BeginTurn(ctx, store.Turn{RunID: id, Kind: store.TurnStart, Prompt: "back me up", SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	set := questions.NewSet(id, turn.Seq, []questions.Question{{Text: "Restore to which day?", Options: []questions.Option{{Label: "Today"}, {Label: "Yesterday"}}}})
	if err := st.FinishTurn(ctx, id, turn.Seq, store.TurnResult{Status: "success", SessionID: "s"}, &set, []string{"terminal"}); err != nil {
		t.Fatal(err)
	}
}

// checkRestored runs `orchestrator status --json` on tm and checks that
// the run still waits on its question.
func checkRestored(t *testing.T, tm *testMain, id string) {
	t.Helper()
	if code := tm.exec("status", "--json"); code != 0 {
		t.Fatalf("status on the restored store: exit %d\n%s%s", code, tm.stdout.String(), tm.stderr.String())
	}
	var rep statusReport
	if err := json.Unmarshal(tm.stdout.Bytes(), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, tm.stdout.String())
	}
	if len(rep.Runs) != 1 || rep.Runs[0].ID != id || rep.Runs[0].Status != "waiting" ||
		len(rep.QuestionSets) != 1 || rep.QuestionSets[0].RunID != id {
		t.Fatalf("status on the restored store: %s\nwant run %s waiting on its question", tm.stdout.String(), id)
	}
}

// TestDocsBackupRestoreSQLite runs docs/operations.md's SQLite backup
// command, as shown, while the store is open with a waiting run (the
// newest commits still in the -wal file), then restores it the way the
// doc says: the restored store has the run waiting and status reads it.
func TestDocsBackupRestoreSQLite(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Fatalf("docs/operations.md's backup uses the sqlite3 shell, which is missing: apt-get install -y sqlite3 (%v)", err)
	}
	doc := readBackupDoc(t)
	for _, f := range []string{"orchestrator.db-wal", "orchestrator.db-shm", "as `orchestrator.db`"} {
		if !strings.Contains(doc.prose, f) {
			t.Fatalf("docs/operations.md's SQLite restore no longer mentions %s: this test follows it, update both", f)
		}
	}
	tm := newTestMain(t)
	home := filepath.Join(tm.Dir, "home")
	state := filepath.Join(home, ".local", "state", "orchestrator") // the doc's path, under this HOME
	backups := filepath.Join(tm.Dir, "backups")
	os.MkdirAll(backups, 0o755)
	st, err := store.Open(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	waitingRun(t, st, "run-backup-sqlite")
	if fi, err := os.Stat(filepath.Join(state, "orchestrator.db-wal")); err != nil || fi.Size() == 0 {
		t.Fatalf("the store's -wal file is empty or missing (%v): the backup would not show it is read", err)
	}
	shell(t, tm.Dir, backups, doc.sqliteBackup, "HOME="+home)
	// Something after the backup is not in it.
	waitingRun(t, st, "run-after-backup")
	st.Close()

	// Restore: move orchestrator.db and its -wal and -shm away, put the
	// backup in its place.
	moved := filepath.Join(tm.Dir, "moved")
	os.MkdirAll(moved, 0o755)
	for _, f := range []string{"orchestrator.db", "orchestrator.db-wal", "orchestrator.db-shm"} {
		if err := os.Rename(filepath.Join(state, f), filepath.Join(moved, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	found, _ := filepath.Glob(filepath.Join(backups, "orchestrator-*.db"))
	if len(found) != 1 {
		t.Fatalf("backups: %v, want the one the doc's command wrote", found)
	}
	if err := os.Rename(found[0], filepath.Join(state, "orchestrator.db")); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, tm, "run-backup-sqlite")
}

// TestDocsBackupRestorePostgres runs docs/operations.md's pg_dump and
// pg_restore commands, as shown, on a throwaway cluster: a dump taken
// while the store is open with a waiting run, restored into an empty
// database, has the run waiting, and status reads it there.
func TestDocsBackupRestorePostgres(t *testing.T) {
	t.Parallel()
	doc := readBackupDoc(t)
	base := pgtest.Shared(t)
	bin, err := pgtest.Bin(pgtest.BinGlob)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := newDatabase(t, base), newDatabase(t, base)
	tm := newTestMain(t, "ORCHESTRATOR_DATABASE_URL", dst)
	backups := filepath.Join(tm.Dir, "backups")
	os.MkdirAll(backups, 0o755)
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH") // the server's own version of the tools

	st, err := store.OpenDatabase(context.Background(), filepath.Join(tm.Dir, "state-src"), src)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitingRun(t, st, "run-backup-pg")
	shell(t, tm.Dir, backups, doc.pgDump, path, "ORCHESTRATOR_DATABASE_URL="+src)
	found, _ := filepath.Glob(filepath.Join(backups, "orchestrator-*.dump"))
	if len(found) != 1 {
		t.Fatalf("backups: %v, want the one the doc's command wrote", found)
	}
	// FILE is the dump the doc's pg_dump wrote.
	restore := strings.ReplaceAll(doc.pgRestore, "FILE", "/backups/"+shQuote(filepath.Base(found[0])))
	shell(t, tm.Dir, backups, restore, path, "ORCHESTRATOR_DATABASE_URL="+dst)
	checkRestored(t, tm, "run-backup-pg")
}

var dbSeq atomic.Int64

// newDatabase makes an empty database in the cluster at base, dropped when
// the test ends, and returns its URL.
func newDatabase(t *testing.T, base string) string {
	t.Helper()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := fmt.Sprintf("backup_%d_%d", os.Getpid(), dbSeq.Add(1))
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err == nil {
			db.Exec("DROP DATABASE " + name + " WITH (FORCE)")
			db.Close()
		}
	})
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
