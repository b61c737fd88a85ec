package store

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// notifier is a PostgreSQL store's one listening connection: it LISTENs on
// the wake channel (pokes, for the poller of WaitSet, WaitRunFinal and
// WaitChange) and the nudge channel (Nudges) at once, for every subscriber
// of the store, and connects again a second (retryDelay) after losing the
// connection (pgxlisten). It holds the connection only while somebody
// subscribes.
//
// After every connection, the first one included, the wake channel's
// subscribers are poked: a NOTIFY sent while nobody listened is lost, so
// they look for themselves. Nudges sent meanwhile are lost (they are
// hints; the timers stay the fallback).
type notifier struct {
	connect func(context.Context) (*pgx.Conn, error)

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	cancel context.CancelFunc // of the running listener; nil while none runs
	done   chan struct{}      // closed when the running listener has returned
	closed bool               // by close: no listener starts again

	gen       int             // of the running listener: a stopped one's reports are ignored
	listening map[string]bool // channels the current connection LISTENs on
	err       error           // of the last connection that failed, until one succeeds
	changed   chan struct{}   // closed and replaced when listening or err change
}

// subscriber receives the notifications of one channel.
type subscriber struct {
	channel string
	// notify gets each notification's payload; connected is called after
	// every connection (may be nil). Both are called with the notifier's
	// lock held: they must not block (a buffered channel, a dropped send).
	notify    func(payload string)
	connected func()
}

// subscribe registers sub, starting the listener if none runs, until the
// returned function is called; once it has returned, sub is called no
// more. The last one to leave stops the listener and waits until its
// connection is closed.
func (n *notifier) subscribe(sub *subscriber) (unsubscribe func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs == nil {
		n.subs = map[*subscriber]struct{}{}
	}
	n.subs[sub] = struct{}{}
	if n.cancel == nil && !n.closed {
		n.start()
	}
	return func() {
		n.mu.Lock()
		delete(n.subs, sub)
		if len(n.subs) > 0 {
			n.mu.Unlock()
			return
		}
		n.stopLocked()
	}
}

// start runs a listener on both channels (n.mu held).
func (n *notifier) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.gen++
	gen := n.gen
	n.cancel, n.done = cancel, done
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			n.mu.Lock()
			if n.gen == gen {
				n.err = nil
			}
			n.mu.Unlock()
			return n.connect(ctx)
		},
		// Every error it reports ends the connection (the handlers
		// return none): the channels are no longer listened on.
		LogError: func(_ context.Context, err error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.gen == gen {
				n.listening, n.err = nil, err
				n.signal()
			}
		},
		ReconnectDelay: retryDelay,
	}
	for _, channel := range []string{pgWakeChannel, pgNudgeChannel} {
		l.Handle(channel, notifierChannel{n: n, channel: channel, gen: gen})
	}
	go func() {
		defer close(done)
		_ = l.Listen(ctx) // returns when ctx ends; connection errors are retried
	}()
}

// stopLocked stops the running listener, if any, and waits for it; it is
// called with n.mu held and returns with it released.
func (n *notifier) stopLocked() {
	cancel, done := n.cancel, n.done
	n.cancel, n.done, n.listening = nil, nil, nil
	n.gen++ // what the stopped listener still reports is not the next one's
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// signal wakes those waiting in ready (n.mu held).
func (n *notifier) signal() {
	if n.changed != nil {
		close(n.changed)
	}
	n.changed = make(chan struct{})
}

// ready waits until the listener LISTENs on channel, and returns the error
// of the connection attempt when it fails instead, or ctx's.
func (n *notifier) ready(ctx context.Context, channel string) error {
	for {
		n.mu.Lock()
		if n.listening[channel] {
			n.mu.Unlock()
			return nil
		}
		if n.closed {
			n.mu.Unlock()
			return errors.New("the store is closed")
		}
		if n.changed == nil {
			n.changed = make(chan struct{})
		}
		changed := n.changed
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
		n.mu.Lock()
		listening, err := n.listening[channel], n.err
		n.mu.Unlock()
		if !listening && err != nil {
			return err
		}
	}
}

// close stops the listener for good (Store.Close); subscribers keep their
// channels until they leave, and get nothing more.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.signal()
	n.stopLocked()
}

// notifierChannel dispatches one channel's notifications to its
// subscribers (a pgxlisten.Handler and BacklogHandler).
type notifierChannel struct {
	n       *notifier
	channel string
	gen     int // of its listener
}

func (h notifierChannel) HandleNotification(_ context.Context, msg *pgconn.Notification, _ *pgx.Conn) error {
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	for sub := range h.n.subs {
		if sub.channel == h.channel {
			sub.notify(msg.Payload)
		}
	}
	return nil
}

// HandleBacklog is called once the connection LISTENs on the channel,
// after every (re)connection.
func (h notifierChannel) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	if h.n.gen != h.gen {
		return nil // a stopped listener's connection
	}
	if h.n.listening == nil {
		h.n.listening = map[string]bool{}
	}
	h.n.listening[h.channel] = true
	h.n.signal()
	for sub := range h.n.subs {
		if sub.channel == h.channel && sub.connected != nil {
			sub.connected()
		}
	}
	return nil
}
