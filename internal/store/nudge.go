package store

import (
	"context"
	"fmt"
)

// Nudges ask the other instances of a shared store to do something now
// rather than at their next timer: a webhook delivery that reaches an
// instance where nothing waits for it (a load balancer picks any instance)
// nudges the instances, and the one whose poller waits there polls at once.
// A nudge is a hint, never the only way: it is lost when nobody listens or
// a listener's connection is down, and the timers stay the fallback. It
// carries only a topic ("github:owner/name#12"), never data to trust.
//
// On SQLite there is one `serve` per state directory, so a webhook always
// reaches the process that waits: nudges are not needed and do nothing.

// pgNudgeChannel is the NOTIFY channel of nudges.
const pgNudgeChannel = "orchestrator_nudge"

// MaxNudgeTopic is the longest topic Nudge sends (PostgreSQL's NOTIFY
// payload must be shorter than 8000 bytes).
const MaxNudgeTopic = 7000

// Nudge tells every instance listening to Nudges on the shared store —
// this one included — about topic. On SQLite it does nothing.
func (s *Store) Nudge(ctx context.Context, topic string) error {
	if !s.Shared() {
		return nil
	}
	if len(topic) > MaxNudgeTopic {
		return fmt.Errorf("nudge: topic of %d bytes, at most %d", len(topic), MaxNudgeTopic)
	}
	if _, err := s.db.DB.ExecContext(ctx, `SELECT pg_notify($1, $2)`, pgNudgeChannel, topic); err != nil {
		return fmt.Errorf("nudge %q: %w", topic, err)
	}
	return nil
}

// nudgeBuffer is how many nudges wait for a slow reader of Nudges; more
// are dropped (they are hints).
const nudgeBuffer = 64

// Nudges delivers the topics of the nudges sent by any instance on the
// shared store until ctx ends, then closes the channel. It listens through
// the store's one listening connection (notifier), and returns once it
// listens (or with the error of its connection); the connection is made
// again a second after it is lost (nudges sent meanwhile are lost). On
// SQLite the channel is nil: there are none.
func (s *Store) Nudges(ctx context.Context) (<-chan string, error) {
	d, ok := s.d.(*pgDialect)
	if !ok {
		return nil, nil
	}
	out := make(chan string, nudgeBuffer)
	leave := d.notify.subscribe(&subscriber{channel: pgNudgeChannel, notify: func(topic string) {
		select {
		case out <- topic:
		default:
		}
	}})
	if err := d.notify.ready(ctx, pgNudgeChannel); err != nil {
		leave()
		return nil, fmt.Errorf("listen for nudges: %w", err)
	}
	go func() {
		<-ctx.Done()
		leave()
		close(out)
	}()
	return out, nil
}
