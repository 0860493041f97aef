from django.core.management.base import BaseCommand, CommandError

from audit.selectors import audit_chain_verify


class Command(BaseCommand):
    help = "Recompute the audit hash chain; exit non-zero and name the first broken link if any."

    def handle(self, *args, **options):
        result = audit_chain_verify()
        if result["ok"]:
            self.stdout.write(f"ok: {result['events']} events, head {result['head']}")
            return
        raise CommandError(f"broken at seq {result['first_bad_seq']}: {result['reason']}")
