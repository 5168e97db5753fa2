-- Operator-given labels of the last hello, JSON object (`--label rack=b12`).
ALTER TABLE agents ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
