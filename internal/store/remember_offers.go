package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Offers to remember an answer (migration 0020): a surface that offered
// the person whose answer closed a set to keep it as a rule keeps the
// offer here, so that their click after a restart, or on another instance
// of a cluster, still finds it. Taking an offer makes the rule and marks
// the offer taken in one transaction (RuleRequest.Offer): an offer makes
// at most one rule, however often or wherever it is clicked.

// ErrOfferTaken is returned for an offer to remember already taken, or
// not kept at all.
var ErrOfferTaken = errors.New("the offer to remember the answer was taken already")

// ErrOfferExpired is returned for an offer to remember past its expiry.
var ErrOfferExpired = errors.New("the offer to remember the answer has expired")

// RememberOffer is an offer made on a surface to keep an answer as a rule.
type RememberOffer struct {
	// Surface and Key name the offer: Key is the surface's (what its
	// button carries), unique on the surface.
	Surface string
	Key     string
	RunID   string
	SetID   string
	// User is the surface's ID of the person offered: only they may take
	// it. By is who made the answer (the answer's Response.By).
	User string
	By   string
	// Remember is the scope and lifetime offered ("spec:7d").
	Remember  string
	ExpiresAt time.Time
	// TakenAt and RuleID are set once the offer was taken.
	TakenAt time.Time
	RuleID  string
}

// OfferRef names an offer to remember taken with a rule (RuleRequest.Offer).
type OfferRef struct{ Surface, Key string }

// KeepRememberOffer stores o. An offer already kept under its surface and
// key is left as it is (taken or not).
func (s *Store) KeepRememberOffer(ctx context.Context, o RememberOffer) error {
	switch {
	case strings.TrimSpace(o.Surface) == "" || strings.TrimSpace(o.Key) == "":
		return fmt.Errorf("keep an offer to remember: its surface and key are required (surface %q, key %q)", o.Surface, o.Key)
	case o.SetID == "" || o.RunID == "":
		return fmt.Errorf("keep the offer to remember %s/%s: its run and set are required", o.Surface, o.Key)
	case o.ExpiresAt.IsZero():
		return fmt.Errorf("keep the offer to remember %s/%s: it has no expiry", o.Surface, o.Key)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO remember_offers (surface, offer_key, run_id, set_id, user_id, made_by, remember, expires_at)
		VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (surface, offer_key) DO NOTHING`,
		o.Surface, o.Key, o.RunID, o.SetID, o.User, o.By, o.Remember, nanos(o.ExpiresAt))
	if err != nil {
		return fmt.Errorf("keep the offer to remember %s/%s: %w", o.Surface, o.Key, err)
	}
	return nil
}

// RememberOfferFor returns the offer kept under surface and key, taken or
// not, expired or not; ErrNotFound when there is none.
func (s *Store) RememberOfferFor(ctx context.Context, surface, key string) (RememberOffer, error) {
	return loadRememberOffer(ctx, s.db, surface, key)
}

func loadRememberOffer(ctx context.Context, q querier, surface, key string) (RememberOffer, error) {
	o := RememberOffer{Surface: surface, Key: key}
	var expires, taken int64
	err := q.QueryRowContext(ctx, `SELECT run_id, set_id, user_id, made_by, remember, expires_at, taken_at, rule_id
		FROM remember_offers WHERE surface = ? AND offer_key = ?`, surface, key).
		Scan(&o.RunID, &o.SetID, &o.User, &o.By, &o.Remember, &expires, &taken, &o.RuleID)
	if errors.Is(err, sql.ErrNoRows) {
		return RememberOffer{}, fmt.Errorf("offer to remember %s/%s: %w", surface, key, ErrNotFound)
	}
	if err != nil {
		return RememberOffer{}, fmt.Errorf("offer to remember %s/%s: %w", surface, key, err)
	}
	o.ExpiresAt, o.TakenAt = fromNanos(expires), fromNanos(taken)
	return o, nil
}

// takeRememberOffer marks the offer ref taken by rule ruleID in tx, if it
// is open: ErrOfferTaken when it was taken (or never kept),
// ErrOfferExpired when it expired.
func takeRememberOffer(ctx context.Context, tx *txn, ref OfferRef, ruleID string, now time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE remember_offers SET taken_at = ?, rule_id = ?
		WHERE surface = ? AND offer_key = ? AND taken_at = 0 AND expires_at > ?`, nanos(now), ruleID, ref.Surface, ref.Key, nanos(now))
	if err != nil {
		return fmt.Errorf("take the offer to remember %s/%s: %w", ref.Surface, ref.Key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("take the offer to remember %s/%s: %w", ref.Surface, ref.Key, err)
	} else if n == 1 {
		return nil
	}
	o, err := loadRememberOffer(ctx, tx, ref.Surface, ref.Key)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("offer to remember %s/%s is not kept: %w", ref.Surface, ref.Key, ErrOfferTaken)
	case err != nil:
		return err
	case !o.TakenAt.IsZero():
		return fmt.Errorf("offer to remember %s/%s made rule %s: %w", ref.Surface, ref.Key, o.RuleID, ErrOfferTaken)
	default:
		return fmt.Errorf("offer to remember %s/%s expired at %s: %w", ref.Surface, ref.Key, o.ExpiresAt.UTC().Format(time.RFC3339), ErrOfferExpired)
	}
}
