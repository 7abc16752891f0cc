-- nolock idempotency keys, version 1: the attempt-token sequence, the keys table, its expiry index
-- and its partial index of in-progress keys, as IdempotencyKeys.createTableIfMissing makes them.
-- Placeholder (an unqualified name; the schema is the migration tool's; the sequence and the
-- indexes are named after it):
--   nolock_idempotency_table  default nolock_idempotency_keys
-- A released file never changes: every later change comes as a new version.

CREATE SEQUENCE ${nolock_idempotency_table}_attempt_seq START WITH 1;

CREATE TABLE ${nolock_idempotency_table} (
    scope varchar(100) NOT NULL,
    principal text NOT NULL,
    idempotency_key varchar(255) NOT NULL,
    fingerprint varchar(255) NOT NULL,
    state varchar(16) NOT NULL,
    attempt_token bigint NOT NULL,
    attempt_count int NOT NULL,
    recovery_point varchar(63) NOT NULL,
    locked_until timestamp with time zone NOT NULL,
    response_status int NULL,
    response_body bytea NULL,
    created_at timestamp with time zone NOT NULL,
    completed_at timestamp with time zone NULL,
    expires_at timestamp with time zone NOT NULL,
    downstream_key uuid NOT NULL,
    PRIMARY KEY (scope, principal, idempotency_key),
    CHECK (state IN ('in_progress', 'completed')),
    CHECK (attempt_token > 0),
    CHECK (attempt_count > 0)
);

CREATE INDEX ${nolock_idempotency_table}_expires_idx
    ON ${nolock_idempotency_table} (expires_at);

CREATE INDEX ${nolock_idempotency_table}_open_idx
    ON ${nolock_idempotency_table} (scope, principal, idempotency_key)
    WHERE state = 'in_progress';
