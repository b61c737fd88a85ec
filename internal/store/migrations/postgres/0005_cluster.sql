-- Several instances on one PostgreSQL database (cluster.go): the lease
-- of each run an instance drives, the instances, the one run of each
-- schedule tick, the CLI's session files (so any instance can resume a
-- run), and the machine that holds a run's working directory.
CREATE TABLE run_leases (
	run_id     TEXT PRIMARY KEY REFERENCES runs(id),
	owner      TEXT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE TABLE instances (
	id           TEXT PRIMARY KEY,
	host         TEXT NOT NULL,
	pid          BIGINT NOT NULL,
	leader       BIGINT NOT NULL DEFAULT 0,
	driving      BIGINT NOT NULL DEFAULT 0,
	started_at   BIGINT NOT NULL,
	heartbeat_at BIGINT NOT NULL
);
CREATE TABLE schedule_ticks (
	spec   TEXT NOT NULL,
	tick   BIGINT NOT NULL,
	run_id TEXT NOT NULL,
	PRIMARY KEY (spec, tick)
);
CREATE TABLE sessions (
	run_id     TEXT NOT NULL REFERENCES runs(id),
	session_id TEXT NOT NULL,
	content    BYTEA NOT NULL,
	size       BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (run_id, session_id)
);
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
