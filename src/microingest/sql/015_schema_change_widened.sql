-- A declared decimal's column widened to the declaration's precision and scale (every value it held kept exactly) is
-- a change microingest makes to a target too, audited like the others.
ALTER TABLE microingest.schema_changes DROP CONSTRAINT IF EXISTS schema_changes_change_check;
ALTER TABLE microingest.schema_changes ADD CONSTRAINT schema_changes_change_check
    CHECK (change IN ('created', 'added', 'widened'));
