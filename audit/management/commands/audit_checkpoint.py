from django.core.management.base import BaseCommand, CommandError

from audit.services import audit_checkpoint_create
from console.core.errors import Conflict


class Command(BaseCommand):
    help = (
        "Sign the audit chain's head with the checkpoint key and append it to the checkpoint log "
        "(AUDIT_CHECKPOINT_LOG); exit non-zero, signing nothing, if the chain is broken."
    )

    def handle(self, *args, **options):
        try:
            result = audit_checkpoint_create()
        except Conflict as exc:
            raise CommandError(exc.message) from None
        if result["signed"]:
            webhook = " (posted to the webhook)" if result["webhook"] else ""
            self.stdout.write(f"signed seq {result['seq']}, hash {result['hash']}{webhook}")
        else:
            self.stdout.write(f"nothing signed: {result['reason']}")
