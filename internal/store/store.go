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
	// cancels counts this process's CancelRun commits, and ownPoke is the
	// wake file's stamp after this process's last poke (WakeStamp).
	cancels atomic.Int64
	ownPoke atomic.Value // string
	// ruleMax is rules.max_lifetime (rules.go: SetRuleMaxLifetime).
	ruleMax atomic.Int64
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
	return &Store{db: &db{DB: pool, d: d}, d: d, dir: dir, path: path, now: time.Now, pollEvery: pollInterval,
		instance: newInstanceID(), leaseTTL: DefaultLeaseTTL}
}

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
	if d, ok := s.d.(*pgDialect); ok {
		d.notify.close()
	}
	return s.db.Close()
}

// Dir is the state directory.
func (s *Store) Dir() string { return s.dir }

// tx runs fn in a write transaction that runs alone (dialect.begin: BEGIN
// IMMEDIATE on SQLite), committing when fn returns nil.
func (s *Store) tx(ctx context.Context, fn func(*txn) error) error {
	if s.db.lazy(ctx) {
		return s.lazyTx(ctx, fn) // sqlite.go
	}
	sqlTx, err := s.d.begin(ctx, s.db.DB)
	if err != nil {
		return err
	}
	s.db.n.Add(2) // its begin, and its commit or rollback (Statements)
	tx := &txn{Tx: sqlTx, d: s.db}
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
