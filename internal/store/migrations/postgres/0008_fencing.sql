-- Fencing (fence.go): each take of a run's lease gets a token one
-- higher than the last, kept with the lease (the row stays when the
-- lease is given back), that the writes of a turn carry; and the tool
-- calls a turn started and finished, recorded by the CLI's hooks as
-- they happen, so that an instance taking a killed turn over knows
-- what it did.
ALTER TABLE run_leases ADD COLUMN token BIGINT NOT NULL DEFAULT 0;
CREATE TABLE turn_tool_calls (
	run_id      TEXT NOT NULL REFERENCES runs(id),
	tool_use_id TEXT NOT NULL,
	tool        TEXT NOT NULL,
	input       TEXT NOT NULL DEFAULT '',
	result      TEXT NOT NULL DEFAULT '',
	token       BIGINT NOT NULL,
	started_at  BIGINT NOT NULL,
	finished_at BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, tool_use_id)
);
