"""The database refuses to change what was signed.

Once a policy version has `signed_at`, an UPDATE may change its `status` (active -> superseded,
active -> needs_recheck, ...) and nothing else: any other column that differs between the old and
the new row raises. DELETE of a signed version is refused too. A change of content is a new version.
"""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION governance_refuse_signed_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.signed_at IS NULL THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'policy version % is signed: DELETE refused', OLD.id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (to_jsonb(OLD) - 'status') IS DISTINCT FROM (to_jsonb(NEW) - 'status') THEN
        RAISE EXCEPTION 'policy version % is signed: only its status may change', OLD.id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER governance_policy_signed_immutable
    BEFORE UPDATE OR DELETE ON governance_policyversion
    FOR EACH ROW EXECUTE FUNCTION governance_refuse_signed_change();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS governance_policy_signed_immutable ON governance_policyversion;
DROP FUNCTION IF EXISTS governance_refuse_signed_change();
"""


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
