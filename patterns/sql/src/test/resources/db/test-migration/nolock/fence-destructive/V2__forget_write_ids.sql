-- Test only, never shipped: a later migration that loses live rows, for the negative control of
-- the upgrade check.
TRUNCATE ${nolock_fence_writes_table};
