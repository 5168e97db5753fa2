-- Every text column of platter's tables compares bytes (`COLLATE "C"`), as SQLite's
-- do: the same order from both engines whatever locale the database was created with,
-- and keys compared with `memcmp` rather than the locale's `strcoll` (in psql, 410k
-- steps went into their four indexes in 3.4 s instead of 5.1–5.5 s on a `C.UTF-8`
-- database). Only platter's own tables and its two views are touched (the schema may
-- hold others'): the views are dropped and made again around it (a column a view uses
-- cannot change), with the privileges granted on them; a view of someone else's on
-- them makes the migration fail, undone, rather than be dropped. The tables are locked
-- first, in one order; a collation alone does not rewrite a table, but its indexes are
-- rebuilt (~2–5 s for a store of 1.6M samples here).

LOCK TABLE campaigns, cells, plans, steps, samples, agents, store_identity, refused_records,
           provenance, coordinators, agent_links IN ACCESS EXCLUSIVE MODE;
CREATE TEMP TABLE platter_view_grants ON COMMIT DROP AS
    SELECT c.relname::text AS view, a.grantee, a.privilege_type
      FROM pg_class c, aclexplode(c.relacl) a
     WHERE c.oid IN (to_regclass('sample_rows'), to_regclass('warmup_rows')) AND a.grantee <> c.relowner;
DO $$
DECLARE
    t record;
    g record;
    sample_def text := pg_get_viewdef('sample_rows'::regclass);
    warmup_def text := pg_get_viewdef('warmup_rows'::regclass);
BEGIN
    DROP VIEW sample_rows;
    DROP VIEW warmup_rows;
    FOR t IN SELECT c.table_name,
                    string_agg(format('ALTER COLUMN %I TYPE text COLLATE "C"', c.column_name), ', ') AS alters
               FROM information_schema.columns c
              WHERE c.table_schema = current_schema() AND c.data_type = 'text' AND c.domain_name IS NULL
                AND c.table_name IN ('campaigns', 'cells', 'plans', 'steps', 'samples', 'agents', 'store_identity',
                                     'refused_records', 'provenance', 'coordinators', 'agent_links')
              GROUP BY c.table_name ORDER BY c.table_name LOOP
        EXECUTE format('ALTER TABLE %I %s', t.table_name, t.alters);
    END LOOP;
    EXECUTE 'CREATE VIEW sample_rows AS ' || sample_def;
    EXECUTE 'CREATE VIEW warmup_rows AS ' || warmup_def;
    FOR g IN SELECT * FROM platter_view_grants LOOP
        EXECUTE format('GRANT %s ON %I TO %s', g.privilege_type, g.view,
                       CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(g.grantee)) END);
    END LOOP;
END $$;
