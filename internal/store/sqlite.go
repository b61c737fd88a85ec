package store

import (
	"context"
	"database/sql"
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
	_ = os.WriteFile(filepath.Join(dir, "poke"), []byte{'.'}, 0o600)
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
