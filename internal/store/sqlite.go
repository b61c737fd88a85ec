package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
)

// sqliteDialect is the embedded SQLite database in the state directory
// (store.go has its file checks, migrate.go its migration).
type sqliteDialect struct{}

// rebind: SQLite takes `?` as written.
func (sqliteDialect) rebind(q string) string { return q }

// begin: the DSN's _txlock=immediate makes every transaction BEGIN
// IMMEDIATE, which takes the database's one write lock at once.
func (sqliteDialect) begin(ctx context.Context, db *sql.DB) (*sql.Tx, error) {
	return db.BeginTx(ctx, nil)
}

// poke writes the file wake/poke of the state directory, which the other
// processes' waiters watch (wait.go).
func (sqliteDialect) poke(s *Store) {
	dir := filepath.Join(s.dir, wakeDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	p := filepath.Join(dir, "poke")
	if os.WriteFile(p, []byte{'.'}, 0o600) == nil {
		s.ownPoke.Store(fileStamp(p)) // WakeStamp
	}
}

// listen watches the wake directory of the state directory.
func (sqliteDialect) listen(ctx context.Context, s *Store) (<-chan struct{}, error) {
	dir := filepath.Join(s.dir, wakeDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return watchDir(ctx, dir)
}

// version is PRAGMA data_version: it changes when another connection
// commits.
func (sqliteDialect) version(ctx context.Context, conn *sql.Conn) (int64, bool, error) {
	var v int64
	err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	return v, err == nil, err
}

// Durability of commits on SQLite. The database runs in WAL mode with
// synchronous=FULL: a commit returns once its WAL frames are on the disk
// (one fsync), and that is kept for every commit by default.
//
// Lazy(ctx) marks writes whose commit need not wait for the disk: on SQLite
// they commit with synchronous=NORMAL (for that commit only; the connection
// goes back to FULL). Such a commit is as atomic and isolated as any, and a
// crash of the process (kill -9, a panic) loses nothing: its frames are in
// the WAL file, in the operating system's cache. Only a power loss or a
// crash of the operating system can lose it, and then only along with
// every commit after it up to the next one synced (WAL frames are appended
// in order, and the fsync of a later FULL commit, or of a checkpoint, makes
// every earlier frame durable). So a write may be lazy when, before
// anything that depends on it leaves the machine (the agent CLI starts, a
// surface asks or acknowledges, a person is told), a FULL commit follows;
// or when losing it is the same as the process having died before it, a
// case the runner recovers from anyway. What stays FULL is what exactly
// once rests on: the turn's claim of an answered set (BeginTurn) before the
// CLI is given the answer, the turn's outcome and its questions
// (FinishTurn) before surfaces ask them, an answer before a surface
// acknowledges it, a tool call recorded before it runs, every run state a
// person asks for. PostgreSQL ignores the mark.
//
// The lazy writes are the runner's own bookkeeping of a turn (see their
// callers): the run a foreground `orchestrator run` creates (its first
// turn's BeginTurn, FULL, follows before the CLI starts), the copy of the
// CLI's session file saved at the end of a turn (FinishTurn, FULL,
// follows), the approvals policy written before the CLI starts (written
// again before every turn; a power loss that loses it ends that CLI too),
// and the fencing token rows of a run's lock (every process of a SQLite
// store runs on this machine: a power loss ends them all with their CLIs
// and hooks, and the file lock decides who drives). One turn with no
// question so syncs 5 times (2 of them the new WAL file of the process's
// first commit), and twice more at the close's checkpoint,
// where it took 11 and 2.

type lazyKey struct{}

// Lazy returns ctx marking the writes made with it as needing no fsync
// before they return (see above).
func Lazy(ctx context.Context) context.Context { return context.WithValue(ctx, lazyKey{}, true) }

func isLazy(ctx context.Context) bool { v, _ := ctx.Value(lazyKey{}).(bool); return v }

// lazyConn returns a connection whose commits wait for no fsync, and the
// function that gives it back to the pool set to FULL again. A connection
// that cannot be set back is dropped from the pool rather than left lazy.
func (d *db) lazyConn(ctx context.Context) (*sql.Conn, func(), error) {
	conn, err := d.DB.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	release := func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = FULL"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // never back into the pool lazy
		}
		conn.Close()
	}
	return conn, release, nil
}

// lazy says whether a write made with ctx commits lazily.
func (d *db) lazy(ctx context.Context) bool {
	_, sqlite := d.d.(sqliteDialect)
	return sqlite && isLazy(ctx)
}

// lazyTx is Store.tx for a ctx marked Lazy on SQLite.
func (s *Store) lazyTx(ctx context.Context, fn func(*txn) error) error {
	conn, release, err := s.db.lazyConn(ctx)
	if err != nil {
		return err
	}
	defer release()
	sqlTx, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the DSN's _txlock
	if err != nil {
		return err
	}
	s.db.n.Add(2)
	tx := &txn{Tx: sqlTx, d: s.db}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// lazyExec is db.ExecContext for a ctx marked Lazy on SQLite.
func (d *db) lazyExec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	conn, release, err := d.lazyConn(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return conn.ExecContext(ctx, d.rebind(q), args...)
}

// WakeStamp returns a value that changes when this process cancels a run
// (CancelRun) or another process pokes (a commit that may end a wait or
// cancel a run writes the wake file: Store.changed), for a watcher that
// needs no answer within milliseconds and looks now and then instead of
// watching the directory, whose watch (inotify) Linux takes 10–20 ms to
// tear down when the process exits. The file is known by its modification
// time and size; this process's own pokes do not change the stamp (its
// other commits are not news to it). A poke of another process followed,
// within the file system's timestamp granularity, by one of this process
// can go unseen: such a watcher looks anyway now and then. ok is false on
// PostgreSQL, where there is no such file.
func (s *Store) WakeStamp() (stamp string, ok bool) {
	if _, sqlite := s.d.(sqliteDialect); !sqlite {
		return "", false
	}
	file := fileStamp(filepath.Join(s.dir, wakeDir, "poke"))
	if own, _ := s.ownPoke.Load().(string); own != "" && file == own {
		file = "own"
	}
	return fmt.Sprintf("%d %s", s.cancels.Load(), file), true
}

// fileStamp is a file's modification time and size ("" when it cannot be
// read).
func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", fi.ModTime().UnixNano(), fi.Size())
}
