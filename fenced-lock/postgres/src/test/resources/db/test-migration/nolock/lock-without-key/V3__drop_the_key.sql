-- Test only, never shipped: a later migration that keeps every row but breaks the module (its
-- acquire's ON CONFLICT (name) needs the key), for the negative control of the upgrade check.
ALTER TABLE ${nolock_lock_table} DROP CONSTRAINT ${nolock_lock_table}_pkey;
