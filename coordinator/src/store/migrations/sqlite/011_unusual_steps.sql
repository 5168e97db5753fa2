-- The few steps a report looks for apart from the rest: those that failed or were skipped
-- or ran again (`steps_unusual`), and warm-up runs (`steps_warmup`). Without them each of
-- a report's seven queries for such steps read every step of the campaign: on PostgreSQL
-- 12–59 ms each, 257 ms of a 1M-sample report's 1.4 s, for none found. Both engines run
-- the same text (PostgreSQL's 009); SQLite uses an index only where the query names one
-- of its terms as it is written (`s.state = 'failed'`).

CREATE INDEX steps_unusual ON steps (plan_id) WHERE state = 'failed' OR state = 'skipped' OR attempt > 1;
CREATE INDEX steps_warmup ON steps (plan_id) WHERE warmup = 1;
