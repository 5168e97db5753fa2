-- Warm-up runs (`warmup:`) are stored like the others and kept out of every
-- statistic: `sample_rows` leaves them out, `warmup_rows` has only them.
ALTER TABLE steps ADD COLUMN warmup INTEGER NOT NULL DEFAULT 0;
-- The plan's warm-up step indexes (JSON list), so the writer marks their steps.
ALTER TABLE plans ADD COLUMN warmup_steps TEXT NOT NULL DEFAULT '[]';
-- What planning a later round of adaptive repetition needs: the matrix point and
-- the target device's path of each cell.
ALTER TABLE cells ADD COLUMN point INTEGER;
ALTER TABLE cells ADD COLUMN device TEXT;
DROP VIEW sample_rows;
CREATE VIEW sample_rows AS
    SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
           st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
           sa.missing AS missing
    FROM samples sa JOIN steps st ON st.n = sa.step WHERE st.warmup = 0;
CREATE VIEW warmup_rows AS
    SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
           st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
           sa.missing AS missing
    FROM samples sa JOIN steps st ON st.n = sa.step WHERE st.warmup = 1;
