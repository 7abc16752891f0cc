-- nolock fenced lock on PostgreSQL, version 1: the lease table, as
-- PostgresLockBackend.createTableIfMissing makes it. Placeholder (an unqualified name; the schema
-- is the migration tool's):
--   nolock_lock_table  default nolock_locks
-- A released file never changes: every later change comes as a new version.

CREATE TABLE ${nolock_lock_table} (
    name varchar(255) NOT NULL,
    owner varchar(255) NOT NULL,
    token bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    PRIMARY KEY (name),
    CHECK (token > 0)
);
