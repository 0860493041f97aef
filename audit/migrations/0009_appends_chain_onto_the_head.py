r"""The database accepts an audit row only if it chains onto the head.

Before this, the app role could INSERT any row: one badly chained row broke verification for good
and stopped checkpoint signing, and nothing refused it. Now a BEFORE INSERT trigger, under the same
advisory lock the console's writer takes (audit/services.py, key 0x41756469), requires of each new
row:

- `seq` = the head's seq + 1 (1 on an empty trail) and `prev_hash` = the head's hash (64 zeros on
  an empty trail);
- hash scheme 2, with `payload` equal to `payload_text` read as jsonb;
- `hash` = SHA-256 of the RFC 8785 text of the event (audit/chain.py `event_hash_jcs`), rebuilt here
  from the row: every member is a string or an integer, and PostgreSQL's JSON string escaping
  (`to_json(text)`) is the one RFC 8785 prescribes (\b \t \n \f \r \" \\, other characters below
  U+0020 as lowercase \u00xx, everything else as itself), with the keys in RFC 8785's order.

A row of an earlier statement of the same INSERT is visible to the next row's trigger, so a batch
chains as one. The SQL is frozen here; the hash it rebuilds must never change (a new scheme gets a
new migration).
"""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION audit_require_chained_append() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head_seq bigint;
    head_hash text;
    document text;
BEGIN
    PERFORM pg_advisory_xact_lock(1098212457);  -- 0x41756469, the writer's lock
    SELECT seq, hash INTO head_seq, head_hash FROM audit_auditevent ORDER BY seq DESC LIMIT 1;
    IF head_seq IS NULL THEN
        head_seq := 0;
        head_hash := repeat('0', 64);
    END IF;
    IF NEW.seq IS DISTINCT FROM head_seq + 1 OR NEW.prev_hash IS DISTINCT FROM head_hash THEN
        RAISE EXCEPTION 'audit event % does not chain onto the head (seq %, hash %)', NEW.seq, head_seq, head_hash
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.hash_scheme IS DISTINCT FROM 2 OR NEW.payload_text IS NULL
       OR NEW.payload IS DISTINCT FROM NEW.payload_text::jsonb THEN
        RAISE EXCEPTION 'audit event % must carry hash scheme 2 and a payload equal to its canonical text', NEW.seq
            USING ERRCODE = 'check_violation';
    END IF;
    document := '{"action":' || to_json(NEW.action)::text
        || ',"actor":' || to_json(NEW.actor)::text
        || ',"at":' || to_json(to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '+00:00')::text
        || ',"object_id":' || to_json(NEW.object_id)::text
        || ',"object_type":' || to_json(NEW.object_type)::text
        || ',"payload":' || to_json(NEW.payload_text)::text
        || ',"prev_hash":' || to_json(NEW.prev_hash)::text
        || ',"route":' || to_json(NEW.route)::text
        || ',"scheme":2'
        || ',"seq":' || NEW.seq::text
        || '}';
    IF NEW.hash IS DISTINCT FROM encode(sha256(convert_to(document, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'audit event % carries a hash that is not the hash of its content', NEW.seq
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER audit_event_chains_onto_the_head
    BEFORE INSERT ON audit_auditevent
    FOR EACH ROW EXECUTE FUNCTION audit_require_chained_append();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS audit_event_chains_onto_the_head ON audit_auditevent;
DROP FUNCTION IF EXISTS audit_require_chained_append();
"""


class Migration(migrations.Migration):
    dependencies = [("audit", "0008_chain_breaks")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
