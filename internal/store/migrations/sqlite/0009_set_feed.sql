-- The feed of question sets (feed.go): seq is the position of a set's
-- last change (made, answered in part or whole, its state, its run's
-- status while it is open), one higher than any before it; a watcher
-- reads the sets above the last position it saw, by the index, instead
-- of a query term per set it waits on. Existing sets get positions in the
-- order they were made; the triggers below give the next ones, in the
-- statement of the change (every write holds SQLite's write lock: the
-- positions follow the commits).
ALTER TABLE question_sets ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE question_sets SET seq = o.n
	FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, id) AS n FROM question_sets) o
	WHERE o.id = question_sets.id;
CREATE UNIQUE INDEX question_sets_seq ON question_sets(seq);
-- A set inserted with its position (a bulk load that counts them itself)
-- keeps it.
CREATE TRIGGER question_sets_feed_insert AFTER INSERT ON question_sets WHEN NEW.seq = 0 BEGIN
	UPDATE question_sets SET seq = (SELECT MAX(seq) FROM question_sets) + 1 WHERE id = NEW.id;
END;
CREATE TRIGGER question_sets_feed_state AFTER UPDATE OF state ON question_sets WHEN OLD.state <> NEW.state BEGIN
	UPDATE question_sets SET seq = (SELECT MAX(seq) FROM question_sets) + 1 WHERE id = NEW.id;
END;
CREATE TRIGGER answers_feed AFTER INSERT ON answers BEGIN
	UPDATE question_sets SET seq = (SELECT MAX(seq) FROM question_sets) + 1 WHERE id = NEW.set_id;
END;
-- A position each for the run's open sets: the head plus the set's rank
-- among the run's sets.
CREATE TRIGGER runs_feed_status AFTER UPDATE OF status ON runs WHEN OLD.status <> NEW.status BEGIN
	UPDATE question_sets SET seq = (SELECT MAX(seq) FROM question_sets)
		+ (SELECT COUNT(*) FROM question_sets o WHERE o.run_id = NEW.id AND o.id <= question_sets.id)
		WHERE run_id = NEW.id AND state IN ('pending', 'answered');
END;
-- The waiting sets by ID (WaitingSets' pages) and the answered sets
-- (ClaimableRuns) are read by state; (state, id) serves both and what
-- (state) alone served.
CREATE INDEX question_sets_state_id ON question_sets(state, id);
DROP INDEX question_sets_state;
