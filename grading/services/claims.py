"""Long answers graded claim by claim: checking a grader's per-claim verdicts, the answer's verdict
they imply, where graders disagree, and the final label with its FinalClaimLabel rows.

The services that call these (grade_submit, label_adjudicate in labels.py) hold the item's row lock
and write the audit event; nothing here commits on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from console.core.errors import InvalidInput, detail
from grading.models import ClaimVerdict, FinalClaimLabel, FinalLabel, Grade, GradingItem, LabelMethod, Verdict


def claim_verdicts_checked(claims: Any, count: int, *, indices: Sequence[int] | None = None) -> list[str]:
    """The verdicts of `[{"index", "verdict"}]`, in index order, when they name every wanted claim
    exactly once (by default every claim 0..count-1; `indices` narrows it, as adjudication does);
    else InvalidInput (400) with one detail per problem."""
    wanted = list(range(count)) if indices is None else sorted(indices)
    if not isinstance(claims, list):
        raise InvalidInput(
            "claims must be a list of {index, verdict}.", details=[detail("claims", "invalid", "must be a list")]
        )
    problems, verdicts = [], {}
    for position, entry in enumerate(claims):
        index = entry.get("index") if isinstance(entry, dict) else None
        verdict = entry.get("verdict") if isinstance(entry, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index not in wanted:
            problems.append(
                detail(
                    "claims",
                    "unknown_claim",
                    f"index must be one of the claims to grade ({_span(wanted)})",
                    index=position,
                )
            )
        elif index in verdicts:
            problems.append(detail("claims", "duplicate_claim", f"claim {index} is graded twice", index=position))
        elif verdict not in ClaimVerdict.values:
            problems.append(
                detail(
                    "claims",
                    "invalid_verdict",
                    "verdict must be supported, unsupported or unverifiable",
                    index=position,
                )
            )
        else:
            verdicts[index] = verdict
    missing = [i for i in wanted if i not in verdicts]
    if missing and not problems:
        problems.append(detail("claims", "missing_claims", f"every claim needs a verdict; missing {_span(missing)}"))
    if problems:
        raise InvalidInput("Every claim needs exactly one verdict.", code="invalid_claims", details=problems)
    return [verdicts[i] for i in wanted]


def _span(indices: Sequence[int]) -> str:
    return ", ".join(str(i) for i in indices[:20]) + (", ..." if len(indices) > 20 else "") if indices else "none"


def answer_verdict(verdicts: Sequence[str]) -> str:
    """The verdict on the whole answer its claims imply, so answer-level statistics (agreement,
    accuracy on gold) read a long grade like a short one: correct when every verifiable claim is
    supported and there is one, incorrect when any is unsupported, unsure when none was verifiable."""
    supported, verifiable = claim_counts(verdicts)
    if verifiable == 0:
        return Verdict.UNSURE
    return Verdict.CORRECT if supported == verifiable else Verdict.INCORRECT


def claim_counts(verdicts: Sequence[str]) -> tuple[int, int]:
    """(k, n): supported claims, and verifiable ones (supported + unsupported)."""
    supported = sum(v == ClaimVerdict.SUPPORTED for v in verdicts)
    unsupported = sum(v == ClaimVerdict.UNSUPPORTED for v in verdicts)
    return supported, supported + unsupported


def grade_claim_verdicts(grade: Grade) -> list[str] | None:
    """The grade's claim verdicts in index order; None for a one-verdict grade (given before the
    route turned long). Reads `claim_grades` as prefetched."""
    rows = sorted(grade.claim_grades.all(), key=lambda row: row.index)
    return [row.verdict for row in rows] if rows else None


def disputed_claims(per_grade: Sequence[list[str] | None], count: int) -> list[int]:
    """Claim indices on which the graders did not all give the same verdict. A grade without claim
    verdicts (one given while the route was short) agrees on nothing: every claim goes to a reviewer."""
    if any(verdicts is None or len(verdicts) != count for verdicts in per_grade):
        return list(range(count))
    return [i for i in range(count) if len({verdicts[i] for verdicts in per_grade}) > 1]


def long_label_write(
    *,
    item: GradingItem,
    verdicts: Sequence[str],
    method: LabelMethod,
    decided_by=None,
    note: str = "",
) -> FinalLabel:
    """The final label of a long answer: its counts, `correct` when fully supported, and one
    FinalClaimLabel per claim."""
    supported, verifiable = claim_counts(verdicts)
    label = FinalLabel(
        decision_id=item.decision_id,
        item=item,
        correct=verifiable > 0 and supported == verifiable,
        method=method,
        decided_by=decided_by,
        note=note,
        claims_supported=supported,
        claims_verifiable=verifiable,
    )
    label.full_clean(exclude=["decision", "item", "decided_by"], validate_unique=False, validate_constraints=False)
    label.save()
    rows = [FinalClaimLabel(label=label, index=i, verdict=v) for i, v in enumerate(verdicts)]
    for row in rows:
        row.full_clean(exclude=["label"], validate_unique=False, validate_constraints=False)
    FinalClaimLabel.objects.bulk_create(rows)
    return label
