// Package store is the orchestrator's durable state: runs, their turns, the
// question sets the model asked and the answers people gave, in one SQLite
// database under the state directory (Open) or in a PostgreSQL database
// several processes share (OpenDatabase; dialect.go says what differs).
//
// Every state change is one transaction. The question-set state machine is
//
//	pending → answered → resuming → resumed
//	pending → expired (the question timed out and the run gave up on it)
//
// and the step answered → resuming (Claim) happens in the same transaction
// that records the turn about to carry the answer to the model, before the
// CLI starts. A crash at any point therefore leaves a state from which the
// run loop can tell exactly what still has to happen.
package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Errors callers check with errors.Is.
var (
	ErrNotFound        = errors.New("not found")
	ErrAlreadyAnswered = errors.New("already answered")
	ErrNotClaimable    = errors.New("question set is not answered, or already claimed")
	ErrAmbiguous       = errors.New("ambiguous question ID")
)

// Store is the database. It is safe for concurrent use, also by several
// processes on the same state directory.
type Store struct {
	db   *db
	d    dialect
	dir  string
	path string
	now  func() time.Time
	w    watcher
	// pollEvery is how often waiters look for changes whose poke they
	// missed (pollInterval); noPokes makes them rely on that alone (tests).
	pollEvery time.Duration
	noPokes   bool
	// instance names this process in a shared store; leaseTTL is how long
	// its run leases last unless renewed (cluster.go).
	instance string
	leaseTTL time.Duration
	// held maps the ID of each run whose lock this process holds to the
	// take's fencing token (fence.go: HeldToken).
	held sync.Map
	// statements counts what the store sends to its database (Statements).
	statements atomic.Int64
}

// ignoreDir writes a .gitignore that ignores everything into the state
// directory, once: a state_dir inside a checkout ("state_dir: ./state"
// beside the repository) leaves `git status` clean.
func ignoreDir(dir string) error {
	p := filepath.Join(dir, ".gitignore")
	if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil // there already (a person's own is left alone), or unreadable: not ours to fix
	}
	if err := os.WriteFile(p, []byte("# orchestrator's state: never committed\n*\n"), 0o600); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	return nil
}

// FileName is the database's name inside the state directory.
const FileName = "orchestrator.db"

// Open opens (creating it if needed) the database in dir and brings its
// schema up to date.
func Open(ctx context.Context, dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open store: no state directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := ignoreDir(dir); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if err := create(ctx, path); err != nil {
		return nil, fmt.Errorf("create store %s: %w", path, err)
	}
	if err := checkFile(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	pool, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	pool.SetMaxOpenConns(4)
	d := sqliteDialect{}
	if err := d.migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return newStore(pool, d, dir, path), nil
}

func newStore(pool *sql.DB, d dialect, dir, path string) *Store {
	s := &Store{d: d, dir: dir, path: path, now: time.Now, pollEvery: pollInterval,
		instance: newInstanceID(), leaseTTL: DefaultLeaseTTL}
	s.db = &db{DB: pool, d: d, n: &s.statements}
	return s
}

// Statements is how many statements the store has sent to its database
// since it was opened: every query and exec, and each write transaction's
// begin and end. The waiters' poller (wait.go), which runs on a timer, is
// not counted. Tests use it to measure what a step of a run costs.
func (s *Store) Statements() int64 { return s.statements.Load() }

func dsn(path string) string {
	return "file:" + path +
		"?_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(FULL)" +
		"&_pragma=busy_timeout(15000)" +
		"&_pragma=foreign_keys(1)" +
		"&_txlock=immediate"
}

// create makes a new database at path when there is none, atomically: it is
// built and migrated under a temporary name, then linked into place (link
// fails rather than replace a database another process made meanwhile). So
// the file at path is never empty or half made by this program, and
// checkFile may treat such a file as damage even while several processes
// start at once on a new state directory.
func create(ctx context.Context, path string) error {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil // there is one (or stat failed: checkFile says why)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"} {
			os.Remove(p)
		}
	}()
	db, err := sql.Open("sqlite", dsn(tmp))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	if err := (sqliteDialect{}).migrate(ctx, db); err != nil {
		db.Close()
		return err
	}
	// The last connection's close checkpoints the WAL into the file.
	if err := db.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// checkFile refuses a database file that exists but is not a whole SQLite
// database: empty, cut short, or something else. SQLite would otherwise
// treat an empty file as a new database, and the state (runs waiting on
// answers) would silently start afresh. A file that does not exist is a
// new store.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	const move = "; move it away to start with an empty store, or restore it from a backup"
	size := fi.Size()
	if _, err := os.Stat(path + "-wal"); err == nil {
		// Another process has it open (or crashed with it open): it may be
		// creating the file or checkpointing into it right now, so only a
		// foreign file is refused; SQLite recovers the rest from the WAL.
		var h [16]byte
		if n, _ := io.ReadFull(f, h[:]); n == len(h) && string(h[:]) != "SQLite format 3\x00" {
			return errors.New("the file is not a SQLite database" + move)
		}
		return nil
	}
	if size == 0 {
		return errors.New("the database file is empty (truncated or damaged)" + move)
	}
	// The header (sqlite.org/fileformat.html §1.3): the magic string, the
	// page size at offset 16, the change counter at 24, the size in pages at
	// 28, valid when the number at 92 equals the change counter.
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return fmt.Errorf("the database file is %d bytes, shorter than a SQLite header (truncated or damaged)%s", size, move)
	}
	if string(h[:16]) != "SQLite format 3\x00" {
		return errors.New("the file is not a SQLite database" + move)
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("the database header is damaged (page size %d)%s", pageSize, move)
	}
	if size%pageSize != 0 {
		return fmt.Errorf("the database file is %d bytes, not a whole number of %d-byte pages (truncated)%s", size, pageSize, move)
	}
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	if binary.BigEndian.Uint32(h[92:96]) == binary.BigEndian.Uint32(h[24:28]) && size < pages*pageSize {
		return fmt.Errorf("the database file is %d bytes, its header says %d (truncated)%s", size, pages*pageSize, move)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.w.close()
	return s.db.Close()
}

// Dir is the state directory.
func (s *Store) Dir() string { return s.dir }

// migrations are applied in order; PRAGMA user_version (SQLite) or the
// table schema_migrations (PostgreSQL, which runs them with BIGINT for
// INTEGER and DOUBLE PRECISION for REAL: postgres.go) counts those applied.
// Never edit one that has shipped: append a new one.
var migrations = []string{
	`CREATE TABLE runs (
		id          TEXT PRIMARY KEY,
		spec        TEXT NOT NULL DEFAULT '',
		title       TEXT NOT NULL DEFAULT '',
		prompt      TEXT NOT NULL,
		workdir     TEXT NOT NULL DEFAULT '',
		surfaces    TEXT NOT NULL DEFAULT '[]',
		options     TEXT NOT NULL DEFAULT '{}',
		status      TEXT NOT NULL,
		session_id  TEXT NOT NULL DEFAULT '',
		error       TEXT NOT NULL DEFAULT '',
		final_text  TEXT NOT NULL DEFAULT '',
		cost_usd    REAL NOT NULL DEFAULT 0,
		created_at  INTEGER NOT NULL,
		updated_at  INTEGER NOT NULL
	);
	CREATE INDEX runs_status ON runs(status);
	CREATE INDEX runs_spec ON runs(spec, created_at);
	CREATE TABLE turns (
		run_id          TEXT NOT NULL REFERENCES runs(id),
		seq             INTEGER NOT NULL,
		kind            TEXT NOT NULL,
		prompt          TEXT NOT NULL,
		set_id          TEXT NOT NULL DEFAULT '',
		session_id      TEXT NOT NULL DEFAULT '',
		resume          INTEGER NOT NULL DEFAULT 0,
		transcript_path TEXT NOT NULL DEFAULT '',
		finished        INTEGER NOT NULL DEFAULT 0,
		status          TEXT NOT NULL DEFAULT '',
		category        TEXT NOT NULL DEFAULT '',
		error           TEXT NOT NULL DEFAULT '',
		cost_usd        REAL NOT NULL DEFAULT 0,
		input_tokens    INTEGER NOT NULL DEFAULT 0,
		output_tokens   INTEGER NOT NULL DEFAULT 0,
		num_turns       INTEGER NOT NULL DEFAULT 0,
		question_error  TEXT NOT NULL DEFAULT '',
		started_at      INTEGER NOT NULL,
		finished_at     INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (run_id, seq)
	);
	CREATE TABLE question_sets (
		id           TEXT PRIMARY KEY,
		run_id       TEXT NOT NULL REFERENCES runs(id),
		turn         INTEGER NOT NULL,
		state        TEXT NOT NULL,
		body         TEXT NOT NULL,
		surfaces     TEXT NOT NULL DEFAULT '[]',
		created_at   INTEGER NOT NULL,
		answered_at  INTEGER NOT NULL DEFAULT 0,
		claimed_at   INTEGER NOT NULL DEFAULT 0,
		resumed_at   INTEGER NOT NULL DEFAULT 0,
		reminded_at  INTEGER NOT NULL DEFAULT 0,
		escalated_at INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX question_sets_run ON question_sets(run_id, state);
	CREATE INDEX question_sets_state ON question_sets(state);
	CREATE TABLE questions (
		id       TEXT NOT NULL,
		set_id   TEXT NOT NULL REFERENCES question_sets(id),
		position INTEGER NOT NULL,
		PRIMARY KEY (set_id, id)
	);
	CREATE INDEX questions_id ON questions(id);
	CREATE TABLE answers (
		set_id      TEXT NOT NULL REFERENCES question_sets(id),
		question_id TEXT NOT NULL,
		body        TEXT NOT NULL,
		answered_by TEXT NOT NULL,
		surface     TEXT NOT NULL,
		at          INTEGER NOT NULL,
		PRIMARY KEY (set_id, question_id)
	);
	CREATE TABLE surface_refs (
		surface TEXT NOT NULL,
		key     TEXT NOT NULL,
		value   TEXT NOT NULL,
		PRIMARY KEY (surface, key)
	);
	CREATE TABLE schedule (
		spec     TEXT PRIMARY KEY,
		last_run INTEGER NOT NULL
	);`,
	// Delivery of a run's work through git (delivery.go).
	`CREATE TABLE deliveries (
		run_id      TEXT PRIMARY KEY REFERENCES runs(id),
		repo_dir    TEXT NOT NULL,
		worktree    TEXT NOT NULL,
		branch      TEXT NOT NULL,
		base        TEXT NOT NULL DEFAULT '',
		base_commit TEXT NOT NULL DEFAULT '',
		state       TEXT NOT NULL,
		commit_sha  TEXT NOT NULL DEFAULT '',
		pushed      INTEGER NOT NULL DEFAULT 0,
		pr_number   INTEGER NOT NULL DEFAULT 0,
		pr_url      TEXT NOT NULL DEFAULT '',
		commented   INTEGER NOT NULL DEFAULT 0,
		note        TEXT NOT NULL DEFAULT '',
		removed_at  INTEGER NOT NULL DEFAULT 0,
		created_at  INTEGER NOT NULL,
		updated_at  INTEGER NOT NULL
	);`,
	// What became of each comment read as a possible answer (GitHub).
	`CREATE TABLE comment_decisions (
		key        TEXT PRIMARY KEY,
		decision   TEXT NOT NULL,
		decided_at INTEGER NOT NULL
	);`,
	// Native asking and tool approvals (approvals.go): a set's kind, the
	// tool calls asked about (their tool_use_id is the idempotency key of
	// the decision), the rules a person allowed for the rest of a run, and
	// the run's approvals policy as its hook reads it.
	`ALTER TABLE question_sets ADD COLUMN kind TEXT NOT NULL DEFAULT 'marker';
	CREATE TABLE tool_calls (
		tool_use_id   TEXT PRIMARY KEY,
		run_id        TEXT NOT NULL REFERENCES runs(id),
		set_id        TEXT NOT NULL DEFAULT '',
		kind          TEXT NOT NULL,
		tool          TEXT NOT NULL,
		input         TEXT NOT NULL DEFAULT '',
		decision      TEXT NOT NULL DEFAULT '',
		reason        TEXT NOT NULL DEFAULT '',
		updated_input TEXT NOT NULL DEFAULT '',
		decided_by    TEXT NOT NULL DEFAULT '',
		deferred      INTEGER NOT NULL DEFAULT 0,
		created_at    INTEGER NOT NULL,
		decided_at    INTEGER NOT NULL DEFAULT 0,
		used_at       INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX tool_calls_run ON tool_calls(run_id);
	CREATE TABLE run_rules (
		run_id     TEXT NOT NULL REFERENCES runs(id),
		rule       TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (run_id, rule)
	);
	CREATE TABLE run_policies (
		run_id     TEXT PRIMARY KEY REFERENCES runs(id),
		policy     TEXT NOT NULL,
		updated_at INTEGER NOT NULL
	);`,
	// Several instances on one PostgreSQL database (cluster.go): the lease
	// of each run an instance drives, the instances, the one run of each
	// schedule tick, the CLI's session files (so any instance can resume a
	// run), and the machine that holds a run's working directory.
	`CREATE TABLE run_leases (
		run_id     TEXT PRIMARY KEY REFERENCES runs(id),
		owner      TEXT NOT NULL,
		expires_at INTEGER NOT NULL
	);
	CREATE TABLE instances (
		id           TEXT PRIMARY KEY,
		host         TEXT NOT NULL,
		pid          INTEGER NOT NULL,
		leader       INTEGER NOT NULL DEFAULT 0,
		driving      INTEGER NOT NULL DEFAULT 0,
		started_at   INTEGER NOT NULL,
		heartbeat_at INTEGER NOT NULL
	);
	CREATE TABLE schedule_ticks (
		spec   TEXT NOT NULL,
		tick   INTEGER NOT NULL,
		run_id TEXT NOT NULL,
		PRIMARY KEY (spec, tick)
	);
	CREATE TABLE sessions (
		run_id     TEXT NOT NULL REFERENCES runs(id),
		session_id TEXT NOT NULL,
		content    BLOB NOT NULL,
		size       INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		PRIMARY KEY (run_id, session_id)
	);
	ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';`,
	// What a run's worktree was when it was added (gitguard.go): the
	// repository it belongs to, the remote's URLs, the checkout's git
	// configuration and hooks, checked before the orchestrator's own git
	// commands commit and push.
	`CREATE TABLE git_guards (
		run_id     TEXT PRIMARY KEY REFERENCES runs(id),
		common_dir TEXT NOT NULL,
		git_dir    TEXT NOT NULL,
		dot_git    TEXT NOT NULL,
		fetch_url  TEXT NOT NULL DEFAULT '',
		push_url   TEXT NOT NULL DEFAULT '',
		snapshot   BLOB NOT NULL,
		checked    INTEGER NOT NULL DEFAULT 0,
		updated_at INTEGER NOT NULL
	);`,
	// A run's delivery that did not finish (a push or a pull request that
	// failed after its retries) is pending: the run is done, and serve and
	// `resume RUN` try again (delivery.go).
	`ALTER TABLE deliveries ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE deliveries ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE deliveries ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE deliveries ADD COLUMN last_error TEXT NOT NULL DEFAULT '';`,
	// Fencing (fence.go): each take of a run's lease gets a token one
	// higher than the last, kept with the lease (the row stays when the
	// lease is given back), that the writes of a turn carry; and the tool
	// calls a turn started and finished, recorded by the CLI's hooks as
	// they happen, so that an instance taking a killed turn over knows
	// what it did.
	`ALTER TABLE run_leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE turn_tool_calls (
		run_id      TEXT NOT NULL REFERENCES runs(id),
		tool_use_id TEXT NOT NULL,
		tool        TEXT NOT NULL,
		input       TEXT NOT NULL DEFAULT '',
		result      TEXT NOT NULL DEFAULT '',
		token       INTEGER NOT NULL,
		started_at  INTEGER NOT NULL,
		finished_at INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (run_id, tool_use_id)
	);`,
}

// migrate is SQLite's migration: an exclusive transaction serialises
// concurrent openers, PRAGMA user_version counts the migrations applied.
func (sqliteDialect) migrate(ctx context.Context, db *sql.DB) error {
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
	if current == len(migrations) {
		return nil
	}
	// An exclusive transaction serialises concurrent openers.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("migrate: %w", err)
	}
	if version > len(migrations) {
		conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("migrate: database schema version %d is newer than this orchestrator knows (%d): upgrade the orchestrator", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := conn.ExecContext(ctx, migrations[i]); err != nil {
			conn.ExecContext(ctx, "ROLLBACK")
			return fmt.Errorf("migrate to version %d: %w", i+1, err)
		}
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// tx runs fn in a write transaction that runs alone (dialect.begin: BEGIN
// IMMEDIATE on SQLite), committing when fn returns nil.
func (s *Store) tx(ctx context.Context, fn func(*txn) error) error {
	sqlTx, err := s.d.begin(ctx, s.db.DB)
	if err != nil {
		return err
	}
	s.statements.Add(2) // its begin, and its commit or rollback
	tx := &txn{Tx: sqlTx, d: s.d, n: &s.statements}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func encodeJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %T: %w", v, err)
	}
	return string(b), nil
}
