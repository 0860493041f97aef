"""Costs, the exchange-rate questions, and the row they pick (docs/statistics.md, "Choosing a cutoff").

Units: a correct answer is worth 1,
a wrong answer costs ``c_w`` and a refusal ``c_a``, both ``>= 0`` and in units of one correct
answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from console.stats.operating_points import OperatingPointRow


def _check_cost(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be finite and non-negative, got {value!r}")


def cost_threshold_problem(c_w: float, c_a: float) -> str | None:
    """Why the costs give no usable threshold, or None when ``tau`` lies strictly in (0, 1).

    With ``tau = (c_w - c_a) / (1 + c_w)`` and both costs finite and ``>= 0``: ``tau < 1``
    always holds (it needs ``c_a > -1``), and ``tau > 0`` exactly when ``c_w > c_a``. So the
    only ways out of (0, 1) are a negative or non-finite cost, and a refusal that costs as much
    as a wrong answer or more (``c_a >= c_w``): then answering is never worse than refusing,
    the threshold is 0 or negative, and there is no cutoff to choose. The message is meant to
    be shown to the owner beside the form field.
    """
    for name, value in (("c_w", c_w), ("c_a", c_a)):
        if not math.isfinite(value):
            return f"The cost {name} must be a finite number, got {value!r}."
        if value < 0:
            return f"The cost {name} must not be negative (got {value:g}); costs are in units of one correct answer."
    if c_a >= c_w:
        return (
            f"A refusal costs as much as a wrong answer or more (c_a = {c_a:g} >= c_w = {c_w:g}), so "
            f"answering always beats refusing and the threshold (c_w - c_a)/(1 + c_w) = "
            f"{(c_w - c_a) / (1.0 + c_w):.3g} is not in (0, 1). A gate only pays when a wrong answer "
            "costs more than a refusal: raise c_w or lower c_a."
        )
    return None


def validate_costs(c_w: float, c_a: float) -> None:
    """Raise ``ValueError`` with :func:`cost_threshold_problem`'s reason when ``tau`` would
    leave (0, 1)."""
    problem = cost_threshold_problem(c_w, c_a)
    if problem is not None:
        raise ValueError(problem)


def cost_threshold(c_w: float, c_a: float) -> float:
    """Probability of correctness above which answering beats refusing.

    Answering is worth ``p - (1 - p) c_w``, refusing ``-c_a``; they are equal at
    ``tau = (c_w - c_a) / (1 + c_w)`` (the cost-matrix argument of docs/statistics.md, "Cost
    threshold"). Answer when ``p >= tau`` (the console's tie policy). Worked figures:
    ``c_w = 2, c_a = 0.5`` gives 0.5; ``c_w = 200`` gives ``199.5/201 ~ 0.992537``.
    Costs that put ``tau`` outside (0, 1) (``c_a >= c_w``, or a negative cost) raise
    ``ValueError`` with the reason from :func:`cost_threshold_problem`: a threshold of 0 or
    below means "never refuse", which is not a cutoff anybody can sign.
    """
    validate_costs(c_w, c_a)
    return (c_w - c_a) / (1.0 + c_w)


def citation_adjusted_cost(c_w: float, c_v: float, q: float) -> float:
    """Effective wrong-answer cost when the answer carries a checkable citation.

    ``c_w' = (1 - q) c_w + q c_v`` (citations change the cost, not the confidence): with
    probability ``q`` (conditional on the answer being wrong) the reader's check catches the
    error and the cost is the replacement cost ``c_v``; otherwise the full ``c_w``. Worked figures:
    ``c_w = 20, q = 0.6, c_v = 0.2`` gives 8.12, moving the threshold (``c_a = 0.5``) from
    ``19.5/21 ~ 0.928571`` to ``7.62/9.12 ~ 0.835526``. A citation the user cannot open earns
    ``q = 0``.
    """
    _check_cost("c_w", c_w)
    _check_cost("c_v", c_v)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1], got {q!r}")
    return (1.0 - q) * c_w + q * c_v


def break_even_wrong_cost(p: float, c_a: float) -> float:
    """The wrong-answer cost at which a group answered with precision ``p`` breaks even:
    solve ``p = (c_w - c_a) / (1 + c_w)`` for ``c_w``, giving ``(p + c_a) / (1 - p)``.

    Worked figure: a pass group with precision ~0.944606 breaks even at ``c_w ~ 26.0789``.
    """
    _check_cost("c_a", c_a)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must lie in [0, 1), got {p!r}")
    return (p + c_a) / (1.0 - p)


def policy_value(*, correct_served: float, wrong_served: float, refused: float, c_w: float, c_a: float) -> float:
    """Net value of a policy over some traffic: ``correct - c_w wrong - c_a refused``.

    Worked traffic economics: at ``c_w = 20, c_a = 0.5`` answering 2,300 (2,208
    correct) and refusing 2,700 is worth -982; counts may be fractional expectations.
    """
    _check_cost("c_w", c_w)
    _check_cost("c_a", c_a)
    return correct_served - c_w * wrong_served - c_a * refused


def question_text(rate: float) -> str:
    """The exchange-rate question for one rate (the wording owners answer on the analysis page).

    "Extra refusals" are read as *correct answers newly refused*: the rate in the table's
    exchange-rate column is correct answers withheld per wrong answer removed.
    """
    return (
        f"Would you accept {rate:g} extra refusals of answers that would have been correct to remove one wrong answer?"
    )


def _round_inside(value: float, lower: float, upper: float) -> float | None:
    """``value`` rounded to the fewest significant figures (1 to 3) that stay strictly inside
    ``(lower, upper)``; None when the bracket is too narrow for a distinct question."""
    for digits in (1, 2, 3):
        rounded = float(f"{value:.{digits}g}")
        if lower < rounded < upper:
            return rounded
    return None


@dataclass(frozen=True)
class ExchangeRateBisection:
    """Geometric bisection over "would you accept N extra refusals to remove one wrong answer?"

    A pure, immutable state machine; store ``answers`` and rebuild with :meth:`replay`.

    The accepted rate ``r*`` is bracketed by ``[lower, upper)``, initially ``[1, 1000]``. "Yes"
    to ``N`` means the owner accepts moves costing up to ``N`` correct answers per wrong one
    removed, so ``r* >= N`` and ``N`` becomes the lower edge; "no" makes ``N`` the upper edge.
    The first question is 10 (owners asked this way have answered from about 3:1 for an
    internal support assistant to 40:1 for clinical protocol lookups); each later question is
    the geometric midpoint ``sqrt(lower * upper)`` of the bracket, rounded to one significant
    figure (two or three if needed to stay inside the bracket). This gives the sequence 10,
    100, 30: yes at 10 gives [10, 1000] and asks ``sqrt(10 * 1000) = 100``; no gives [10, 100] and asks ``31.6 -> 30``.

    The session ends after ``max_answers`` answers (default 5; then the bracket spans a factor
    of at most 1.43) or earlier when no distinct question fits; ``r_star`` is the geometric
    midpoint of the final bracket.

    Note: an owner who says yes to 10, no to 100 and no to 30 is sometimes reported as
    "settling at roughly 3:1", which these answers cannot produce (they place ``r*`` between 10 and 30); we
    follow the answers, not the anecdote.
    """

    lower: float = 1.0
    upper: float = 1000.0
    first_question: float = 10.0
    max_answers: int = 5
    answers: tuple[tuple[float, bool], ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.lower < self.first_question < self.upper:
            raise ValueError("need 0 < lower < first_question < upper")
        if self.max_answers < 1:
            raise ValueError("max_answers must be at least 1")

    @classmethod
    def replay(
        cls,
        accepted: Sequence[bool],
        *,
        lower: float = 1.0,
        upper: float = 1000.0,
        first_question: float = 10.0,
        max_answers: int = 5,
    ) -> ExchangeRateBisection:
        """Rebuild the state from the owner's yes/no answers, in order."""
        state = cls(lower, upper, first_question, max_answers)
        for answer in accepted:
            state = state.answer(answer)
        return state

    @property
    def bracket(self) -> tuple[float, float]:
        """Current ``(lower, upper)`` bracket for ``r*``."""
        lower, upper = self.lower, self.upper
        for rate, accepted in self.answers:
            if accepted:
                lower = rate
            else:
                upper = rate
        return lower, upper

    @property
    def next_question(self) -> float | None:
        """The next rate to ask about, or None when the session is over."""
        if len(self.answers) >= self.max_answers:
            return None
        if not self.answers:
            return self.first_question
        lower, upper = self.bracket
        return _round_inside(math.sqrt(lower * upper), lower, upper)

    @property
    def done(self) -> bool:
        return self.next_question is None

    @property
    def r_star(self) -> float | None:
        """Accepted exchange rate: the geometric midpoint of the final bracket, once done."""
        if not self.done:
            return None
        lower, upper = self.bracket
        return math.sqrt(lower * upper)

    def answer(self, accepted: bool) -> ExchangeRateBisection:
        """The state after answering the current question."""
        rate = self.next_question
        if rate is None:
            raise ValueError("the exchange-rate questions are already answered")
        return ExchangeRateBisection(
            lower=self.lower,
            upper=self.upper,
            first_question=self.first_question,
            max_answers=self.max_answers,
            answers=(*self.answers, (rate, bool(accepted))),
        )


def recommended_row(rows: Sequence[OperatingPointRow], r_star: float) -> OperatingPointRow:
    """The operating point an accepted exchange rate ``r*`` picks.

    The rule: "the last cutoff whose marginal exchange rate is <= r*". Rows are read in ascending
    cutoff order from the no-gate row, moving up while each step's exchange rate value is
    ``<= r*``, and the answer is the last row reached. When the exchange rate rises with the
    cutoff (it usually degrades monotonically) this is exactly that rule. When sampling
    noise breaks monotonicity, it does not jump over a step the owner would reject to reach a
    cheap-looking band further up. A row whose band has no graded item (exchange rate None)
    neither stops the walk nor is chosen on its own: it is passed only if a later step with a
    known rate is accepted. A band with no wrong item has an infinite rate and stops the walk.
    """
    if not (isinstance(r_star, int | float) and r_star > 0 and not math.isnan(r_star)):
        raise ValueError(f"r_star must be a positive number, got {r_star!r}")
    if not rows or rows[0].cutoff is not None:
        raise ValueError("rows must start with the no-gate row (cutoff None)")
    chosen = rows[0]
    for row in rows[1:]:
        if row.exchange_rate is None:
            continue
        if not row.exchange_rate.value <= r_star:
            break
        chosen = row
    return chosen
