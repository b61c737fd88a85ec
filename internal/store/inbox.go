package store

import (
	"context"
	"errors"
	"fmt"
)

// Inbox keeps the events of one source (a surface: "slack") that were
// acknowledged before their work was done, so that the work survives a
// crash: Keep before acknowledging, Drop once the work ran, Kept on start
// for what is left. It implements the Slack surface's EventInbox.
type Inbox struct {
	s      *Store
	source string
}

// InboxFor returns the inbox of source.
func (s *Store) InboxFor(source string) Inbox { return Inbox{s: s, source: source} }

// KeptEvent is an event kept in an inbox.
type KeptEvent struct {
	Key  string
	Body []byte
}

// Keep keeps body under key; keeping a key kept already (a redelivery)
// changes nothing.
func (i Inbox) Keep(ctx context.Context, key string, body []byte) error {
	if key == "" {
		return errors.New("keep an event: no key")
	}
	_, err := i.s.db.ExecContext(ctx, `INSERT INTO inbox (key, source, body, created_at) VALUES (?,?,?,?) ON CONFLICT DO NOTHING`,
		i.source+":"+key, i.source, string(body), nanos(i.s.now().UTC()))
	if err != nil {
		return fmt.Errorf("keep %s event %s: %w", i.source, key, err)
	}
	return nil
}

// Drop forgets the event kept under key: its work ran.
func (i Inbox) Drop(ctx context.Context, key string) error {
	if _, err := i.s.db.ExecContext(ctx, `DELETE FROM inbox WHERE key = ?`, i.source+":"+key); err != nil {
		return fmt.Errorf("drop %s event %s: %w", i.source, key, err)
	}
	return nil
}

// Kept lists the events kept, oldest first (at most 1000).
func (i Inbox) Kept(ctx context.Context) ([]KeptEvent, error) {
	rows, err := i.s.db.QueryContext(ctx, `SELECT key, body FROM inbox WHERE source = ? ORDER BY created_at, key LIMIT 1000`, i.source)
	if err != nil {
		return nil, fmt.Errorf("list the kept %s events: %w", i.source, err)
	}
	defer rows.Close()
	var out []KeptEvent
	prefix := len(i.source) + 1
	for rows.Next() {
		var k, b string
		if err := rows.Scan(&k, &b); err != nil {
			return nil, fmt.Errorf("list the kept %s events: %w", i.source, err)
		}
		out = append(out, KeptEvent{Key: k[prefix:], Body: []byte(b)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the kept %s events: %w", i.source, err)
	}
	return out, nil
}
