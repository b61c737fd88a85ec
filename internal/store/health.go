package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SchedulePause is the pause of a spec's schedule (migration 0011): while
// Paused, the scheduler starts no run of the spec at its ticks, on every
// instance sharing the store (each tick reads it).
type SchedulePause struct {
	Spec   string
	Paused bool
	// Reason is why: PauseFailures (its last runs failed) or PauseByHand.
	Reason string
	// Detail is for people: the failures' errors, or who paused it.
	Detail    string
	By        string
	PausedAt  time.Time
	ResumedAt time.Time // zero until resumed; failures before it no longer count
}

// Reasons of a pause.
const (
	PauseFailures = "failures"
	PauseByHand   = "by_hand"
)

// PauseSchedule pauses spec's schedule. It returns false, and changes
// nothing, when the spec is paused already (the first pause's reason
// stays).
func (s *Store) PauseSchedule(ctx context.Context, p SchedulePause) (bool, error) {
	if p.Spec == "" {
		return false, errors.New("pause schedule: no spec")
	}
	if p.PausedAt.IsZero() {
		p.PausedAt = s.now().UTC()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO schedule_pauses (spec, paused, reason, detail, by_who, paused_at)
		VALUES (?, 1, ?, ?, ?, ?)
		ON CONFLICT(spec) DO UPDATE SET paused = 1, reason = excluded.reason, detail = excluded.detail,
			by_who = excluded.by_who, paused_at = excluded.paused_at
		WHERE schedule_pauses.paused = 0`, p.Spec, p.Reason, p.Detail, p.By, nanos(p.PausedAt))
	if err != nil {
		return false, fmt.Errorf("pause schedule of %s: %w", p.Spec, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("pause schedule of %s: %w", p.Spec, err)
	}
	return n == 1, nil
}

// ResumeSchedule ends spec's pause; it returns false when it was not
// paused. The failures before now no longer count towards a pause.
func (s *Store) ResumeSchedule(ctx context.Context, spec string) (bool, error) {
	now := s.now().UTC()
	res, err := s.db.ExecContext(ctx, `INSERT INTO schedule_pauses (spec, paused, reason, detail, by_who, paused_at, resumed_at)
		VALUES (?, 0, '', '', '', 0, ?)
		ON CONFLICT(spec) DO UPDATE SET paused = 0, resumed_at = excluded.resumed_at
		WHERE schedule_pauses.paused = 1`, spec, nanos(now))
	if err != nil {
		return false, fmt.Errorf("resume schedule of %s: %w", spec, err)
	}
	// A spec never paused gets a row too (resumed_at: the failures
	// before are forgiven); it was not paused.
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("resume schedule of %s: %w", spec, err)
	}
	if n == 0 {
		return false, nil
	}
	var was int64
	if err := s.db.QueryRowContext(ctx, `SELECT paused_at FROM schedule_pauses WHERE spec = ?`, spec).Scan(&was); err != nil {
		return false, fmt.Errorf("resume schedule of %s: %w", spec, err)
	}
	return was != 0, nil
}

const pauseColumns = `spec, paused, reason, detail, by_who, paused_at, resumed_at`

func scanPause(row interface{ Scan(...any) error }) (SchedulePause, error) {
	var p SchedulePause
	var paused, at, resumed int64
	if err := row.Scan(&p.Spec, &paused, &p.Reason, &p.Detail, &p.By, &at, &resumed); err != nil {
		return SchedulePause{}, err
	}
	p.Paused, p.PausedAt, p.ResumedAt = paused != 0, fromNanos(at), fromNanos(resumed)
	return p, nil
}

// SchedulePauseOf returns the pause record of spec; ok is false when it
// never was paused nor resumed.
func (s *Store) SchedulePauseOf(ctx context.Context, spec string) (p SchedulePause, ok bool, err error) {
	p, err = scanPause(s.db.QueryRowContext(ctx, `SELECT `+pauseColumns+` FROM schedule_pauses WHERE spec = ?`, spec))
	if errors.Is(err, sql.ErrNoRows) {
		return SchedulePause{}, false, nil
	}
	if err != nil {
		return SchedulePause{}, false, fmt.Errorf("schedule pause of %s: %w", spec, err)
	}
	return p, true, nil
}

// ScheduleIsPaused reports whether spec's schedule is paused now.
func (s *Store) ScheduleIsPaused(ctx context.Context, spec string) (bool, error) {
	p, ok, err := s.SchedulePauseOf(ctx, spec)
	return ok && p.Paused, err
}

// PausedSchedules lists the paused specs, by name.
func (s *Store) PausedSchedules(ctx context.Context) ([]SchedulePause, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+pauseColumns+` FROM schedule_pauses WHERE paused = 1 ORDER BY spec`)
	if err != nil {
		return nil, fmt.Errorf("paused schedules: %w", err)
	}
	defer rows.Close()
	var out []SchedulePause
	for rows.Next() {
		p, err := scanPause(rows)
		if err != nil {
			return nil, fmt.Errorf("paused schedules: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("paused schedules: %w", err)
	}
	return out, nil
}

// FailureStreak returns the spec's last n ended runs (newest first) when
// every one of them failed and was made after the schedule was last
// resumed; nil otherwise. The scheduler pauses a spec on such a streak.
func (s *Store) FailureStreak(ctx context.Context, spec string, n int) ([]Run, error) {
	if n <= 0 {
		return nil, nil
	}
	p, _, err := s.SchedulePauseOf(ctx, spec)
	if err != nil {
		return nil, err
	}
	runs, err := s.ListRuns(ctx, RunFilter{Spec: spec, Status: []RunStatus{RunDone, RunFailed, RunCancelled, RunStopped}, Limit: n})
	if err != nil {
		return nil, fmt.Errorf("failure streak of %s: %w", spec, err)
	}
	if len(runs) < n {
		return nil, nil
	}
	for _, r := range runs {
		if r.Status != RunFailed || (!p.ResumedAt.IsZero() && !r.CreatedAt.After(p.ResumedAt)) {
			return nil, nil
		}
	}
	return runs, nil
}

// ScheduleSkip counts a spec's ticks that started no run for a reason.
type ScheduleSkip struct {
	Spec      string
	Reason    string // SkipMissed, SkipBusy or SkipCap
	Count     int64
	LastTick  time.Time
	NoticedAt time.Time
}

// Reasons of a skipped tick.
const (
	SkipMissed = "missed"    // no serve ran at the tick
	SkipBusy   = "busy"      // the previous run of the spec still ran or waited
	SkipCap    = "spend_cap" // a spend cap was reached and asked about this period
)

// RecordSkips adds n ticks of spec skipped for reason, the last at tick.
// noticeDue is true when no notice about the spec's skips went out in the
// day before now; the caller posts one and calls SkipsNoticed.
func (s *Store) RecordSkips(ctx context.Context, spec, reason string, n int64, tick time.Time) (noticeDue bool, err error) {
	var noticed int64
	err = s.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO schedule_skips (spec, reason, count, last_tick) VALUES (?, ?, ?, ?)
			ON CONFLICT(spec, reason) DO UPDATE SET count = schedule_skips.count + excluded.count,
				last_tick = CASE WHEN excluded.last_tick > schedule_skips.last_tick THEN excluded.last_tick ELSE schedule_skips.last_tick END`,
			spec, reason, n, nanos(tick)); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(noticed_at), 0) FROM schedule_skips WHERE spec = ?`, spec).Scan(&noticed)
	})
	if err != nil {
		return false, fmt.Errorf("record skipped ticks of %s: %w", spec, err)
	}
	return s.now().Sub(fromNanos(noticed)) >= 24*time.Hour, nil
}

// SkipsNoticed records that a notice about spec's skipped ticks went out
// at t. It returns false when another instance noticed them within the
// day before t (it posts nothing then).
func (s *Store) SkipsNoticed(ctx context.Context, spec string, t time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE schedule_skips SET noticed_at = ? WHERE spec = ? AND noticed_at <= ?`,
		nanos(t), spec, nanos(t.Add(-24*time.Hour)))
	if err != nil {
		return false, fmt.Errorf("skipped ticks of %s noticed: %w", spec, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("skipped ticks of %s noticed: %w", spec, err)
	}
	return n > 0, nil
}

// ScheduleSkips lists the skipped ticks by spec and reason.
func (s *Store) ScheduleSkips(ctx context.Context) ([]ScheduleSkip, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT spec, reason, count, last_tick, noticed_at FROM schedule_skips ORDER BY spec, reason`)
	if err != nil {
		return nil, fmt.Errorf("skipped ticks: %w", err)
	}
	defer rows.Close()
	var out []ScheduleSkip
	for rows.Next() {
		var k ScheduleSkip
		var last, noticed int64
		if err := rows.Scan(&k.Spec, &k.Reason, &k.Count, &last, &noticed); err != nil {
			return nil, fmt.Errorf("skipped ticks: %w", err)
		}
		k.LastTick, k.NoticedAt = fromNanos(last), fromNanos(noticed)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("skipped ticks: %w", err)
	}
	return out, nil
}
