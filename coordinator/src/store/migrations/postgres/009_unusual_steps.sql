-- Failed, skipped, retried and warm-up steps indexed apart: the same text as SQLite's
-- 011, which says why.

CREATE INDEX steps_unusual ON steps (plan_id) WHERE state = 'failed' OR state = 'skipped' OR attempt > 1;
CREATE INDEX steps_warmup ON steps (plan_id) WHERE warmup = 1;
