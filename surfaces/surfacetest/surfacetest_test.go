package surfacetest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// memory is a backend held in memory: posts and answers per set ID, shared
// by every surface made on it, as a chat service would be.
type memory struct {
	mu      sync.Mutex
	posted  map[string]int
	answers map[string]questions.Response
	changed chan struct{} // closed and replaced on every change
}

func newMemory() *memory {
	return &memory{posted: map[string]int{}, answers: map[string]questions.Response{}, changed: make(chan struct{})}
}

func (m *memory) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

type memSurface struct{ m *memory }

var _ surfaces.Surface = memSurface{}

func (memSurface) Name() string { return "memory" }

func (s memSurface) Ask(ctx context.Context, set questions.Set) (questions.Response, error) {
	if err := ctx.Err(); err != nil {
		return questions.Response{}, err
	}
	m := s.m
	m.mu.Lock()
	if m.posted[set.ID] == 0 {
		m.posted[set.ID]++
		m.notify()
	}
	for {
		if r, ok := m.answers[set.ID]; ok {
			m.mu.Unlock()
			return r, nil
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return questions.Response{}, ctx.Err()
		case <-ch:
		}
		m.mu.Lock()
	}
}

func (m *memory) answer(by string) func(t *testing.T, set questions.Set, answers []questions.Answer) {
	return func(t *testing.T, set questions.Set, answers []questions.Answer) {
		if by != "allowed" {
			return // deny by default
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.answers[set.ID]; !ok {
			m.answers[set.ID] = questions.Response{SetID: set.ID, Answers: answers, By: by, Surface: "memory", At: time.Now()}
			m.notify()
		}
	}
}

func TestRunOnMemory(t *testing.T) {
	t.Parallel()
	m := newMemory()
	surfacetest.Run(t, surfacetest.Backend{
		New:     func(*testing.T) surfaces.Surface { return memSurface{m} },
		Answer:  m.answer("allowed"),
		Intrude: m.answer("stranger"),
		Posted: func(_ *testing.T, set questions.Set) int {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.posted[set.ID]
		},
		Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true, AnswerWhileDown: true},
		Timeout:  20 * time.Second,
	})
}

func TestFixtures(t *testing.T) {
	t.Parallel()
	sets := []questions.Set{
		surfacetest.SingleChoice("a"), surfacetest.MultiSelect("b"), surfacetest.FreeText("c"),
		surfacetest.Other("d"), surfacetest.TwoQuestions("e"), surfacetest.Hostile("f"),
	}
	seen := map[string]bool{}
	for _, set := range sets {
		if set.ID == "" || set.RunID == "" || len(set.Questions) == 0 {
			t.Errorf("fixture %+v is incomplete", set)
		}
		for _, q := range set.Questions {
			if len(q.ID) != 5 || q.ID[0] != 'q' {
				t.Errorf("question ID %q, want q and four hex digits", q.ID)
			}
			if seen[q.ID] {
				t.Errorf("question ID %q used twice", q.ID)
			}
			seen[q.ID] = true
		}
	}
	b := surfacetest.NewSet("x").Single()
	s1 := b.Set()
	s1.Questions[0].Options[0].Label = "changed"
	if b.Set().Questions[0].Options[0].Label == "changed" {
		t.Error("Set() shares options with the builder")
	}
	if set := surfacetest.NewSet("x").Question(questions.Question{ID: "qmine", Text: "?"}).Set(); set.Questions[0].ID != "qmine" {
		t.Errorf("explicit question ID replaced by %q", set.Questions[0].ID)
	}
}
