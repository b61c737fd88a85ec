package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenDatabase opens the store of the config's database_url: empty is the
// embedded SQLite database in dir (Open); postgres://… (or postgresql://…)
// is that PostgreSQL database, whose schema is brought up to date. dir is
// the state directory either way (the locks of the runs this process
// drives are files in it).
//
// Errors never contain the URL, which may hold a password.
func OpenDatabase(ctx context.Context, dir, databaseURL string) (*Store, error) {
	if databaseURL == "" {
		return Open(ctx, dir)
	}
	if dir == "" {
		return nil, errors.New("open store: no state directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := ignoreDir(dir); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if !isPostgresURL(databaseURL) {
		return nil, errors.New("open store: database_url is neither empty nor a postgres:// URL")
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, errors.New("open store: database_url is not a valid PostgreSQL URL")
	}
	pool := stdlib.OpenDB(*cfg)
	pool.SetMaxOpenConns(8)
	pool.SetMaxIdleConns(4)
	d := &pgDialect{cfg: cfg}
	d.notify = &notifier{connect: func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) }}
	// Advisory locks are the database's, not a schema's: they are keyed by
	// the schema too, so that orchestrators in two schemas of one database
	// (or the tests, a schema each) do not take each other's locks.
	if err := pool.QueryRowContext(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&d.schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store (PostgreSQL %s/%s): %w", cfg.Host, cfg.Database, err)
	}
	if err := d.migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store (PostgreSQL %s/%s): %w", cfg.Host, cfg.Database, err)
	}
	return newStore(pool, d, dir, ""), nil
}

// isPostgresURL reports whether a database_url names a PostgreSQL database.
func isPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// pgDialect is a PostgreSQL database shared by any number of processes on
// any number of machines.
type pgDialect struct {
	cfg    *pgx.ConnConfig // for the connections outside the pool (listener, leader)
	schema string          // where the store's tables are (current_schema())
	notify *notifier       // the one LISTEN connection, of pokes and nudges
}

// lockKey is the advisory lock key (pg_advisory_lock) of purpose in the
// store's schema: "migrate", held by the one process migrating; "write",
// held by each write transaction; "leader …" (Lead).
func (d *pgDialect) lockKey(purpose string) int64 {
	h := fnv.New64a()
	h.Write([]byte("orchestrator\x00" + d.schema + "\x00" + purpose))
	return int64(h.Sum64() >> 1)
}

// pgWakeChannel is the NOTIFY channel of pokes.
const pgWakeChannel = "orchestrator_wake"

func (*pgDialect) rebind(q string) string { return numberPlaceholders(q) }

// begin takes the writers' advisory lock for the transaction, so that write
// transactions run one at a time as they do on SQLite: every check-then-
// write of the store (claim an answered set exactly once, a final run is
// never changed) holds as it does there. Read committed reads see every
// transaction committed before the lock was granted.
func (d *pgDialect) begin(ctx context.Context, db *sql.DB) (*sql.Tx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, d.lockKey("write")); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx, nil
}

// poke sends NOTIFY on the wake channel; it reaches the listeners of every
// process on the database once the commit before it is visible.
func (*pgDialect) poke(s *Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.db.DB.ExecContext(ctx, `SELECT pg_notify($1, '')`, pgWakeChannel)
}

// listen delivers the pokes of the wake channel through the store's
// notifier, which reconnects when it loses its connection and then pokes
// (pokes may have been lost meanwhile: look); while it is lost the slow
// poll stands in.
func (d *pgDialect) listen(ctx context.Context, _ *Store) (<-chan struct{}, error) {
	out := pokeChannel()
	poke := func() { send(out) }
	leave := d.notify.subscribe(&subscriber{channel: pgWakeChannel, notify: func(string) { poke() }, connected: poke})
	go func() {
		<-ctx.Done()
		leave()
		close(out)
	}()
	return out, nil
}

// version: PostgreSQL has no cheap number of commits, so the poller looks
// at the waits every time it is poked or its slow poll ticks.
func (*pgDialect) version(context.Context, *sql.Conn) (int64, bool, error) { return 0, false, nil }

// closeConn closes a connection outside the pool (the leader's), waiting at most a few seconds
// for a server that may be gone.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c.Close(ctx)
}
