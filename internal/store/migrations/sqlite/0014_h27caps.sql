-- Spend caps across runs (issue 27, spend.go): what the turns cost by when
-- they finished, from an index alone; and the caps a person raised by
-- answering Continue at a cap question, one row per question set (a set
-- raises its cap once).
CREATE INDEX turns_finished_cost ON turns(finished_at, cost_usd);
CREATE TABLE cap_raises (
	set_id       TEXT PRIMARY KEY,
	scope        TEXT NOT NULL,
	period       TEXT NOT NULL,
	period_start INTEGER NOT NULL,
	amount       REAL NOT NULL,
	created_at   INTEGER NOT NULL
);
CREATE INDEX cap_raises_period ON cap_raises(scope, period, period_start);
