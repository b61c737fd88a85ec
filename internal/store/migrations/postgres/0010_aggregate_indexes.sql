-- The aggregate reads of status and /metrics (aggregates.go): the newest
-- waiting sets in order of asking, without sorting every one; the runs
-- counted by spec and status, and the newest running or waiting run of
-- each spec, from an index alone.
CREATE INDEX question_sets_state_created ON question_sets(state, created_at);
CREATE INDEX runs_spec_status ON runs(spec, status, cost_usd, updated_at);
CREATE INDEX runs_status_spec ON runs(status, spec, created_at);
