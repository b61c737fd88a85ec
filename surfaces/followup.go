package surfaces

import "context"

// FollowUpNotifier is implemented by surfaces that take feedback on a run
// after its model was done (a review comment on its pull request) and show
// when it was handed to the model: key is the event key the feedback was
// recorded under (store.QueueFollowUp), such as
// "github:review-comment:<id>". A key of another surface is none of its
// business: it returns nil. Best effort and idempotent.
type FollowUpNotifier interface {
	FollowUpResumed(ctx context.Context, key string) error
}
