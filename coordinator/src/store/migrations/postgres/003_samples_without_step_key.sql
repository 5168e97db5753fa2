-- `samples.step REFERENCES steps(n)` checked each sample with a query of its own that
-- also locks its step's row (PostgreSQL's foreign keys are per-row triggers): 40% of
-- the server's time storing samples (perf on the backend during store_write; COPY of
-- 1.6M samples in psql took 10.8 s with it, 2.1–3.3 s without). It guards nothing
-- the writer can break: samples are inserted only under the keys of steps the same
-- savepoint inserted, and no statement deletes steps. SQLite's check
-- is in-process and stays.

ALTER TABLE samples DROP CONSTRAINT IF EXISTS samples_step_fkey;
