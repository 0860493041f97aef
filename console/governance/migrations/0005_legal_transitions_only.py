r"""The database allows a policy version to move only along the legal transitions.

The first trigger (0002) froze a signed version's content but let its status take any value, and
left drafts open: as the app's role, an old superseded version could be swapped back to active, or
a draft made "signed by its owner" with a new cutoff in the same statement; the gateway was served
the forged cutoff with no audit event. Now, for every role:

- a new row is a draft, unsigned (the owner role may insert any row: restores, benchmarks);
- a draft may change only its evidence (a recompute), become `withdrawn` (status only), or become
  `active` with `signed_at` set and `signed_by` its owner, nothing else changing, and only through
  `governance_policy_sign()` or as the owner role: a plain UPDATE by the app's role is refused;
- `active` <-> `needs_recheck`, and either -> `superseded`, change the status only;
- `superseded` and `withdrawn` never change; a signed version is never deleted.

So the route's version in force (one `active` or `needs_recheck` row, a unique index) is reachable
only through a signature. `governance_policy_sign(policy, signer, signed_at)` runs as the table's
owner (SECURITY DEFINER): it signs a draft for its own owner and changes nothing else.
"""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION governance_refuse_signed_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    as_owner boolean := current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID);
    evidence text[] := ARRAY['evidence_text', 'evidence_sha256', 'warnings', 'evidence_as_of',
                             'evidence_decisions_seen', 'evidence_labels_seen', 'data_version'];
    changed jsonb;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT as_owner AND (NEW.status <> 'draft' OR NEW.signed_at IS NOT NULL OR NEW.signed_by_id IS NOT NULL) THEN
            RAISE EXCEPTION 'a policy version starts as an unsigned draft'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF OLD.signed_at IS NOT NULL THEN
            RAISE EXCEPTION 'policy version % is signed: DELETE refused', OLD.id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN OLD;
    END IF;
    IF OLD.status = NEW.status THEN
        IF OLD.status = 'draft' AND OLD.signed_at IS NULL AND NEW.signed_at IS NULL AND NEW.signed_by_id IS NULL
           AND (to_jsonb(OLD) - evidence) = (to_jsonb(NEW) - evidence) THEN
            RETURN NEW;  -- a draft's evidence recomputed
        END IF;
        IF to_jsonb(OLD) = to_jsonb(NEW) THEN
            RETURN NEW;  -- nothing changes
        END IF;
        IF OLD.signed_at IS NOT NULL THEN
            RAISE EXCEPTION 'policy version % is signed: only its status may change', OLD.id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RAISE EXCEPTION 'policy version % (%): only a draft''s evidence may change in place', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status = 'draft' AND NEW.status = 'active' THEN
        IF NOT as_owner THEN
            RAISE EXCEPTION 'policy version % may be signed only through governance_policy_sign()', OLD.id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NEW.signed_at IS NULL OR NEW.signed_by_id IS DISTINCT FROM NEW.owner_id
           OR (to_jsonb(OLD) - ARRAY['status', 'signed_at', 'signed_by_id'])
              IS DISTINCT FROM (to_jsonb(NEW) - ARRAY['status', 'signed_at', 'signed_by_id']) THEN
            RAISE EXCEPTION 'policy version % is signed by its owner with its content as drafted', OLD.id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END IF;
    IF (OLD.status, NEW.status) IN (('draft', 'withdrawn'), ('active', 'needs_recheck'), ('needs_recheck', 'active'),
                                    ('active', 'superseded'), ('needs_recheck', 'superseded')) THEN
        IF (to_jsonb(OLD) - 'status') IS DISTINCT FROM (to_jsonb(NEW) - 'status') THEN
            RAISE EXCEPTION 'policy version %: % -> % changes the status only (only its status may change)',
                OLD.id, OLD.status, NEW.status
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'policy version %: % -> % is not a legal transition', OLD.id, OLD.status, NEW.status
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
DROP TRIGGER IF EXISTS governance_policy_signed_immutable ON governance_policyversion;
CREATE TRIGGER governance_policy_signed_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON governance_policyversion
    FOR EACH ROW EXECUTE FUNCTION governance_refuse_signed_change();

CREATE OR REPLACE FUNCTION governance_policy_sign(p_policy bigint, p_signer bigint, p_signed_at timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    signed timestamptz;
BEGIN
    UPDATE governance_policyversion
       SET status = 'active', signed_at = p_signed_at, signed_by_id = p_signer
     WHERE id = p_policy AND status = 'draft' AND owner_id = p_signer AND p_signed_at IS NOT NULL
    RETURNING signed_at INTO signed;
    IF signed IS NULL THEN
        RAISE EXCEPTION 'policy version % is not a draft owned by user %', p_policy, p_signer
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN signed;
END;
$$;
"""

BACKWARD = r"""
DROP FUNCTION IF EXISTS governance_policy_sign(bigint, bigint, timestamptz);
DROP TRIGGER IF EXISTS governance_policy_signed_immutable ON governance_policyversion;
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


class Migration(migrations.Migration):
    dependencies = [("governance", "0004_route_on_the_ground_floor")]
    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
