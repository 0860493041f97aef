from django.core.management.base import BaseCommand, CommandError

from audit.selectors import audit_chain_verify


class Command(BaseCommand):
    help = (
        "Recompute the audit hash chain and check it against every signed checkpoint; exit non-zero "
        "and name the first broken event (seq, action, which link and why, the expected and stored "
        "hash), rewritten range or truncated tail if any."
    )

    def handle(self, *args, **options):
        result = audit_chain_verify()
        checkpoints = result["checkpoints"]
        if result["ok"]:
            latest = f", latest at seq {checkpoints['latest_seq']}" if checkpoints["count"] else ""
            self.stdout.write(
                f"ok: {result['events']} events, head {result['head']}; {checkpoints['count']} checkpoints{latest}"
            )
            return
        raise CommandError(describe_break(result))


def describe_break(result: dict) -> str:
    """One paragraph naming the first bad event and what about it fails."""
    if not result["first_bad_seq"]:
        return f"checkpoint log: {result['reason']}"
    lines = [f"broken at seq {result['first_bad_seq']}: {result['reason']}"]
    if result.get("action"):
        lines.append(f"  action: {result['action']}")
    if result.get("link"):
        lines.append(f"  failing check: {result['link']}")
    if "expected_hash" in result:
        lines.append(f"  expected hash (scheme {result['hash_scheme']}): {result['expected_hash']}")
        lines.append(f"  stored hash:   {result['stored_hash']}")
    if "expected_prev_hash" in result:
        previous = result["first_bad_seq"] - 1
        lines.append(f"  expected prev_hash (the hash of seq {previous}): {result['expected_prev_hash']}")
        lines.append(f"  stored prev_hash:   {result['stored_prev_hash']}")
    return "\n".join(lines)
