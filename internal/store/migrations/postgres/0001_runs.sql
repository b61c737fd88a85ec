-- The first schema: runs, their turns, the question sets the model asked,
-- their questions and answers, the surfaces' references, the schedule.
CREATE TABLE runs (
	id          TEXT PRIMARY KEY,
	spec        TEXT NOT NULL DEFAULT '',
	title       TEXT NOT NULL DEFAULT '',
	prompt      TEXT NOT NULL,
	workdir     TEXT NOT NULL DEFAULT '',
	surfaces    TEXT NOT NULL DEFAULT '[]',
	options     TEXT NOT NULL DEFAULT '{}',
	status      TEXT NOT NULL,
	session_id  TEXT NOT NULL DEFAULT '',
	error       TEXT NOT NULL DEFAULT '',
	final_text  TEXT NOT NULL DEFAULT '',
	cost_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_spec ON runs(spec, created_at);
CREATE TABLE turns (
	run_id          TEXT NOT NULL REFERENCES runs(id),
	seq             BIGINT NOT NULL,
	kind            TEXT NOT NULL,
	prompt          TEXT NOT NULL,
	set_id          TEXT NOT NULL DEFAULT '',
	session_id      TEXT NOT NULL DEFAULT '',
	resume          BIGINT NOT NULL DEFAULT 0,
	transcript_path TEXT NOT NULL DEFAULT '',
	finished        BIGINT NOT NULL DEFAULT 0,
	status          TEXT NOT NULL DEFAULT '',
	category        TEXT NOT NULL DEFAULT '',
	error           TEXT NOT NULL DEFAULT '',
	cost_usd        DOUBLE PRECISION NOT NULL DEFAULT 0,
	input_tokens    BIGINT NOT NULL DEFAULT 0,
	output_tokens   BIGINT NOT NULL DEFAULT 0,
	num_turns       BIGINT NOT NULL DEFAULT 0,
	question_error  TEXT NOT NULL DEFAULT '',
	started_at      BIGINT NOT NULL,
	finished_at     BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, seq)
);
CREATE TABLE question_sets (
	id           TEXT PRIMARY KEY,
	run_id       TEXT NOT NULL REFERENCES runs(id),
	turn         BIGINT NOT NULL,
	state        TEXT NOT NULL,
	body         TEXT NOT NULL,
	surfaces     TEXT NOT NULL DEFAULT '[]',
	created_at   BIGINT NOT NULL,
	answered_at  BIGINT NOT NULL DEFAULT 0,
	claimed_at   BIGINT NOT NULL DEFAULT 0,
	resumed_at   BIGINT NOT NULL DEFAULT 0,
	reminded_at  BIGINT NOT NULL DEFAULT 0,
	escalated_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX question_sets_run ON question_sets(run_id, state);
CREATE INDEX question_sets_state ON question_sets(state);
CREATE TABLE questions (
	id       TEXT NOT NULL,
	set_id   TEXT NOT NULL REFERENCES question_sets(id),
	position BIGINT NOT NULL,
	PRIMARY KEY (set_id, id)
);
CREATE INDEX questions_id ON questions(id);
CREATE TABLE answers (
	set_id      TEXT NOT NULL REFERENCES question_sets(id),
	question_id TEXT NOT NULL,
	body        TEXT NOT NULL,
	answered_by TEXT NOT NULL,
	surface     TEXT NOT NULL,
	at          BIGINT NOT NULL,
	PRIMARY KEY (set_id, question_id)
);
CREATE TABLE surface_refs (
	surface TEXT NOT NULL,
	key     TEXT NOT NULL,
	value   TEXT NOT NULL,
	PRIMARY KEY (surface, key)
);
CREATE TABLE schedule (
	spec     TEXT PRIMARY KEY,
	last_run BIGINT NOT NULL
);
