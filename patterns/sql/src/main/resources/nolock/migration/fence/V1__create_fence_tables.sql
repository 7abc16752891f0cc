-- nolock fence, version 1: the fence table and its write-id table, as Fence.createTableIfMissing
-- makes them. Placeholders (unqualified names; the schema is the migration tool's):
--   nolock_fence_table         default nolock_fences
--   nolock_fence_writes_table  default nolock_fences_writes
-- A released file never changes: every later change comes as a new version.

CREATE TABLE ${nolock_fence_table} (
    name varchar(255) NOT NULL,
    token bigint NOT NULL,
    owner varchar(255) NOT NULL,
    PRIMARY KEY (name),
    CHECK (token > 0)
);

CREATE TABLE ${nolock_fence_writes_table} (
    name varchar(255) NOT NULL,
    write_id varchar(255) NOT NULL,
    token bigint NOT NULL,
    owner varchar(255) NOT NULL,
    written_at timestamp with time zone NOT NULL,
    PRIMARY KEY (name, write_id),
    CHECK (token > 0)
);
