package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/retry"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Options make a Notifier.
type Options struct {
	// Outbox keeps the webhook deliveries; required with webhooks.
	Outbox Outbox
	// Route returns where spec's events go (the spec's notify: section,
	// else the configuration's); nil routes nothing.
	Route func(spec string) Route
	// Secret signs every webhook delivery; required with webhooks.
	Secret []byte
	// Post posts a notice on the spec's surfaces; optional.
	Post func(ctx context.Context, ev Event) error
	// Client sends the webhooks; default an http.Client with a 30s
	// timeout.
	Client *http.Client
	// Backoff is the wait between failed attempts; default 1s doubling
	// up to 10m, with jitter. MaxAttempts (default 20) gives up.
	Backoff     retry.Backoff
	MaxAttempts int
	// Every is how often Run looks for due deliveries besides the ones
	// Emit wakes it for; default 5s.
	Every  time.Duration
	Logger *slog.Logger
	Now    func() time.Time
}

// Notifier emits events. Safe for concurrent use.
type Notifier struct {
	o    Options
	wake chan struct{}
	mu   sync.Mutex // one delivery pass at a time

	qmu    sync.Mutex
	queued []store.Notification // the deliveries Queue added, for Flush
}

// New returns a Notifier.
func New(o Options) *Notifier {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Backoff.Initial <= 0 {
		o.Backoff = retry.Backoff{Initial: time.Second, Max: 10 * time.Minute, Jitter: retry.Jitter}
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 20
	}
	if o.Every <= 0 {
		o.Every = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Notifier{o: o, wake: make(chan struct{}, 1)}
}

// Emit sends ev where its spec's route says: a notice on the surfaces
// (now; its error is returned), and a delivery queued per webhook (Queue).
// A nil Notifier emits nothing.
func (n *Notifier) Emit(ctx context.Context, ev Event) error {
	if n == nil || n.o.Route == nil {
		return nil
	}
	if ev.Kind == "" {
		return errors.New("notify: an event with no kind")
	}
	ev.fill(n.o.Now())
	err := n.Queue(ctx, ev)
	if n.o.Post != nil && wants(n.o.Route(ev.Spec).Surfaces, ev.Kind) {
		if perr := n.o.Post(ctx, ev); perr != nil {
			err = errors.Join(err, fmt.Errorf("notify: post %s on the surfaces: %w", ev.Key, perr))
		}
	}
	return err
}

// Queue queues ev for the webhooks of its spec's route that take its kind:
// once per event Key and webhook, durable; Run sends them.
func (n *Notifier) Queue(ctx context.Context, ev Event) error {
	if n == nil || n.o.Route == nil {
		return nil
	}
	if ev.Kind == "" {
		return errors.New("notify: an event with no kind")
	}
	ev.fill(n.o.Now())
	r := n.o.Route(ev.Spec)
	if len(r.Webhooks) == 0 {
		return nil
	}
	if n.o.Outbox == nil {
		return errors.New("notify: webhooks and no outbox")
	}
	body, err := json.Marshal(ev.payload())
	if err != nil {
		return fmt.Errorf("notify: encode %s: %w", ev.Key, err)
	}
	var errs []error
	queued := false
	for i, w := range r.Webhooks {
		if len(w.Events) > 0 && !wants(w.Events, ev.Kind) {
			continue
		}
		d := store.Notification{ID: newID(), Key: ev.Key + "#" + strconv.Itoa(i) + "#" + w.URL, URL: w.URL, Body: body, NextAt: n.o.Now()}
		added, err := n.o.Outbox.AddNotification(ctx, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("notify: queue %s: %w", ev.Key, err))
			continue
		}
		if added {
			n.qmu.Lock()
			n.queued = append(n.queued, d)
			n.qmu.Unlock()
		}
		queued = queued || added
	}
	if queued {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
	return errors.Join(errs...)
}

// Run delivers the queued webhook deliveries until ctx ends: at once when
// Emit queues one, and every Options.Every for the retries due (also those
// a previous process left).
func (n *Notifier) Run(ctx context.Context) {
	if n == nil || n.o.Outbox == nil {
		return
	}
	t := time.NewTicker(n.o.Every)
	defer t.Stop()
	for {
		n.DeliverDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		case <-t.C:
		}
	}
}

// DeliverDue makes one attempt at each delivery due now.
func (n *Notifier) DeliverDue(ctx context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ctx.Err() == nil {
		due, err := n.o.Outbox.DueNotifications(ctx, n.o.Now(), 50)
		if err != nil {
			n.o.Logger.Warn("notify: read the outbox", "err", err)
			return
		}
		if len(due) == 0 {
			return
		}
		for _, d := range due {
			// Taken for the attempt (and its timeout): another instance
			// sharing the store does not send it meanwhile.
			ok, err := n.o.Outbox.ClaimNotification(ctx, d, n.o.Now().Add(n.o.Client.Timeout+time.Minute))
			if err != nil {
				n.o.Logger.Warn("notify: claim a delivery", "delivery", d.ID, "err", err)
				return
			}
			if ok {
				_ = n.attempt(ctx, d, slog.LevelWarn)
			}
		}
	}
}

// Flush is for a command that emits events and exits (a foreground
// `orchestrator run`): it makes one attempt at each delivery this
// Notifier queued and did not send yet, until ctx ends, and returns how
// many are not delivered, with why the first of them was not. Those stay
// in the outbox, with their delivery IDs: the next Run (serve's) sends
// them, once. A failed attempt is logged at Info only: the command says
// what is left itself.
func (n *Notifier) Flush(ctx context.Context) (left int, why error) {
	if n == nil || n.o.Outbox == nil {
		return 0, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.qmu.Lock()
	mine := n.queued
	n.queued = nil
	n.qmu.Unlock()
	for _, d := range mine {
		var err error
		if err = ctx.Err(); err == nil {
			// Claimed like DeliverDue does: a serve sharing the store
			// that took it meanwhile sends it instead.
			var ok bool
			ok, err = n.o.Outbox.ClaimNotification(ctx, d, n.o.Now().Add(n.o.Client.Timeout+time.Minute))
			switch {
			case err == nil && !ok:
				err = fmt.Errorf("%s: another process is sending it", redactURL(d.URL))
			case err == nil:
				err = n.attempt(ctx, d, slog.LevelInfo)
			}
		}
		if err != nil {
			left++
			if why == nil {
				why = err
			}
		}
	}
	return left, why
}

// attempt sends d once and records the outcome: nil when d was delivered.
// A failed attempt is logged at failLevel (Warn for serve's).
func (n *Notifier) attempt(ctx context.Context, d store.Notification, failLevel slog.Level) error {
	log := n.o.Logger.With("delivery", d.ID, "url", redactURL(d.URL))
	err := n.send(ctx, d)
	now := n.o.Now()
	if err == nil {
		if err := n.o.Outbox.NotificationDelivered(context.WithoutCancel(ctx), d.ID, now); err != nil {
			log.Warn("notify: record a delivery", "err", err)
		}
		log.Info("notify: webhook delivered", "attempts", d.Attempts+1)
		return nil
	}
	failed := fmt.Errorf("%s: %w", redactURL(d.URL), err)
	if ctx.Err() != nil {
		return failed
	}
	var next time.Time
	if d.Attempts+1 < n.o.MaxAttempts {
		next = now.Add(n.o.Backoff.Wait(d.Attempts))
	}
	if rerr := n.o.Outbox.NotificationFailed(context.WithoutCancel(ctx), d.ID, err.Error(), next); rerr != nil {
		log.Warn("notify: record a failed delivery", "err", rerr)
	}
	if next.IsZero() {
		log.Error("notify: webhook delivery given up", "attempts", d.Attempts+1, "err", err)
		return failed
	}
	log.Log(ctx, failLevel, "notify: webhook delivery failed; retrying", "attempts", d.Attempts+1, "next", next, "err", err)
	return failed
}

func (n *Notifier) send(ctx context.Context, d store.Notification) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return err
	}
	ts := n.o.Now()
	var p struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(d.Body, &p)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orchestrator-notify/1")
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(n.o.Secret, ts, d.Body))
	req.Header.Set(HeaderDelivery, d.ID)
	req.Header.Set(HeaderEvent, p.Kind)
	resp, err := n.o.Client.Do(req)
	if err != nil {
		return fmt.Errorf("post: %w", redactErr(err, d.URL))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}
