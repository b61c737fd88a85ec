package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// RememberOffers are the store's offers to remember (surfaces.RememberOffers):
// what Discord's and Slack's "Remember for this spec" buttons need, kept so
// that a click after a restart or on another instance takes the offer, once.
type RememberOffers struct{ Store *store.Store }

var _ surfaces.RememberOffers = RememberOffers{}

// KeepOffer implements surfaces.RememberOffers.
func (r RememberOffers) KeepOffer(ctx context.Context, o surfaces.RememberOffer) error {
	return r.Store.KeepRememberOffer(ctx, store.RememberOffer{Surface: o.Surface, Key: o.Key, RunID: o.RunID, SetID: o.SetID,
		User: o.User, By: o.By, Remember: o.Remember, ExpiresAt: o.ExpiresAt})
}

// LoadOffer implements surfaces.RememberOffers.
func (r RememberOffers) LoadOffer(ctx context.Context, surface, key string) (surfaces.RememberOffer, error) {
	o, err := r.Store.RememberOfferFor(ctx, surface, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return surfaces.RememberOffer{}, fmt.Errorf("%s/%s: %w", surface, key, surfaces.ErrOfferGone)
	case err != nil:
		return surfaces.RememberOffer{}, err
	case !o.TakenAt.IsZero():
		return surfaces.RememberOffer{}, fmt.Errorf("%s/%s made rule %s: %w", surface, key, o.RuleID, surfaces.ErrOfferGone)
	case !o.ExpiresAt.After(time.Now()):
		return surfaces.RememberOffer{}, fmt.Errorf("%s/%s: %w", surface, key, surfaces.ErrOfferExpired)
	}
	return surfaces.RememberOffer{Surface: o.Surface, Key: o.Key, RunID: o.RunID, SetID: o.SetID, User: o.User, By: o.By,
		Remember: o.Remember, ExpiresAt: o.ExpiresAt}, nil
}

// TakeOffer implements surfaces.RememberOffers: the rule is made, for a set
// of the offer's run, as RememberOnSurface makes it, and the offer taken
// in its transaction.
func (r RememberOffers) TakeOffer(ctx context.Context, o surfaces.RememberOffer) (surfaces.Remembered, error) {
	req := surfaces.RememberRequest{SetID: o.SetID, By: o.By, Surface: o.Surface, Remember: o.Remember}
	rm, err := rememberOnSurface(ctx, r.Store, o.RunID, req, &store.OfferRef{Surface: o.Surface, Key: o.Key})
	switch {
	case errors.Is(err, store.ErrOfferTaken):
		return surfaces.Remembered{}, fmt.Errorf("%w (%v)", surfaces.ErrOfferGone, err)
	case errors.Is(err, store.ErrOfferExpired):
		return surfaces.Remembered{}, fmt.Errorf("%w (%v)", surfaces.ErrOfferExpired, err)
	}
	return rm, err
}
