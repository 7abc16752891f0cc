-- A destructive later migration, for the upgrade check's negative control only: it keeps every
-- row but restarts the attempt-token sequence, so tokens already handed out would be handed out
-- again and a takeover could not fence the attempt it replaced.
ALTER SEQUENCE ${nolock_idempotency_table}_attempt_seq RESTART WITH 1;
