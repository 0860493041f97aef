from django.core.management.base import BaseCommand, CommandError

from audit.selectors import audit_chain_verify


class Command(BaseCommand):
    help = (
        "Recompute the audit hash chain and check it against every signed checkpoint; exit non-zero "
        "and name the first broken link, rewritten range or truncated tail if any."
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
        where = f"broken at seq {result['first_bad_seq']}" if result["first_bad_seq"] else "checkpoint log"
        raise CommandError(f"{where}: {result['reason']}")
