package runner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// plainDelivery is a Delivery that cannot park.
type plainDelivery struct{}

func (plainDelivery) Workdir(context.Context, store.Run) (string, error) { return "", nil }
func (plainDelivery) Deliver(context.Context, store.Run, func(string)) (string, error) {
	return "", nil
}
func (plainDelivery) Finish(context.Context, store.Run) error { return nil }

// parkingDelivery records the runs it parked and fails with err.
type parkingDelivery struct {
	plainDelivery
	parked []string
	err    error
	local  bool // its delivery does not push
}

func (p *parkingDelivery) Park(_ context.Context, run store.Run) error {
	p.parked = append(p.parked, run.ID)
	return p.err
}

func (p *parkingDelivery) Portable() bool { return !p.local }

// TestMovableRuns: a run moves between machines only with a delivery that
// pushes its branch when it parks.
func TestMovableRuns(t *testing.T) {
	t.Parallel()
	var dv Delivery
	r := &Runner{cfg: Config{Delivery: func(store.Run) (Delivery, error) { return dv, nil }}}
	for _, tc := range []struct {
		name string
		dv   Delivery
		want bool
	}{
		{"no delivery", nil, false},
		{"a delivery that cannot park", plainDelivery{}, false},
		{"a delivery that does not push", &parkingDelivery{local: true}, false},
		{"a delivery that pushes", &parkingDelivery{}, true},
	} {
		dv = tc.dv
		if got, err := r.movable(store.Run{ID: "r1"}); got != tc.want || err != nil {
			t.Errorf("%s: movable = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestParkWorkCallsTheDeliveryParker: parkWork parks through a Delivery
// that can, logs (never returns) its failure, and leaves any other alone.
func TestParkWorkCallsTheDeliveryParker(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	pd := &parkingDelivery{}
	var dv Delivery = pd
	r := &Runner{log: slog.New(slog.NewTextHandler(&logs, nil)), cfg: Config{
		Delivery: func(store.Run) (Delivery, error) { return dv, nil }}}
	ctx := context.Background()
	r.parkWork(ctx, store.Run{ID: "r1"})
	if strings.Join(pd.parked, ",") != "r1" || logs.Len() != 0 {
		t.Fatalf("parked %v, logged %q", pd.parked, logs.String())
	}
	pd.err = errors.New("push rejected")
	r.parkWork(ctx, store.Run{ID: "r2"})
	if len(pd.parked) != 2 || !strings.Contains(logs.String(), "push rejected") || !strings.Contains(logs.String(), "run=r2") {
		t.Fatalf("parked %v, logged %q", pd.parked, logs.String())
	}
	dv = plainDelivery{}
	r.parkWork(ctx, store.Run{ID: "r3"}) // cannot park: nothing to do
	r.cfg.Delivery = nil
	r.parkWork(ctx, store.Run{ID: "r4"}) // no delivery at all
	if len(pd.parked) != 2 {
		t.Fatalf("parked %v", pd.parked)
	}
}
