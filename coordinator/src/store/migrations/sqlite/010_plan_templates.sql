-- Plans stored once per distinct template (issue 32, `store::plans`). A plan row names
-- its template and lists its cells; `body` stays '' for such a row and holds the whole
-- plan for one stored before templates.

CREATE TABLE plan_templates (
    hash TEXT NOT NULL PRIMARY KEY,  -- hex SHA-256 of body
    body TEXT NOT NULL               -- JSON of the plan: no id or host, cells by position
);
ALTER TABLE plans ADD COLUMN template TEXT;   -- plan_templates.hash; NULL: `body` is the plan
ALTER TABLE plans ADD COLUMN cells TEXT;      -- JSON list of the plan's cell ids
