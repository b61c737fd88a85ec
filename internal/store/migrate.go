package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// The migrations are SQL files, one directory per database, applied in the
// order of the version that starts their name (migrations/sqlite/0001_runs.sql
// is version 1). Both directories hold the same versions under the same
// names: PostgreSQL's file is SQLite's written in PostgreSQL's types
// (SQLite's INTEGER and REAL are 64 bits, PostgreSQL's BIGINT and DOUBLE
// PRECISION; SQLite's BLOB is BYTEA). A file that has shipped is never
// edited: a change is a new file in each directory.
//
// The version record is the one the store always had: PRAGMA user_version
// on SQLite, the table schema_migrations (a row per version applied) on
// PostgreSQL. So a store made before the migrations were files opens and
// migrates as any other. There are no down steps: a store is never
// migrated down (one newer than the program is refused, and going back to
// an older orchestrator means restoring the backup taken before the
// upgrade), and a down step that drops a table would drop the runs' state.
//
// A small runner rather than goose: goose keeps its own version table
// (goose_db_version, a row per version from a version 0), so keeping
// user_version and schema_migrations would take a custom goose store that
// fakes those rows; and goose runs each migration in a transaction of its
// own with no lock for SQLite, where two processes upgrading one file at
// once could both apply a migration. The runner applies SQLite's pending
// migrations in one exclusive transaction and takes PostgreSQL's advisory
// lock keyed by the store's schema, as the store always did.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migration is one file of a database's migrations.
type migration struct {
	version int
	file    string // its path in migrationFiles, for errors
	sql     string
}

// migrationsOf reads the migrations of a database: "sqlite" or "postgres".
func migrationsOf(db string) ([]migration, error) {
	return loadMigrations(migrationFiles, "migrations/"+db)
}

// loadMigrations reads the migrations in dir of fsys: files named
// NNNN_what.sql whose versions run 1, 2, 3, … with none missing.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name
		file := path.Join(dir, e.Name())
		digits, rest, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(digits)
		if e.IsDir() || !ok || err != nil || len(digits) != 4 || !strings.HasSuffix(rest, ".sql") || len(rest) == len(".sql") {
			return nil, fmt.Errorf("migration %s: want a file named NNNN_what.sql (NNNN its version)", file)
		}
		if want := len(ms) + 1; v != want {
			return nil, fmt.Errorf("migration %s: version %d where %d is next", file, v, want)
		}
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", file, err)
		}
		if !hasStatement(string(b)) {
			return nil, fmt.Errorf("migration %s: empty (only comments)", file)
		}
		ms = append(ms, migration{version: v, file: file, sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrations: none in %s", dir)
	}
	return ms, nil
}

// hasStatement reports whether a migration has a line that is neither
// blank nor a comment.
func hasStatement(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return true
		}
	}
	return false
}

// errNewerSchema refuses a store that a newer orchestrator migrated.
func errNewerSchema(version, known int) error {
	return fmt.Errorf("migrate: database schema version %d is newer than this orchestrator knows (%d): upgrade the orchestrator", version, known)
}

// migrate is SQLite's migration: an exclusive transaction serialises
// concurrent openers and applies every pending migration at once; PRAGMA
// user_version counts the migrations applied.
func (sqliteDialect) migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrationsOf("sqlite")
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Up to date (the usual case): nothing to write, and no commit to sync.
	var current int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if current == len(ms) {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	rollback := func(err error) error {
		conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return rollback(fmt.Errorf("migrate: %w", err))
	}
	if version > len(ms) {
		return rollback(errNewerSchema(version, len(ms)))
	}
	for _, m := range ms[version:] {
		if _, err := conn.ExecContext(ctx, m.sql); err != nil {
			return rollback(fmt.Errorf("migrate to version %d (%s): %w", m.version, m.file, err))
		}
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(ms))); err != nil {
		return rollback(fmt.Errorf("migrate: %w", err))
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// migrate applies the migrations not yet applied, each in a transaction
// with its row in schema_migrations, under a session advisory lock: when
// several processes start at once on an empty database, one migrates and
// the others then find the schema up to date.
func (d *pgDialect) migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrationsOf("postgres")
	if err != nil {
		return err
	}
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, d.lockKey("migrate")); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer c.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, d.lockKey("migrate"))
	if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	if err := c.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if version > len(ms) {
		return errNewerSchema(version, len(ms))
	}
	for _, m := range ms[version:] {
		if err := applyPostgres(ctx, c, m); err != nil {
			return fmt.Errorf("migrate to version %d (%s): %w", m.version, m.file, err)
		}
	}
	return nil
}

// applyPostgres runs one migration and records it, in one transaction.
func applyPostgres(ctx context.Context, c *sql.Conn, m migration) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		tx.Rollback()
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
		m.version, time.Now().UnixNano()); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
