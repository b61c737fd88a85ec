-- Spend cap reservations (spend.go): a turn started under a spend cap
-- reserves its --max-budget-usd on its row until it finishes; its recorded
-- cost then replaces the reservation. Open reservations are read from a
-- partial index of the few turns that hold one.
ALTER TABLE turns ADD COLUMN reserved_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE INDEX turns_reserved ON turns(run_id, started_at, reserved_usd) WHERE finished = 0 AND reserved_usd > 0;
