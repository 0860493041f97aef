"""The database itself refuses to change or remove audit rows.

UPDATE and DELETE are refused always. TRUNCATE is refused too, except in a database whose name
starts with `test_`: the test runner empties tables between browser tests with TRUNCATE, and a
test database holds nothing to protect. Anyone who can disable triggers can still alter rows;
`audit_verify` then finds the first broken link (see tests/audit).
"""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' AND current_database() LIKE 'test\_%' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit events are append-only: % refused on %', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_event_no_update_delete
    BEFORE UPDATE OR DELETE ON audit_auditevent
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_event_no_truncate
    BEFORE TRUNCATE ON audit_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS audit_event_no_truncate ON audit_auditevent;
DROP TRIGGER IF EXISTS audit_event_no_update_delete ON audit_auditevent;
DROP FUNCTION IF EXISTS audit_refuse_change();
"""


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
