-- Runs started over the web API with an Idempotency-Key (runrequests.go):
-- one row per person and key, made in the transaction that makes the run,
-- so that a retried request finds the run its first attempt made. The
-- body's SHA-256 tells a retry from another request reusing the key.
CREATE TABLE run_requests (
	by_user     TEXT NOT NULL,
	key         TEXT NOT NULL,
	body_sha256 TEXT NOT NULL,
	run_id      TEXT NOT NULL REFERENCES runs(id),
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (by_user, key)
);
CREATE INDEX run_requests_run ON run_requests(run_id);
