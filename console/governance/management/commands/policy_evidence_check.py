"""Derive policy versions' evidence again from their `as_of` and say whether it still matches."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from console.governance.evidence import evidence_check
from console.governance.models import PolicyVersion

SHOWN_DIFFERENCES = 20


class Command(BaseCommand):
    help = (
        "Compute the stored evidence of policy versions again from their as_of and compare SHA-256s; name the "
        "figures and labels that differ. Exits with status 1 when any version's evidence differs."
    )

    def add_arguments(self, parser):
        parser.add_argument("id", nargs="?", type=int, help="A policy version's id (as --policy).")
        parser.add_argument("--policy", type=int, help="A policy version's id.")
        parser.add_argument("--route", help="Every version of this route, newest first.")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="One JSON document per version, one per line."
        )

    def handle(self, *args, id, policy, route, as_json: bool, **options):
        wanted = policy or id
        if (wanted is None) == (route is None):
            raise CommandError("Name one policy version (ID or --policy ID) or one route (--route SLUG).")
        versions = PolicyVersion.objects.select_related("route")
        if wanted is not None:
            versions = versions.filter(pk=wanted)
        else:
            versions = versions.filter(route__slug=route).order_by("-version")
        versions = list(versions)
        if not versions:
            raise CommandError(f"No policy version {wanted}." if wanted is not None else f"No versions on {route!r}.")
        differing = 0
        for version in versions:
            result = evidence_check(version)
            differing += result["matches"] is False
            if as_json:
                self.stdout.write(_json(result))
            else:
                self._describe(version, result)
        if differing:
            raise CommandError(
                f"{differing} of {len(versions)} versions' evidence differs from what its as_of gives now."
            )

    def _describe(self, version: PolicyVersion, result: dict) -> None:
        name = f"{version.route.slug} v{version.version} ({version.status})"
        if result["matches"] is None:
            self.stdout.write(f"{name}: not checked, {result['reason']}.")
            return
        if result["matches"]:
            self.stdout.write(f"{name} as of {result['as_of']}: matches ({result['evidence_sha256']}).")
            return
        self.stdout.write(
            f"{name} as of {result['as_of']}: DIFFERS, stored {result['evidence_sha256']}, "
            f"now {result['recomputed_sha256']}; {result['differences_total']} figures differ:"
        )
        for difference in result["differences"][:SHOWN_DIFFERENCES]:
            self.stdout.write(f"  {difference['path']}: stored {difference['stored']!r}, now {difference['now']!r}")
        for label in result["labels_changed_since"]:
            self.stdout.write(
                f"  label of decision {label['decision_id']} written again after as_of: now {label['verdict_now']} "
                f"({label['method']})"
            )


def _json(result: dict) -> str:
    return json.dumps(result, sort_keys=True)
