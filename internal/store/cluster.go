package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Several `serve` instances share one PostgreSQL database (a shared store).
// What keeps them from stepping on each other lives here:
//
//   - a run is driven by at most one instance at a time: the instance holds
//     the run's lease (run_leases), renews it while it drives, and gives it
//     back when it stops. A lease not renewed for LeaseTTL is free: a dead
//     instance's runs move on. Lease times are the database's clock, so
//     instances whose clocks disagree still agree on expiry.
//   - one instance leads (Lead): a PostgreSQL advisory lock, held by a
//     connection of its own, that the server releases when the holder's
//     connection dies. The leader holds the shared connections (GitHub
//     polling, the Discord gateway) and asks the waiting runs' questions.
//   - a schedule tick makes one run (schedule_ticks' key: spec and tick).
//
// On SQLite (one state directory, one `serve`), a run's lock is a file
// lock (lock.go), and the one process leads.

// DefaultLeaseTTL is how long a run's lease lasts unless renewed.
const DefaultLeaseTTL = 30 * time.Second

// Shared reports whether other instances may share the store (PostgreSQL).
func (s *Store) Shared() bool {
	_, ok := s.d.(*pgDialect)
	return ok
}

// Instance is this process's name in the shared store: host/pid/random.
func (s *Store) Instance() string { return s.instance }

// SetLeaseTTL sets how long this process's run leases last unless renewed
// (serve.lease_ttl); they are renewed every quarter of it, and given up
// (the CLI stopped) when not renewed for half of it.
func (s *Store) SetLeaseTTL(d time.Duration) {
	if d > 0 {
		s.leaseTTL = d
	}
}

func newInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Hostname is the machine's name as runs record it (Run.Host).
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// dbNow is the database's clock in Unix nanoseconds (PostgreSQL), for
// lease expiry that does not depend on the instances' clocks.
const pgNowNanos = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000)::BIGINT`

// leaseLock takes the lease of run id for this instance: a free or expired
// lease becomes ours, with a fencing token one higher than the run's last
// (fence.go); one held by another instance fails with ErrLocked, naming
// it. A lease we already hold (a second Drive in this process) is refused
// too: a run is driven once per process as well.
func (s *Store) leaseLock(id string) (*Lock, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ttl := s.leaseTTL.Nanoseconds()
	var holder string
	var token int64
	err := s.tx(ctx, func(tx *txn) error {
		var owner string
		var live bool
		err := tx.QueryRowContext(ctx, `SELECT owner, expires_at > `+pgNowNanos+` FROM run_leases WHERE run_id = ? FOR UPDATE`, id).Scan(&owner, &live)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case live:
			holder = owner
			return nil
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO run_leases (run_id, owner, expires_at, token) VALUES (?, ?, `+pgNowNanos+` + ?, 1)
			ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, token = run_leases.token + 1
			WHERE run_leases.expires_at <= `+pgNowNanos+`
			RETURNING token`, id, s.instance, ttl).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			holder = "another instance, which took it at the same time"
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lease of run %s: %w", id, err)
	}
	if holder != "" {
		return nil, fmt.Errorf("run %s is %w (instance %s)", id, ErrLocked, holder)
	}
	l := &Lock{token: token, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go s.renewLease(id, l)
	l.release = func() error {
		close(l.stop)
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		// The row stays, with its token: the next take's is higher.
		_, err := s.db.ExecContext(ctx, `UPDATE run_leases SET owner = '', expires_at = 0 WHERE run_id = ? AND owner = ? AND token = ?`,
			id, s.instance, token)
		if err != nil {
			return fmt.Errorf("give back the lease of run %s: %w", id, err)
		}
		s.poke() // the run may be runnable: the other instances look
		return nil
	}
	return l, nil
}

// renewLease renews l's lease every quarter of the TTL until it is
// released. When the lease is someone else's (taken over after this
// process stalled for longer than the TTL), or was not renewed for half
// the TTL (the database is out of reach), Lost closes: the driver must
// stop its CLI at once. Half the TTL leaves the other half, before any
// other instance may take the lease (it must have expired, by the
// database's clock), for the CLI to be stopped.
func (s *Store) renewLease(id string, l *Lock) {
	defer close(l.done)
	every := s.leaseTTL / 4
	t := time.NewTicker(every)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if time.Since(renewed) >= s.leaseTTL/2 {
			l.markLost()
			return
		}
		// The lease is renewed from the database's clock when the update
		// runs, later than sent: it lasts at least TTL from sent.
		sent := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), renewed.Add(s.leaseTTL/2))
		res, err := s.db.ExecContext(ctx, `UPDATE run_leases SET expires_at = `+pgNowNanos+` + ? WHERE run_id = ? AND owner = ? AND token = ?`,
			s.leaseTTL.Nanoseconds(), id, s.instance, l.token)
		cancel()
		if err == nil {
			if n, _ := res.RowsAffected(); n == 0 {
				l.markLost()
				return
			}
			renewed = sent
		}
	}
}

// leaseLive reports whether some instance holds a live lease on run id.
func (s *Store) leaseLive(id string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var live bool
	err := s.db.QueryRowContext(ctx, `SELECT expires_at > `+pgNowNanos+` FROM run_leases WHERE run_id = ?`, id).Scan(&live)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lease of run %s: %w", id, err)
	}
	return live, nil
}

// Lease is who drives a run now, as the shared store says.
type Lease struct {
	Owner     string // instance: host/pid/random
	ExpiresAt time.Time
}

// RunLease returns the live lease of run id; ok is false when no instance
// drives it (always on SQLite, whose runs have file locks instead).
func (s *Store) RunLease(ctx context.Context, id string) (l Lease, ok bool, err error) {
	if !s.Shared() {
		return Lease{}, false, nil
	}
	var exp int64
	err = s.db.QueryRowContext(ctx, `SELECT owner, expires_at FROM run_leases WHERE run_id = ? AND expires_at > `+pgNowNanos, id).Scan(&l.Owner, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("lease of run %s: %w", id, err)
	}
	l.ExpiresAt = fromNanos(exp)
	return l, true, nil
}

// Lead runs fn while this process leads the instances sharing the store,
// until ctx ends: it waits for leadership (a PostgreSQL advisory lock on a
// connection of its own, tried every retry), calls fn with a context that
// ends when leadership is lost (the connection fails its check), and waits
// again after that. On SQLite, whose one `serve` holds the state
// directory's daemon lock, fn runs at once. name keeps leaderships apart.
func (s *Store) Lead(ctx context.Context, name string, retry time.Duration, fn func(ctx context.Context)) {
	d, ok := s.d.(*pgDialect)
	if !ok {
		fn(ctx)
		return
	}
	key := d.lockKey("leader " + name)
	for ctx.Err() == nil {
		c, err := pgx.ConnectConfig(ctx, d.cfg)
		if err == nil {
			s.leadOn(ctx, c, key, retry, fn)
			closeConn(c)
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// leadOn tries the leader's lock on c until it gets it or c fails, then
// runs fn while c stays healthy.
func (s *Store) leadOn(ctx context.Context, c *pgx.Conn, key int64, retry time.Duration, fn func(ctx context.Context)) {
	for {
		var got bool
		if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
			return
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
	lctx, lost := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer lost()
		// The lock is the connection's: check it is alive, and stop
		// leading when it is not (the server released the lock then).
		for {
			select {
			case <-lctx.Done():
				return
			case <-time.After(retry):
			}
			pctx, cancel := context.WithTimeout(lctx, retry)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				return
			}
		}
	}()
	fn(lctx)
	lost()
	wg.Wait()
}

// WaitChange blocks until something may have changed in the store — a
// commit of this process that ends waits or makes a run runnable, or a
// poke from another process — or ctx ends, or at most the slow poll's
// interval passes (a poke may be lost). The daemon's workers wait on it
// between looks for runnable runs.
func (s *Store) WaitChange(ctx context.Context) error {
	ch := s.watch(anyKey)
	defer s.unwatch(anyKey, ch)
	t := time.NewTimer(s.pollEvery)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
	case <-t.C:
	}
	return nil
}

// anyKey is the watcher's key of WaitChange: woken by every poke and
// every change of this process.
const anyKey = "any\x00"

// Poke tells every process on the store to look again (after a change
// that ends no wait of a set but makes work for another instance, such
// as a submitted run).
func (s *Store) Poke() { s.changed(anyKey) }

// ClaimableRuns lists, oldest first, the runs of a shared store that an
// instance on host may take up now: queued, interrupted, running with no
// live lease (their instance died), or waiting with an answered question
// set — and not tied to another host (Run.Host). Brief runs.
//
// The query never reads every waiting run: the first part reads the runs
// of the three statuses by the index on runs(status), the second the
// answered sets by an index on question_sets(state, …) and their runs by
// ID (any number of runs waiting on a pending set cost nothing).
func (s *Store) ClaimableRuns(ctx context.Context, host string, limit int) ([]Run, error) {
	q, args := s.claimableQuery(host, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("claimable runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("claimable runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// claimableQuery is ClaimableRuns' query and its arguments. The waiting
// runs are found from their answered sets (few), never by reading every
// waiting run: the CROSS JOIN keeps SQLite's planner from starting at
// runs(status), which lists them all (3 ms a look at 10,000 waiting).
func (s *Store) claimableQuery(host string, limit int) (string, []any) {
	free := ` AND (host = '' OR host = ?)
		AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.run_id = runs.id AND l.expires_at > ` + s.nowSQL() + `)`
	q := `SELECT ` + briefRunColumns + ` FROM runs WHERE status IN (?, ?, ?)` + free + `
		UNION ALL
		SELECT ` + briefRunColumns + ` FROM (SELECT DISTINCT run_id FROM question_sets WHERE state = ?) answered
			CROSS JOIN runs WHERE runs.id = answered.run_id AND status = ?` + free + `
			AND NOT EXISTS (SELECT 1 FROM question_sets c WHERE c.run_id = runs.id AND c.state = ? AND c.kind = ?)
		ORDER BY created_at, id`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	// A run whose spend cap question waits is not taken up for its other
	// answered sets: no turn starts before the cap is answered (spend.go).
	return q, []any{RunQueued, RunInterrupted, RunRunning, host, SetAnswered, RunWaiting, host, SetPending, kindCap}
}

// nowSQL is the database's clock in Unix nanoseconds, for lease expiry.
func (s *Store) nowSQL() string {
	if s.Shared() {
		return pgNowNanos
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000000 AS INTEGER)`
}

// InstanceInfo is a serve instance as its last heartbeat told.
type InstanceInfo struct {
	ID          string
	Host        string
	PID         int
	Leader      bool
	Driving     int
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// Heartbeat records that this instance serves, whether it leads and how
// many runs it drives, for `status`. Instances that stop beating are
// forgotten after a day.
func (s *Store) Heartbeat(ctx context.Context, started time.Time, leader bool, driving int) error {
	host := Hostname()
	now := nanos(s.now())
	_, err := s.db.ExecContext(ctx, `INSERT INTO instances (id, host, pid, leader, driving, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET leader = excluded.leader, driving = excluded.driving, heartbeat_at = excluded.heartbeat_at`,
		s.instance, host, os.Getpid(), boolInt(leader), driving, nanos(started), now)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM instances WHERE heartbeat_at < ?`, now-int64(24*time.Hour))
	return err
}

// Goodbye forgets this instance (a clean shutdown): status stops listing it
// at once.
func (s *Store) Goodbye(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM instances WHERE id = ?`, s.instance); err != nil {
		return fmt.Errorf("goodbye: %w", err)
	}
	return nil
}

// Instances lists the instances whose heartbeat is newer than since,
// oldest first.
func (s *Store) Instances(ctx context.Context, since time.Time) ([]InstanceInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, host, pid, leader, driving, started_at, heartbeat_at FROM instances
		WHERE heartbeat_at >= ? ORDER BY started_at, id`, nanos(since))
	if err != nil {
		return nil, fmt.Errorf("instances: %w", err)
	}
	defer rows.Close()
	var out []InstanceInfo
	for rows.Next() {
		var in InstanceInfo
		var leader int
		var started, beat int64
		if err := rows.Scan(&in.ID, &in.Host, &in.PID, &leader, &in.Driving, &started, &beat); err != nil {
			return nil, fmt.Errorf("instances: %w", err)
		}
		in.Leader, in.StartedAt, in.HeartbeatAt = leader != 0, fromNanos(started), fromNanos(beat)
		out = append(out, in)
	}
	return out, rows.Err()
}

// LeaseTTL is how long this process's run leases last unless renewed.
func (s *Store) LeaseTTL() time.Duration { return s.leaseTTL }

// SetRunHost ties a run whose host is not set yet to host (Run.Host).
func (s *Store) SetRunHost(ctx context.Context, id, host string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE runs SET host = ? WHERE id = ? AND host = ''`, host, id); err != nil {
		return fmt.Errorf("set the host of run %s: %w", id, err)
	}
	return nil
}
