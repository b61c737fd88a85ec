package surfacetest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestrator-dev/orchestrator/questions"
	"github.com/orchestrator-dev/orchestrator/surfaces"
	"github.com/orchestrator-dev/orchestrator/surfaces/surfacetest"
)

// memory is a backend held in memory: posts, people's answers and what the
// surface told them, per set ID, shared by every surface made on it, as a
// chat service would be.
type memory struct {
	mu      sync.Mutex
	posted  map[string]int
	given   map[string][]questions.Response // answers people gave, in order
	handled map[string]int                  // how many of given were decided (stored, as a surface would)
	shown   map[string]*strings.Builder
	changed chan struct{} // closed and replaced on every change
}

func newMemory() *memory {
	return &memory{posted: map[string]int{}, given: map[string][]questions.Response{}, handled: map[string]int{},
		shown: map[string]*strings.Builder{}, changed: make(chan struct{})}
}

func (m *memory) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *memory) show(setID, text string) {
	if m.shown[setID] == nil {
		m.shown[setID] = &strings.Builder{}
	}
	m.shown[setID].WriteString(text + "\n")
}

type memSurface struct{ m *memory }

var _ surfaces.Surface = memSurface{}

func (memSurface) Name() string { return "memory" }

func (s memSurface) Ask(ctx context.Context, set questions.Set, answers surfaces.Answers) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := s.m
	m.mu.Lock()
	if m.posted[set.ID] == 0 {
		m.posted[set.ID]++
		m.show(set.ID, "question: "+set.Title)
		m.notify()
	}
	for {
		for m.handled[set.ID] < len(m.given[set.ID]) {
			resp := m.given[set.ID][m.handled[set.ID]]
			m.handled[set.ID]++
			m.mu.Unlock()
			d, err := answers.Offer(ctx, resp)
			m.mu.Lock()
			switch {
			case err != nil:
				m.mu.Unlock()
				return err
			case d.Taken:
				m.show(set.ID, "answered by "+resp.By)
			case d.Invalid != nil:
				m.show(set.ID, "not taken: "+d.Invalid.Error())
			case d.Closed && d.Final != nil:
				m.show(set.ID, "answered elsewhere by "+d.Final.By)
			case d.Closed:
				m.show(set.ID, "closed")
			}
			m.notify()
			if d.Closed {
				m.mu.Unlock()
				return nil
			}
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
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
		m.given[set.ID] = append(m.given[set.ID], questions.Response{SetID: set.ID, Answers: answers, By: by, Surface: "memory", At: time.Now()})
		m.notify()
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
		Shown: func(_ *testing.T, set questions.Set) string {
			m.mu.Lock()
			defer m.mu.Unlock()
			if b := m.shown[set.ID]; b != nil {
				return b.String()
			}
			return ""
		},
		Person:   "allowed",
		Features: surfacetest.Features{MultiSelect: true, FreeText: true, MultiQuestion: true, AnswerWhileDown: true},
		Timeout:  20 * time.Second,
	})
}

// TestAnswersDecide: first valid answer wins, partial answers keep the set
// pending, refusals and late answers are decisions, not errors.
func TestAnswersDecide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	set := surfacetest.TwoQuestions("decide")
	q1, q2 := set.Questions[0], set.Questions[1]
	a := surfacetest.NewAnswers()
	a.Add(set)
	offer := func(by string, ans ...questions.Answer) surfaces.Decision {
		t.Helper()
		d, err := a.Offer(ctx, questions.Response{SetID: set.ID, By: by, Surface: "s", Answers: ans})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := offer("x", surfacetest.Choose(q1, "Oracle")); d.Invalid == nil || d.Taken {
		t.Errorf("invalid offer decided %+v, want refused", d)
	}
	if d := offer("x", surfacetest.Choose(q1, "MySQL")); !d.Taken || d.Closed || len(d.Pending) != 1 || d.Pending[0] != q2.ID {
		t.Errorf("partial offer decided %+v, want taken with %s pending", d, q2.ID)
	}
	if d := offer("y", surfacetest.Choose(q2, "Linux")); !d.Taken || !d.Closed || d.Final == nil || len(d.Final.Answers) != 2 {
		t.Errorf("completing offer decided %+v, want taken and final", d)
	}
	if d := offer("z", surfacetest.Choose(q1, "SQLite"), surfacetest.Choose(q2, "macOS")); d.Taken || !d.Closed || d.Final == nil || d.Final.By != "x, y" {
		t.Errorf("late offer decided %+v, want closed with the final answer by x, y", d)
	}
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
