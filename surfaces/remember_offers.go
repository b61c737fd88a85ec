package surfaces

import (
	"context"
	"errors"
	"time"
)

// Offers to remember, kept durably. A surface that offers a person to
// keep their answer as a rule (Discord's and Slack's "Remember for this
// spec" button) keeps the offer in RememberOffers when it has them (the
// store): a click after a restart of the process, or one that reaches
// another instance of a cluster, finds it there, and takes it at most
// once. The person's permission is checked as for any click, and the rule
// is made as Rememberer makes it.

// RememberOfferLife is how long an offer to remember stays open.
const RememberOfferLife = 24 * time.Hour

// ErrOfferGone is returned for an offer to remember taken already (by a
// click here or on another instance), or not kept at all.
var ErrOfferGone = errors.New("the offer to remember the answer was taken or is unknown")

// ErrOfferExpired is returned for an offer to remember past its expiry.
var ErrOfferExpired = errors.New("the offer to remember the answer has expired")

// RememberOffer is an offer to keep the answer to a set as a rule.
type RememberOffer struct {
	// Surface and Key name it: Key is what the surface's button carries.
	Surface string
	Key     string
	RunID   string
	SetID   string
	// User is the surface's ID of the person offered: only they may take
	// it. By is the answer's Response.By.
	User string
	By   string
	// Remember is the scope and lifetime offered ("spec:7d").
	Remember  string
	ExpiresAt time.Time
}

// RememberOffers keeps offers to remember across restarts and instances.
type RememberOffers interface {
	// KeepOffer stores o; an offer already kept under its key stays as it
	// is.
	KeepOffer(ctx context.Context, o RememberOffer) error
	// LoadOffer returns the open offer kept under surface and key:
	// ErrOfferGone when it was taken or is unknown, ErrOfferExpired once
	// it expired.
	LoadOffer(ctx context.Context, surface, key string) (RememberOffer, error)
	// TakeOffer keeps o's answer as a rule (as Rememberer.Remember does
	// with o's SetID, By, Surface and Remember) and marks o taken, in one
	// transaction: an offer makes at most one rule. It returns
	// ErrOfferGone or ErrOfferExpired when o is no longer open, or the
	// refusal or failure of Remember.
	TakeOffer(ctx context.Context, o RememberOffer) (Remembered, error)
}
