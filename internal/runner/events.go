package runner

import (
	"time"

	"github.com/orchestrator-dev/orchestrator/executor"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/questions"
)

// EventKind names a progress event.
type EventKind string

// Progress events, in the order a run usually produces them.
const (
	EventTurnStarted  EventKind = "turn_started"
	EventText         EventKind = "text"     // the model's text, markers removed
	EventToolUse      EventKind = "tool_use" // Tool and a one-line summary in Text
	EventCost         EventKind = "cost"     // the turn's total cost so far
	EventTurnFinished EventKind = "turn_finished"
	EventQuestion     EventKind = "question"  // Set asked on Surfaces; Text, when set, says why the run itself asks (a budget or turn limit, limit.go)
	EventAnswer       EventKind = "answer"    // Response stored for Set
	EventReminder     EventKind = "reminder"  // a reminder went out for Set
	EventEscalated    EventKind = "escalated" // Set is now also asked on Surfaces
	EventRetry        EventKind = "retry"
	EventCorrection   EventKind = "correction" // Text: what was wrong with the QUESTION block
	EventDone         EventKind = "done"
	EventCapReached   EventKind = "cap_reached" // a spend cap stopped the run before a turn: Set is its question, Text says which cap
	EventRunEnded     EventKind = "run_ended"   // Run as it stands when Drive returns; Err why it stopped, if not final
)

// Event is a progress event of a run.
type Event struct {
	Kind     EventKind           `json:"kind"`
	RunID    string              `json:"run_id"`
	Turn     int                 `json:"turn,omitempty"`
	TurnKind store.TurnKind      `json:"turn_kind,omitempty"`
	Text     string              `json:"text,omitempty"`
	Tool     string              `json:"tool,omitempty"`
	CostUSD  float64             `json:"cost_usd,omitempty"`
	Elapsed  time.Duration       `json:"elapsed_ns,omitempty"`
	Set      *questions.Set      `json:"set,omitempty"`
	Response *questions.Response `json:"response,omitempty"`
	Surfaces []string            `json:"surfaces,omitempty"`
	Outcome  *executor.Outcome   `json:"outcome,omitempty"`
	Run      *store.Run          `json:"run,omitempty"`
	Err      error               `json:"-"`
}
