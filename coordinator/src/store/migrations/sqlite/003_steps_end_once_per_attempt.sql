-- A measure cut off by a stop of the agent runs again after its repetition's
-- preparation ran again: those steps end once per attempt. A resend of an end is
-- still ignored, and a measure step still ends once, so samples stay unique per
-- (cell, repetition, metric).
DROP INDEX steps_one_end;
CREATE UNIQUE INDEX steps_one_end ON steps (plan_id, step_index, attempt) WHERE state != 'started';
CREATE UNIQUE INDEX steps_one_measure ON steps (plan_id, step_index) WHERE state != 'started' AND kind = 'measure';
