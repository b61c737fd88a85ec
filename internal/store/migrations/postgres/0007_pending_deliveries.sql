-- A run's delivery that did not finish (a push or a pull request that
-- failed after its retries) is pending: the run is done, and serve and
-- `resume RUN` try again (delivery.go).
ALTER TABLE deliveries ADD COLUMN pending BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN next_attempt_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
