package runner_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/fakeapi"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/secretscan"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
)

// withholding is a delivery whose Deliver holds the work back, as
// internal/delivery does when the work holds a secret.
type withholding struct {
	fakeDelivery
	mu       sync.Mutex
	without  int
	withheld int
}

func (d *withholding) Deliver(ctx context.Context, run store.Run, failpoint func(string)) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.withheld++
	return "", &secretscan.Error{Findings: []secretscan.Finding{{Path: "config.env", Line: 2, Kind: "GitHub token"}}}
}

func (d *withholding) DeliverWithout(ctx context.Context, run store.Run, failpoint func(string)) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.without++
	return "pushed the rest", nil
}

func (d *withholding) counts() (withheld, without int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.withheld, d.without
}

var _ runner.Withholder = (*withholding)(nil)

// withDelivery gives h's runner a delivery.
func (h *harness) withDelivery(t *testing.T, d runner.Delivery, surfs []surfaces.Surface, pol runner.Policy) {
	t.Helper()
	var err error
	h.runner, err = runner.New(runner.Config{
		Store: h.store,
		Resolve: func(store.Run) (runner.Resolved, error) {
			return runner.Resolved{Agent: h.agent, Surfaces: surfs, Policy: pol}, nil
		},
		Delivery: func(store.Run) (runner.Delivery, error) { return d, nil },
		Observe: func(ev runner.Event) {
			select {
			case h.events <- ev:
			default:
			}
		},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func secretsRules() []fakeapi.Rule {
	return []fakeapi.Rule{{Reply: fakeapi.Reply{Text: "Done."}}}
}

// TestHeldBackDeliveryAsksThenDeliversWithout: the question names the
// file, the line and the kind; "Deliver without them" delivers without.
func TestHeldBackDeliveryAsksThenDeliversWithout(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	h := newHarness(t, nil, runner.Policy{}, runner.Limits{}, secretsRules()...)
	d := &withholding{fakeDelivery: fakeDelivery{dir: t.TempDir()}}
	h.withDelivery(t, d, []surfaces.Surface{p}, runner.Policy{})
	asked := make(chan questions.Set, 1)
	go func() {
		for ev := range h.events {
			if ev.Kind == runner.EventQuestion {
				asked <- *ev.Set
				p.answers <- []questions.Answer{{QuestionID: ev.Set.Questions[0].ID, Labels: []string{"Deliver without them"}}}
				return
			}
		}
	}()
	run, err := h.drive("Write the config")
	if err != nil || run.Status != store.RunDone {
		t.Fatalf("run = %s %q, %v; want done", run.Status, run.Error, err)
	}
	set := <-asked
	q := set.Questions[0]
	if set.Kind != questions.KindSecrets || q.Header != "Secrets" || !strings.Contains(q.Text, "config.env line 2: GitHub token") ||
		len(q.Options) != 2 || q.Options[0].Label != "Deliver without them" || q.Options[1].Label != "Stop" {
		t.Fatalf("asked %+v", set)
	}
	if withheld, without := d.counts(); withheld != 1 || without != 1 {
		t.Fatalf("Deliver %d times, DeliverWithout %d times; want 1 and 1", withheld, without)
	}
	log, _ := h.store.DecisionLog(context.Background(), run.ID)
	if len(log) != 1 || log[0].Answer != "Deliver without them" || log[0].By != "test-user" {
		t.Fatalf("decision log = %+v", log)
	}
}

// TestHeldBackDeliveryTimeoutStops: nobody answers; whatever on_timeout
// says (skip here), the run stops with nothing delivered.
func TestHeldBackDeliveryTimeoutStops(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	pol := runner.Policy{QuestionTimeout: 300 * time.Millisecond, OnTimeout: runner.OnTimeout{Action: "skip"}}
	h := newHarness(t, nil, pol, runner.Limits{}, secretsRules()...)
	d := &withholding{fakeDelivery: fakeDelivery{dir: t.TempDir()}}
	h.withDelivery(t, d, []surfaces.Surface{p}, pol)
	run, err := h.drive("Write the config")
	if err != nil || run.Status != store.RunStopped || !strings.Contains(run.Error, "chose Stop") || !strings.Contains(run.Error, "nothing was pushed") {
		t.Fatalf("run = %s %q, %v; want stopped", run.Status, run.Error, err)
	}
	if withheld, without := d.counts(); withheld != 1 || without != 0 {
		t.Fatalf("Deliver %d times, DeliverWithout %d times; want 1 and 0", withheld, without)
	}
}

// TestHeldBackDeliveryPreset: a preset on the header decides at once.
func TestHeldBackDeliveryPreset(t *testing.T) {
	t.Parallel()
	p := newPerson("test")
	pol := runner.Policy{Presets: []runner.Preset{{Match: "secrets", Answer: "Stop"}}}
	h := newHarness(t, nil, pol, runner.Limits{}, secretsRules()...)
	d := &withholding{fakeDelivery: fakeDelivery{dir: t.TempDir()}}
	h.withDelivery(t, d, []surfaces.Surface{p}, pol)
	run, err := h.drive("Write the config")
	if err != nil || run.Status != store.RunStopped {
		t.Fatalf("run = %s %q, %v; want stopped", run.Status, run.Error, err)
	}
	if asked, _, _, _ := p.stats(); asked != 0 {
		t.Fatalf("asked %d times; the preset answers", asked)
	}
}
