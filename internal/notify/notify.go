// Package notify tells people and other programs that something happened
// to a run or a schedule: a run ended (done, failed, stopped), a schedule
// paused itself, a spend cap was reached, a question waits too long.
//
// An event goes where its route says: to the spec's surfaces (a notice on
// the run's GitHub issue, or the terminal log), through Options.Post, and
// to webhooks: each webhook gets the event as a signed JSON body (Sign),
// through a durable outbox in the store, retried with backoff until the
// receiver answers 2xx, across restarts. An event is queued once per
// webhook: its delivery ID (the X-Orchestrator-Delivery header) stays the
// same over retries and restarts, so a receiver can drop duplicates.
package notify

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// Event kinds.
const (
	Done       = "done"
	Failed     = "failed"
	Stopped    = "stopped"
	Paused     = "paused"
	CapReached = "cap_reached"
	Waiting    = "waiting"
)

// Kinds are the event kinds a route may name, in the documented order
// (the configuration checks them: config.NotifyEvents, the same list).
var Kinds = []string{Done, Failed, Stopped, Paused, CapReached, Waiting}

// Version is the version of the event JSON (docs/json.md).
const Version = 1

// Headers of a webhook delivery.
const (
	HeaderSignature = "X-Orchestrator-Signature" // "sha256=" + hex HMAC-SHA256 of timestamp + "." + body
	HeaderTimestamp = "X-Orchestrator-Timestamp" // Unix seconds of the attempt
	HeaderDelivery  = "X-Orchestrator-Delivery"  // the delivery ID, the same over retries
	HeaderEvent     = "X-Orchestrator-Event"     // the event kind
)

// Event is something to tell. Kind is required; the rest is what applies.
type Event struct {
	Kind string
	// Key identifies the event among all: an event emitted twice with one
	// Key (a retry, a restart, two instances) is queued once per webhook.
	// Default: RunID + "/" + Kind, or Spec + "/" + Kind + "/" + At for an
	// event of no run.
	Key     string
	Spec    string
	RunID   string
	Status  string
	Title   string
	CostUSD float64
	PRURL   string
	Error   string
	// Text is the notice for people, in one or a few lines.
	Text string
	At   time.Time
}

// Payload is the JSON body a webhook receives (docs/json.md).
type Payload struct {
	Version int     `json:"version"`
	ID      string  `json:"id"` // the event's key
	Kind    string  `json:"kind"`
	At      string  `json:"at"` // RFC 3339, UTC
	Spec    string  `json:"spec,omitempty"`
	RunID   string  `json:"run_id,omitempty"`
	Status  string  `json:"status,omitempty"`
	Title   string  `json:"title,omitempty"`
	CostUSD float64 `json:"cost_usd"`
	PRURL   string  `json:"pr_url,omitempty"`
	Error   string  `json:"error,omitempty"`
	// Show is the command that shows the run: "orchestrator show RUN".
	Show string `json:"show,omitempty"`
	Text string `json:"text,omitempty"`
}

// Webhook is one receiver of events.
type Webhook struct {
	URL string
	// Events are the kinds it receives; empty: every kind.
	Events []string
}

// Route says where a spec's events go.
type Route struct {
	// Surfaces are the kinds posted as notices on the spec's surfaces.
	Surfaces []string
	// Webhooks receive the kinds they name.
	Webhooks []Webhook
}

// wants reports whether kinds names kind (empty names none).
func wants(kinds []string, kind string) bool { return slices.Contains(kinds, kind) }

// Sign returns the signature header's value for body sent at ts:
// "sha256=" and the hex HMAC-SHA256, keyed by secret, of the Unix seconds
// of ts, a ".", and body.
func Sign(secret []byte, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a delivery as a receiver does: the signature matches,
// and the timestamp is within tolerance of now (refusing replays).
func Verify(secret []byte, signature, timestamp string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("bad %s %q", HeaderTimestamp, timestamp)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("%s %s is more than %s from now", HeaderTimestamp, timestamp, tolerance)
	}
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature)) {
		return errors.New("signature does not match")
	}
	return nil
}

// Outbox is the store's outbox of webhook deliveries. *store.Store
// satisfies it.
type Outbox interface {
	AddNotification(ctx context.Context, n store.Notification) (bool, error)
	DueNotifications(ctx context.Context, due time.Time, limit int) ([]store.Notification, error)
	ClaimNotification(ctx context.Context, n store.Notification, until time.Time) (bool, error)
	NotificationDelivered(ctx context.Context, id string, at time.Time) error
	NotificationFailed(ctx context.Context, id, why string, next time.Time) error
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "dlv_" + hex.EncodeToString(b[:])
}

func (ev *Event) fill(now time.Time) {
	if ev.At.IsZero() {
		ev.At = now
	}
	ev.At = ev.At.UTC()
	if ev.Key == "" {
		if ev.RunID != "" {
			ev.Key = ev.RunID + "/" + ev.Kind
		} else {
			ev.Key = ev.Spec + "/" + ev.Kind + "/" + ev.At.Format(time.RFC3339)
		}
	}
}

func (ev Event) payload() Payload {
	p := Payload{Version: Version, ID: ev.Key, Kind: ev.Kind, At: ev.At.Format(time.RFC3339), Spec: ev.Spec, RunID: ev.RunID,
		Status: ev.Status, Title: ev.Title, CostUSD: ev.CostUSD, PRURL: ev.PRURL, Error: ev.Error, Text: ev.Text}
	if ev.RunID != "" {
		p.Show = "orchestrator show " + ev.RunID
	}
	return p
}

// discard is the default logger.
var discard = slog.New(slog.DiscardHandler)

// redactURL is u without its query (which may hold a token), for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(bad URL)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
}

// redactErr replaces raw in err's text by its redacted form.
func redactErr(err error, raw string) error {
	if r := redactURL(raw); r != raw {
		return errors.New(strings.ReplaceAll(err.Error(), raw, r))
	}
	return err
}
