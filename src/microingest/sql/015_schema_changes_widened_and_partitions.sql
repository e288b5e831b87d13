-- A declared decimal's column widened (every value it held kept exactly), and a partitioned target's partitions
-- made for a batch and dropped past retention, are changes microingest makes to a target too, audited like the others.
ALTER TABLE microingest.schema_changes DROP CONSTRAINT IF EXISTS schema_changes_change_check;
ALTER TABLE microingest.schema_changes ADD CONSTRAINT schema_changes_change_check
    CHECK (change IN ('created', 'added', 'widened', 'partition_created', 'partition_dropped'));
