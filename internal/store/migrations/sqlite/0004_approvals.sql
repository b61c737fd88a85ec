-- Native asking and tool approvals (approvals.go): a set's kind, the
-- tool calls asked about (their tool_use_id is the idempotency key of
-- the decision), the rules a person allowed for the rest of a run, and
-- the run's approvals policy as its hook reads it.
ALTER TABLE question_sets ADD COLUMN kind TEXT NOT NULL DEFAULT 'marker';
CREATE TABLE tool_calls (
	tool_use_id   TEXT PRIMARY KEY,
	run_id        TEXT NOT NULL REFERENCES runs(id),
	set_id        TEXT NOT NULL DEFAULT '',
	kind          TEXT NOT NULL,
	tool          TEXT NOT NULL,
	input         TEXT NOT NULL DEFAULT '',
	decision      TEXT NOT NULL DEFAULT '',
	reason        TEXT NOT NULL DEFAULT '',
	updated_input TEXT NOT NULL DEFAULT '',
	decided_by    TEXT NOT NULL DEFAULT '',
	deferred      INTEGER NOT NULL DEFAULT 0,
	created_at    INTEGER NOT NULL,
	decided_at    INTEGER NOT NULL DEFAULT 0,
	used_at       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tool_calls_run ON tool_calls(run_id);
CREATE TABLE run_rules (
	run_id     TEXT NOT NULL REFERENCES runs(id),
	rule       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (run_id, rule)
);
CREATE TABLE run_policies (
	run_id     TEXT PRIMARY KEY REFERENCES runs(id),
	policy     TEXT NOT NULL,
	updated_at INTEGER NOT NULL
);
