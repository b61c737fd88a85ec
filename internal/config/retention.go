package config

import "time"

// Retention says how long `orchestrator gc` (and serve, once a day) keeps
// what runs leave behind. 0 keeps it for ever. Nothing of a run that is
// not over (queued, running, waiting, interrupted) is ever removed.
type Retention struct {
	// Transcripts is how long the raw output of each turn (the files
	// under <state_dir>/transcripts) is kept. Default: 90d.
	Transcripts Duration `yaml:"transcripts"`
	// Runs is how long a finished run (done, failed, cancelled, stopped)
	// is kept in the store, counted from its last change, with its turns,
	// question sets and answers (its decision log), sessions, tool calls
	// and delivery record. Default: 90d.
	Runs Duration `yaml:"runs"`
	// Branches is how long the local branch a run's delivery made in the
	// person's checkout is kept once the run ended; a branch that was
	// pushed goes as soon as the run is over and its worktree removed.
	// A branch that moved past the run's own commit is never removed.
	// Default: 30d.
	Branches Duration `yaml:"branches"`
}

// Retention's defaults.
const (
	DefaultRetainTranscripts = Duration(90 * 24 * time.Hour)
	DefaultRetainRuns        = Duration(90 * 24 * time.Hour)
	DefaultRetainBranches    = Duration(30 * 24 * time.Hour)
)

// validateRetention checks the retention section.
func (c *Config) validateRetention(add func(key, format string, args ...any)) {
	for _, k := range []struct {
		key string
		d   Duration
	}{{"retention.transcripts", c.Retention.Transcripts}, {"retention.runs", c.Retention.Runs}, {"retention.branches", c.Retention.Branches}} {
		if k.d < 0 {
			add(k.key, "must not be negative (0 keeps for ever), got %s", k.d)
		}
	}
}
