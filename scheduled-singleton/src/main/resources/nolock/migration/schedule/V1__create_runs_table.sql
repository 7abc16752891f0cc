-- nolock scheduled singleton, version 1: the runs table and its partial index for takeovers, as
-- ScheduledSingleton.createTableIfMissing makes them. Placeholder (an unqualified name of at most
-- 50 characters; the schema is the migration tool's; the index is named after it):
--   nolock_schedule_table  default nolock_scheduled_runs
-- A released file never changes: every later change comes as a new version.

CREATE TABLE ${nolock_schedule_table} (
    job varchar(255) NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    state varchar(16) NOT NULL,
    attempt bigint NOT NULL,
    owner varchar(255) NOT NULL,
    locked_until timestamp with time zone NULL,
    covers_from timestamp with time zone NOT NULL,
    missed bigint NOT NULL,
    claimed_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NULL,
    last_error text NULL,
    PRIMARY KEY (job, scheduled_at),
    CHECK (state IN ('running', 'done', 'failed')),
    CHECK (attempt > 0),
    CHECK (missed >= 0)
);

CREATE INDEX ${nolock_schedule_table}_expiry_idx
    ON ${nolock_schedule_table} (job, locked_until) WHERE state = 'running';
