package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// The store's queries are written once, in the SQL that SQLite and
// PostgreSQL share, with `?` placeholders. What differs between the two
// lives behind dialect: the placeholders, the write transaction, the
// schema version and its migration, and how other processes learn that a
// wait may have ended. sqlite.go and postgres.go implement it.
type dialect interface {
	// rebind rewrites a query's `?` placeholders for the database.
	rebind(q string) string
	// begin starts a write transaction that runs alone: no other write
	// transaction of any process runs until it ends, as SQLite's BEGIN
	// IMMEDIATE does.
	begin(ctx context.Context, db *sql.DB) (*sql.Tx, error)
	// migrate brings the schema up to date (migrations), once even when
	// several processes start at the same time.
	migrate(ctx context.Context, db *sql.DB) error
	// poke tells the other processes that waits may have ended (best
	// effort: their slow poll is the fallback).
	poke(s *Store)
	// listen delivers other processes' pokes until ctx ends. The channel
	// is closed when pokes can no longer be delivered; a nil channel means
	// there are none to listen to.
	listen(ctx context.Context, s *Store) (<-chan struct{}, error)
	// version returns a number that changes when another connection
	// commits; ok is false when the database cannot tell, and the poller
	// then looks every time.
	version(ctx context.Context, conn *sql.Conn) (v int64, ok bool, err error)
}

// db is the store's connection pool; its queries are rebound for the
// dialect.
type db struct {
	*sql.DB
	d dialect
	n atomic.Int64 // statements sent through db and its transactions (Store.Statements)
	// ruleSuggest is rules.suggest_after (rules.go: SetRuleSuggestAfter),
	// read where a set is stored.
	ruleSuggest atomic.Int64
}

// rebind counts a statement and rebinds it for the dialect.
func (d *db) rebind(q string) string {
	d.n.Add(1)
	return d.d.rebind(q)
}

func (d *db) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if d.lazy(ctx) {
		return d.lazyExec(ctx, q, args...) // sqlite.go
	}
	return d.DB.ExecContext(ctx, d.rebind(q), args...)
}

func (d *db) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, d.rebind(q), args...)
}

func (d *db) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, d.rebind(q), args...)
}

// txn is a write transaction (Store.tx); its queries are rebound for the
// dialect.
type txn struct {
	*sql.Tx
	d *db
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.d.rebind(q), args...)
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.d.rebind(q), args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.d.rebind(q), args...)
}

// conn is one connection of the pool (the poller's); its queries are
// rebound for the dialect.
type conn struct {
	*sql.Conn
	d dialect
}

func (c conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.Conn.QueryContext(ctx, c.d.rebind(q), args...)
}

// numberPlaceholders rewrites `?` outside quoted strings as $1, $2, …
func numberPlaceholders(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// pokeChannel turns events into a channel of pokes that never blocks the
// sender: a poke while one is pending is folded into it.
func pokeChannel() chan struct{} { return make(chan struct{}, 1) }

func send(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// watchDir delivers a poke for every change in dir (fsnotify) until ctx
// ends.
func watchDir(ctx context.Context, dir string) (<-chan struct{}, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := fw.Add(dir); err != nil {
		fw.Close()
		return nil, err
	}
	out := pokeChannel()
	go func() {
		defer close(out)
		defer fw.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-fw.Events:
				if !ok {
					return
				}
				send(out)
			case _, ok := <-fw.Errors:
				if !ok {
					return
				}
				send(out) // an overflow may have lost pokes: look
			}
		}
	}()
	return out, nil
}

// retryDelay is how long the PostgreSQL listener waits before it
// reconnects after losing its connection.
const retryDelay = time.Second
