package store

import (
	"context"
	"fmt"
	"time"
)

// Notification is one signed event to deliver to one webhook (the
// notify package's outbox): durable, so a restart goes on retrying, and
// made once per event and webhook (Key).
type Notification struct {
	ID          string // the delivery ID the receiver sees
	Key         string // unique per event and webhook
	URL         string
	Body        []byte
	Attempts    int
	NextAt      time.Time
	DeliveredAt time.Time // zero until delivered
	LastError   string
	CreatedAt   time.Time
}

// AddNotification stores n unless a notification of its Key is stored
// already; added is false then (the event was queued before).
func (s *Store) AddNotification(ctx context.Context, n Notification) (added bool, err error) {
	now := s.now().UTC()
	if n.NextAt.IsZero() {
		n.NextAt = now
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO notify_outbox (id, event_key, url, body, next_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, n.ID, n.Key, n.URL, string(n.Body), nanos(n.NextAt), nanos(now))
	if err != nil {
		return false, fmt.Errorf("add notification %s: %w", n.Key, err)
	}
	c, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("add notification %s: %w", n.Key, err)
	}
	return c == 1, nil
}

// DueNotifications returns up to limit notifications not delivered yet
// whose next attempt is at or before due, oldest first.
func (s *Store) DueNotifications(ctx context.Context, due time.Time, limit int) ([]Notification, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, event_key, url, body, attempts, next_at, delivered_at, last_error, created_at
		FROM notify_outbox WHERE delivered_at = 0 AND next_at <= ? ORDER BY next_at, id LIMIT ?`, nanos(due), limit)
	if err != nil {
		return nil, fmt.Errorf("due notifications: %w", err)
	}
	defer rows.Close()
	var out []Notification
	for rows.Next() {
		var n Notification
		var body string
		var next, delivered, created int64
		if err := rows.Scan(&n.ID, &n.Key, &n.URL, &body, &n.Attempts, &next, &delivered, &n.LastError, &created); err != nil {
			return nil, fmt.Errorf("due notifications: %w", err)
		}
		n.Body, n.NextAt, n.DeliveredAt, n.CreatedAt = []byte(body), fromNanos(next), fromNanos(delivered), fromNanos(created)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due notifications: %w", err)
	}
	return out, nil
}

// ClaimNotification takes n for one attempt until until: it is due no
// more meanwhile, so that of the instances sharing the store one sends it
// at a time. It returns false when another took it since n was read.
func (s *Store) ClaimNotification(ctx context.Context, n Notification, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE notify_outbox SET next_at = ? WHERE id = ? AND next_at = ? AND delivered_at = 0`,
		nanos(until), n.ID, nanos(n.NextAt))
	if err != nil {
		return false, fmt.Errorf("claim notification %s: %w", n.ID, err)
	}
	c, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim notification %s: %w", n.ID, err)
	}
	return c == 1, nil
}

// NotificationDelivered records that the webhook took notification id.
func (s *Store) NotificationDelivered(ctx context.Context, id string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE notify_outbox SET delivered_at = ?, attempts = attempts + 1, last_error = '' WHERE id = ?`,
		nanos(at), id); err != nil {
		return fmt.Errorf("notification %s delivered: %w", id, err)
	}
	return nil
}

// NotificationFailed records a failed attempt and when to try again; a
// zero next gives up (the notification stays, undelivered, with its
// error).
func (s *Store) NotificationFailed(ctx context.Context, id, why string, next time.Time) error {
	if next.IsZero() {
		next = never
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE notify_outbox SET attempts = attempts + 1, last_error = ?, next_at = ? WHERE id = ?`,
		why, nanos(next), id); err != nil {
		return fmt.Errorf("notification %s failed: %w", id, err)
	}
	return nil
}

// PurgeNotifications removes the notifications delivered, or given up,
// before before; it returns how many.
func (s *Store) PurgeNotifications(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM notify_outbox WHERE (delivered_at > 0 AND delivered_at < ?) OR (next_at = ? AND created_at < ?)`,
		nanos(before), nanos(never), nanos(before))
	if err != nil {
		return 0, fmt.Errorf("purge notifications: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purge notifications: %w", err)
	}
	return n, nil
}

// never is the next attempt of a notification given up.
var never = time.Unix(0, 1<<62)
