-- nolock partitioned ownership, version 1: the ownership table, as
-- PartitionOwner.createTableIfMissing makes it. Placeholder (an unqualified name; the schema is
-- the migration tool's):
--   nolock_ownership_table  default nolock_partition_owners
-- A released file never changes: every later change comes as a new version.

CREATE TABLE ${nolock_ownership_table} (
    consumer_group      varchar(255) NOT NULL,
    topic               varchar(249) NOT NULL,
    partition           int          NOT NULL CHECK (partition >= 0),
    partition_count     int          NOT NULL CHECK (partition_count > partition),
    epoch               bigint       NOT NULL CHECK (epoch >= 0),
    owner               varchar(255),
    last_applied_offset bigint       NOT NULL CHECK (last_applied_offset >= -1),
    claimed_at          timestamptz,
    PRIMARY KEY (consumer_group, topic, partition)
);
