-- What microingest did to target tables on behalf of their declarations: a table created (one row per column) or a
-- declared field's column added (and, from 015, a decimal column widened). Whatever does not fit is refused instead.
CREATE TABLE IF NOT EXISTS microingest.schema_changes (
    id                bigserial    PRIMARY KEY,
    pipeline          text         NOT NULL,
    target_table      text         NOT NULL,
    change            text         NOT NULL CHECK (change IN ('created', 'added')),
    column_name       text         NOT NULL,
    column_type       text         NOT NULL,
    declaration       text         NOT NULL,  -- the declaration's file
    declared_schema   jsonb        NOT NULL,  -- its fields when it asked: {"name": {"type": ..., "required": ...}}
    changed_by        text         NOT NULL,
    changed_at        timestamptz  NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS schema_changes_pipeline ON microingest.schema_changes (pipeline, changed_at);
