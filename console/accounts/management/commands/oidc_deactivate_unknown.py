from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from audit.services import Actor
from console.accounts.identity.services import identities_deactivate


class Command(BaseCommand):
    help = (
        "Deactivate the people who signed in through the identity provider and whom it no longer knows: "
        "those missing from --known (the subjects the provider's directory lists, one a line) and/or those "
        "not seen at a sign-in for --not-seen-days. Each is audited as user_deactivated; their sessions end."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--known", type=Path, help="File of the subjects (sub claims) the provider knows, one a line."
        )
        parser.add_argument("--not-seen-days", type=int, help="Deactivate people not signed in for this many days.")
        parser.add_argument("--issuer", help="The provider's issuer; default OIDC_ISSUER.")

    def handle(self, *args, known=None, not_seen_days=None, issuer=None, **options):
        issuer = issuer or settings.OIDC_ISSUER
        if not issuer:
            raise CommandError("No provider: set OIDC_ISSUER or give --issuer.")
        if known is None and not_seen_days is None:
            raise CommandError("Give --known FILE, --not-seen-days N, or both.")
        if not_seen_days is not None and not_seen_days < 1:
            raise CommandError("--not-seen-days must be at least 1.")
        subjects = None
        if known is not None:
            try:
                subjects = {line.strip() for line in known.read_text().splitlines() if line.strip()}
            except OSError as exc:
                raise CommandError(f"Cannot read {known}: {exc}") from None
            if not subjects:
                # An empty export is far likelier a failed export than a provider that knows nobody.
                raise CommandError(f"{known} lists no subject; refusing to deactivate everyone.")
        names = identities_deactivate(
            actor=Actor.system("oidc_deactivate_unknown"),
            issuer=issuer,
            known_subjects=subjects,
            not_seen_days=not_seen_days,
        )
        for name in names:
            self.stdout.write(f"deactivated {name}")
        self.stdout.write(f"{len(names)} deactivated")
