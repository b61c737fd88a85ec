-- The feed of question sets (feed.go): seq is the position of a set's
-- last change (its state, its answers, its run's status), one higher
-- than any before it, given in the transaction of the change; a watcher
-- reads the sets above the last position it saw, by the index, instead
-- of a query term per set it waits on. Existing sets get positions in
-- the order they were made.
ALTER TABLE question_sets ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE question_sets SET seq = o.n
	FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, id) AS n FROM question_sets) o
	WHERE o.id = question_sets.id;
CREATE UNIQUE INDEX question_sets_seq ON question_sets(seq);
-- The waiting sets by ID (WaitingSets' pages) and the answered sets
-- (ClaimableRuns) are read by state; (state, id) serves both and what
-- (state) alone served.
CREATE INDEX question_sets_state_id ON question_sets(state, id);
DROP INDEX question_sets_state;
