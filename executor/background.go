package executor

import (
	"encoding/json"
	"sync"
)

// Background tasks (Bash or agents run with run_in_background): the CLI
// reports them as system lines — task_started, task_notification (ended:
// completed, failed or stopped) and background_tasks_changed (the whole
// list) — and may go on after its result line once they end (it takes their
// notification as a new turn, with a result of its own). While any is in
// flight, the CLI is not done: its input stays open (as the Agent SDK keeps
// it) and its result grace does not run. Measured on CLI 2.1.330.

// Subtypes of the system lines about background tasks.
const (
	subtypeTaskStarted      = "task_started"
	subtypeTaskNotification = "task_notification"
	subtypeTasksChanged     = "background_tasks_changed"
)

// backgroundTasks is the set of tasks in flight.
type backgroundTasks struct {
	mu    sync.Mutex
	tasks map[string]bool
}

// observe updates the set from a system line; changed is true when it
// was about background tasks.
func (b *backgroundTasks) observe(ev *SystemOther) (changed bool) {
	var line struct {
		TaskID string `json:"task_id"`
		Tasks  []struct {
			TaskID string `json:"task_id"`
		} `json:"tasks"`
	}
	switch ev.Subtype {
	case subtypeTaskStarted, subtypeTaskNotification, subtypeTasksChanged:
	default:
		return false
	}
	if err := json.Unmarshal(ev.Raw(), &line); err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tasks == nil {
		b.tasks = map[string]bool{}
	}
	switch ev.Subtype {
	case subtypeTaskStarted:
		if line.TaskID != "" {
			b.tasks[line.TaskID] = true
		}
	case subtypeTaskNotification:
		delete(b.tasks, line.TaskID)
	case subtypeTasksChanged:
		clear(b.tasks)
		for _, t := range line.Tasks {
			if t.TaskID != "" {
				b.tasks[t.TaskID] = true
			}
		}
	}
	return true
}

// inFlight counts the tasks in flight.
func (b *backgroundTasks) inFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.tasks)
}

// BackgroundTasks is how many background tasks the CLI reports in flight.
func (r *Process) BackgroundTasks() int { return r.bg.inFlight() }
