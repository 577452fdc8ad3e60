"""PostgreSQL: the keyed claim's function, installed once for every session (pooled or not).

Its text is frozen here, as a migration's must be: ``sql/keyed_claim.py``
builds the same text from the texts the other claims use, and
``tests/sql/test_keyed_statement.py`` holds the two equal. A change of the
function is a new version (a new name) in a new migration. SQLite has no
functions: its keyed claim is ``sql/keys.py``'s statements.
"""

from django.db import migrations

FUNCTION = "scheduler_keyed_claim_v2"

CREATE = r'''CREATE OR REPLACE FUNCTION scheduler_keyed_claim_v2(
    p_finished jsonb, p_logs json, p_now timestamptz, p_queues text[], p_limit integer, p_in_flight bigint[],
    p_first integer, p_chunk integer, p_scan integer
) RETURNS TABLE (kind text, job bigint, status text) LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
    v_chosen bigint[] := '{}';
    v_skip text[] := '{}';  -- keys found full or busy: left out of the next chunks
    v_busy text[] := '{}';  -- keys another claim holds the lock of
    v_new text[];
    v_running jsonb := '{}';  -- key -> its running jobs, counted after its lock
    v_taken jsonb := '{}';  -- key -> its jobs chosen here
    v_held boolean := false;
    v_read integer := 0;
    v_chunk integer := p_first;
    v_ids bigint[];
    v_keys text[];
    v_limits integer[];
    v_locks boolean[];
    v_count record;
    v_key text;
BEGIN
    IF p_finished IS NOT NULL THEN
        RETURN QUERY WITH v AS (SELECT * FROM jsonb_to_recordset(p_finished::jsonb) AS v(vid bigint, vworker text, vattempts integer, vstatus text, vresult text, verror text, vexec timestamptz, vsnooze boolean, vlogs integer)), f AS (UPDATE scheduler_app_job AS j SET status = (CASE WHEN j.cancel_requested AND v.vstatus IN ('pending', 'failed') THEN 'cancelled' ELSE v.vstatus END), result = CASE WHEN v.vstatus = 'succeeded' THEN v.vresult::jsonb ELSE j.result END, errors = CASE WHEN v.verror IS NULL THEN j.errors ELSE j.errors || jsonb_build_array(v.verror::jsonb) END, execute_at = CASE WHEN (CASE WHEN j.cancel_requested AND v.vstatus IN ('pending', 'failed') THEN 'cancelled' ELSE v.vstatus END) = 'pending' THEN COALESCE(v.vexec, j.execute_at) ELSE j.execute_at END, finished_at = CASE WHEN (CASE WHEN j.cancel_requested AND v.vstatus IN ('pending', 'failed') THEN 'cancelled' ELSE v.vstatus END) = 'pending' THEN NULL ELSE p_now END, attempts = CASE WHEN v.vsnooze THEN j.attempts - 1 ELSE j.attempts END, snoozes = CASE WHEN v.vsnooze THEN j.snoozes + 1 ELSE j.snoozes END, lease_expires_at = NULL, updated_at = p_now, logs_count = j.logs_count + v.vlogs FROM v WHERE j.id = v.vid AND j.id = ANY(ARRAY(SELECT vid FROM v)) AND j.attempts = v.vattempts AND (j.status = 'running') IS TRUE AND j.worker = v.vworker AND NOT j.has_dependents RETURNING j.id, j.status), l AS (INSERT INTO scheduler_app_joblog (job_id, attempt, seq, time, level, logger, message, exc_text) SELECT x.job, x.attempt, x.seq, to_timestamp(x.time), x.level, x.logger, x.message, x.exc FROM json_to_recordset(p_logs::json) AS x(job bigint, attempt integer, seq integer, time float8, level smallint, logger text, message text, exc text) WHERE x.job IN (SELECT id FROM f)) SELECT 'f'::text, f.id, f.status::text FROM f;
    END IF;
    IF EXISTS (SELECT 1 FROM scheduler_app_queue WHERE name = ANY(p_queues) AND (concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL)) THEN
        RETURN QUERY SELECT 'l'::text, NULL::bigint, NULL::text;
        RETURN;
    END IF;
    WHILE cardinality(v_chosen) < p_limit AND v_read < p_scan LOOP
        SELECT array_agg(c.id ORDER BY c.priority DESC, c.execute_at, c.id),
               array_agg(c.concurrency_key ORDER BY c.priority DESC, c.execute_at, c.id),
               array_agg(c.concurrency_limit ORDER BY c.priority DESC, c.execute_at, c.id),
               array_agg(pg_try_advisory_xact_lock(23789, hashtext(c.concurrency_key))
                         ORDER BY c.priority DESC, c.execute_at, c.id)
          INTO v_ids, v_keys, v_limits, v_locks
          FROM (SELECT id, concurrency_key, concurrency_limit, priority, execute_at FROM scheduler_app_job WHERE status = 'pending' AND concurrency_key IS NOT NULL AND execute_at <= p_now AND (expires_at IS NULL OR expires_at > p_now) AND queue = ANY(p_queues) AND queue NOT IN (SELECT name FROM scheduler_app_queue WHERE paused) AND id <> ALL(p_in_flight) AND id <> ALL(v_chosen) AND concurrency_key <> ALL(v_skip) ORDER BY priority DESC, execute_at, id LIMIT v_chunk) c;
        EXIT WHEN v_ids IS NULL;
        v_read := v_read + cardinality(v_ids);
        v_chunk := LEAST(v_chunk * 4, p_chunk);
        v_new := '{}';
        FOR i IN 1 .. cardinality(v_ids) LOOP
            v_key := v_keys[i];
            CONTINUE WHEN v_running ? v_key OR v_key = ANY(v_busy);
            IF v_locks[i] THEN
                v_running := v_running || jsonb_build_object(v_key, 0);
                v_new := v_new || v_key;
            ELSE
                v_busy := v_busy || v_key;  -- skipped for now, as SKIP LOCKED skips a row
            END IF;
        END LOOP;
        IF cardinality(v_new) > 0 THEN
            FOR v_count IN
                SELECT concurrency_key AS k, count(*) AS n FROM scheduler_app_job
                 WHERE status = 'running' AND concurrency_key = ANY(v_new) GROUP BY concurrency_key
            LOOP
                v_running := v_running || jsonb_build_object(v_count.k, v_count.n);
            END LOOP;
        END IF;
        FOR i IN 1 .. cardinality(v_ids) LOOP
            v_key := v_keys[i];
            IF v_key = ANY(v_busy) OR COALESCE(v_limits[i], 1) - (v_running ->> v_key)::integer
                    - COALESCE((v_taken ->> v_key)::integer, 0) <= 0 THEN
                v_held := true;
                IF NOT v_key = ANY(v_skip) THEN
                    v_skip := v_skip || v_key;
                END IF;
                CONTINUE;
            END IF;
            EXIT WHEN cardinality(v_chosen) >= p_limit;
            v_chosen := v_chosen || v_ids[i];
            v_taken := v_taken || jsonb_build_object(v_key, COALESCE((v_taken ->> v_key)::integer, 0) + 1);
        END LOOP;
    END LOOP;
    RETURN QUERY SELECT 't'::text, c, NULL::text FROM unnest(v_chosen) AS c;
    IF v_held THEN
        RETURN QUERY SELECT 'h'::text, NULL::bigint, NULL::text;
    END IF;
END
$fn$'''

DROP = (
    "DROP FUNCTION IF EXISTS scheduler_keyed_claim_v2"
    "(jsonb, json, timestamptz, text[], integer, bigint[], integer, integer, integer)"
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("scheduler_app", "0019_auditevent_menu_name")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
