-- nolock fenced lock on PostgreSQL, version 2: the queue of waiters beside the lease table, as
-- PostgresLockBackend.createTableIfMissing makes it (one row per waiting acquire, its place in the
-- queue of one lock name). Adds a table; the lease table and its rows are unchanged. Placeholder
-- (an unqualified name; the schema is the migration tool's):
--   nolock_lock_table  default nolock_locks
-- A released file never changes: every later change comes as a new version.

CREATE TABLE ${nolock_lock_table}_waiters (
    name varchar(255) NOT NULL,
    waiter varchar(255) NOT NULL,
    joined_at timestamp with time zone NOT NULL,
    patient_until timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    PRIMARY KEY (name, waiter)
);
