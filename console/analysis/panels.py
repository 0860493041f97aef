"""What each region of the operating-points page shows (reads only; the view picks the regions).

The page is one view. A full load renders every region of the open tab; an htmx request renders
only the region it targets (``HX-Target``), so each form on the page recomputes just its panel.
Every region reads the same stored documents as the API (`console.analysis.reports`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.http import Http404, QueryDict
from django.urls import reverse
from django.utils.safestring import mark_safe

from console.accounts.models import Route
from console.analysis import charts, reports, selectors
from console.analysis.forms import BandForm, CalibrationForm, CertifyForm, CostForm, PlannerForm, SettingsForm
from console.analysis.hooks import side_panels
from console.analysis.params import (
    FILTER_PREFIXES,
    CalibrationQuery,
    CertifiedCutoffQuery,
    OperatingPointsQuery,
    parse_operating_points,
)
from console.analysis.reports import CHART_CUTOFFS, CHART_POINTS
from console.core.errors import detail
from console.ledger.selectors import answer_settings, stats_routes
from console.stats.intervals import Interval
from console.stats.long_answers import long_cost_threshold
from console.stats.operating_points import OperatingPointRow
from console.stats.planning import grades_for_interval_half_width, grades_to_separate_cutoffs
from console.stats.policy_math import (
    ExchangeRateBisection,
    citation_adjusted_cost,
    cost_threshold,
    question_text,
    recommended_row,
)
from grading.blindness import route_blindness

PAGE_PARAMETERS = (
    "route",
    "tab",
    "answers",
    "segment",
    "c_w",
    "c_a",
    "q",
    "c_v",
    "band_lower",
    "band_cutoff",
    "alpha",
    "delta",
    "half_width",
    "compare",
    "bins",
    "by",
    "grid",
)
TABS = ("decide", "calibration")
INTERVAL_LABELS = {
    "wilson": "Wilson",
    "clopper_pearson": "Clopper–Pearson",
    "jeffreys": "Jeffreys",
    "agresti_coull": "Agresti–Coull",
}


class NoRoutes(Exception):
    """The user may read decisions but no route exists yet."""


@dataclass
class Page:
    """The page's state as read from the query string."""

    route: Route
    routes: list[Route]
    query: OperatingPointsQuery
    params: QueryDict
    errors: list[dict[str, str]]
    tab: str
    answers: str
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The page with every parameter in force, for the address bar and shared links."""
        return f"{reverse('operating-points')}?{self.params.urlencode()}"

    def tab_url(self, tab: str) -> str:
        query = self.params.copy()
        query["tab"] = tab
        return f"{reverse('operating-points')}?{query.urlencode()}"

    @property
    def restart_url(self) -> str:
        """The page with the exchange-rate answers cleared."""
        query = self.params.copy()
        query.pop("answers", None)
        return f"{reverse('operating-points')}?{query.urlencode()}"

    @property
    def tab_links(self) -> dict[str, str]:
        return {tab: self.tab_url(tab) for tab in TABS}

    def once(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]


def _clean(params: QueryDict) -> QueryDict:
    """Drop empty fields (an empty filter box means no filter) and turn the page's
    ``segment=key=value[,key=value...]`` box into the API's ``segment.key=value``."""
    cleaned = QueryDict(mutable=True)
    for name, values in params.lists():
        kept = [v for v in values if v.strip()]
        if name == "segment":
            for pair in (pair for value in kept for pair in value.split(",") if pair.strip()):
                key, _, segment_value = pair.partition("=")
                cleaned.appendlist(f"segment.{key.strip()}", segment_value.strip())
        elif kept:
            cleaned.setlist(name, kept)
    return cleaned


SETTINGS = ("route", "from", "to", "confidence", "interval", "segment")


def page_params(request) -> QueryDict:
    """The page's state: the query string of the page as the browser shows it (``HX-Current-URL``)
    with the submitted form's own fields on top. Region forms therefore send only their own
    fields and never carry a stale copy of the rest; the response pushes the merged URL back.
    The settings form (``settings=1``) replaces the route, window and interval method."""
    params = request.GET
    current = request.htmx.current_url if request.htmx else None
    if not current or urlsplit(current).path != request.path:
        return params
    merged = QueryDict(urlsplit(current).query, mutable=True)
    if "settings" in params:
        for name in list(merged):
            if name in SETTINGS or name.startswith(FILTER_PREFIXES):
                del merged[name]
    for name in params:
        merged.setlist(name, params.getlist(name))
    merged.pop("settings", None)
    return merged


def read_page(user, params: QueryDict) -> Page:
    """The route (the first readable one unless ``route`` names another; 404 if it is not
    readable) and the table's parameters; bad parameters become messages, not errors."""
    routes = list(stats_routes(user))
    if not routes:
        raise NoRoutes
    slug = params.get("route") or routes[0].slug
    route = next((r for r in routes if r.slug == slug), None)
    if route is None:
        raise Http404("No such route, or not one you may read.")
    cleaned = _clean(params)
    query, errors = parse_operating_points(cleaned, also_allowed=PAGE_PARAMETERS)
    answers = cleaned.get("answers", "")
    if not all(a in "yn" for a in answers) or len(answers) > ExchangeRateBisection().max_answers:
        errors.append(
            detail("answers", "invalid_parameter", "answers must be a short string of y and n.", parameter="answers")
        )
        answers = ""
    tab = cleaned.get("tab", TABS[0])
    return Page(
        route=route,
        routes=routes,
        query=query,
        params=cleaned,
        errors=errors,
        tab=tab if tab in TABS else TABS[0],
        answers=answers,
    )


# --------------------------------------------------------------------------- the table


def _interval(cell: dict[str, Any] | None, *, unbounded: bool = False) -> Interval | None:
    if cell is None:
        return None
    missing = math.inf if unbounded else math.nan

    def number(key: str) -> float:
        return missing if cell[key] is None else float(cell[key])

    return Interval(number("value"), number("low"), number("high"))


def row_from_document(row: dict[str, Any]) -> OperatingPointRow:
    """An API row back as an `OperatingPointRow` (nulls inside an exchange rate are unbounded)."""
    return OperatingPointRow(
        cutoff=row["cutoff"],
        refused=row["refused"],
        served=row["served"],
        abstention_rate=_interval(row["abstention_rate"]),
        false_abstention_rate=_interval(row["false_abstention_rate"]),
        graded_refused=row["graded_refused"],
        graded_served=row["graded_served"],
        correct_withheld_per_1000=_interval(row["correct_withheld_per_1000"]),
        wrong_served_per_1000=_interval(row["wrong_served_per_1000"]),
        exchange_rate=_interval(row["exchange_rate"], unbounded=True),
        band=None,
    )


def _table_document(page: Page) -> dict[str, Any]:
    curve = tuple(sorted(set(CHART_CUTOFFS) | set(page.query.cutoffs)))
    return page.once("table", lambda: reports.operating_points_report(page.route, page.query, curve=curve).data)


def _bisection(page: Page) -> ExchangeRateBisection:
    return ExchangeRateBisection.replay([a == "y" for a in page.answers])


def _recommended_cutoff(page: Page, rows: list[dict[str, Any]]) -> tuple[bool, float | None]:
    """(whether the questions are answered, the cutoff r* picks; None for the no-gate row)."""
    state = _bisection(page)
    if not state.done or not rows:
        return False, None
    return True, recommended_row([row_from_document(r) for r in rows], state.r_star).cutoff


# What a "Propose as policy" link carries to the governance draft form besides the cutoff, the
# cost calculator's values and the band (which are carried only when chosen and valid).
PROPOSAL_PARAMETERS = ("from", "to", "confidence", "interval", "answers")


@dataclass(frozen=True)
class Proposal:
    """One "Propose as policy" link of the page: its element id (stable across renders, so a region
    swapped later can replace it out of band), where it leads, its text and its CSS classes."""

    id: str
    url: str
    text: str = "Propose as policy"
    css: str = "propose"


def chosen_costs(page: Page) -> dict[str, float]:
    """The cost calculator's values the user set (named in the page's parameters), when the calculator
    accepts them together; nothing when it does not (its panel then says why and shows the defaults)."""
    named = [name for name in CostForm.base_fields if name in page.params]
    form = CostForm(page.params)
    if not named or not form.is_valid():
        return {}
    return {name: form.cleaned_data[name] for name in named if form.cleaned_data[name] is not None}


def chosen_band_lower(page: Page) -> float | None:
    """The band simulator's lower edge when the user set one and the simulator accepts it."""
    form = BandForm(page.params)
    return form.cleaned_data["band_lower"] if "band_lower" in page.params and form.is_valid() else None


def propose_url(page: Page, cutoff: float, *, band_lower: float | None = None, **extra: Any) -> str:
    """The draft form of the route's policy, prefilled with this cutoff, the page's filters, the
    exchange-rate answers, the cost calculator's values and the band when it sits below the cutoff
    (`band_lower`, else the simulator's lower edge)."""
    query = QueryDict(mutable=True)
    query["cutoff"] = f"{cutoff:g}"
    for name, values in page.params.lists():
        if name in PROPOSAL_PARAMETERS or name.startswith(FILTER_PREFIXES):
            query.setlist(name, values)
    for name, value in chosen_costs(page).items():
        query[name] = f"{value:g}"
    if band_lower is None:
        band_lower = chosen_band_lower(page)
    if band_lower is not None and band_lower < cutoff:
        query["band_lower"] = f"{band_lower:g}"
    for name, value in extra.items():
        query[name] = f"{value:g}"
    return f"{reverse('policy-draft', args=[page.route.slug])}?{query.urlencode()}"


def _row_proposals(page: Page, rows: list[dict[str, Any]]) -> list[Proposal | None]:
    """Each table row's link, by its position (the no-gate row has no cutoff to propose)."""
    return [
        Proposal(f"propose-row-{position}", propose_url(page, row["cutoff"])) if row["cutoff"] is not None else None
        for position, row in enumerate(rows)
    ]


def _recommended_proposal(page: Page, rows: list[dict[str, Any]]) -> Proposal | None:
    answered, recommended = _recommended_cutoff(page, rows)
    if not answered or recommended is None:
        return None
    url = propose_url(page, recommended, exchange_rate=round(_bisection(page).r_star, 3))
    return Proposal("propose-recommended", url, css="button propose")


def _certified_proposal(page: Page) -> Proposal | None:
    form = CertifyForm(page.params)
    values = form.values()
    query = CertifiedCutoffQuery(
        window=page.query.window, alpha=values["alpha"], delta=values["delta"], grid=values["grid"]
    )
    certification = page.once("certified", lambda: reports.certified_cutoff_report(page.route, query).data)
    if not certification["certified"]:
        return None
    url = propose_url(page, certification["cutoff"], alpha=values["alpha"], delta=values["delta"])
    return Proposal("propose-certified", url, "Propose the certified cutoff as policy", "button propose")


def _band_proposal(page: Page) -> Proposal | None:
    """The band simulator's own link: its cutoff with its lower edge, when the simulator accepts them."""
    form = BandForm(page.params)
    if not form.is_valid():
        return None
    lower, cutoff = form.cleaned_data["band_lower"], form.cleaned_data["band_cutoff"]
    url = propose_url(page, cutoff, band_lower=lower)
    return Proposal("propose-band", url, "Propose this band as policy", "button propose")


def proposals_panel(page: Page, *, inside: str) -> dict[str, Any]:
    """Every "Propose as policy" link outside the region `inside`, to be swapped in out of band.

    The band simulator and the cost calculator each swap only their own region, while the links
    that carry their values sit in other regions (the table, the recommendation, the certified
    cutoff). Their responses therefore bring those links again, built from the page's parameters
    with the values just chosen; no script on the page has to copy anything."""
    rows = _table_document(page)["rows"]
    links = [*_row_proposals(page, rows), _recommended_proposal(page, rows), _certified_proposal(page)]
    if inside != "band":
        links.append(_band_proposal(page))
    return {"oob_proposals": [link for link in links if link is not None]}


def table_panel(page: Page) -> dict[str, Any]:
    document = _table_document(page)
    rows = document["rows"]
    answered, recommended = _recommended_cutoff(page, rows)
    # Each row with its "Propose as policy" link (the no-gate row has no cutoff to propose).
    rows = [row | {"proposal": proposal} for row, proposal in zip(rows, _row_proposals(page, rows), strict=True)]
    chart = charts.tradeoff_chart(
        document.get("curve", []), marked=page.query.cutoffs, recommended=recommended if answered else None
    )
    return {
        "table": document,
        "rows": rows,
        "answered": answered,
        "recommended": recommended,
        "chart": mark_safe(chart),  # noqa: S308 -- built from numbers; every text in it is escaped
        "cutoffs_text": ", ".join(f"{c:g}" for c in page.query.cutoffs),
        "interval_label": INTERVAL_LABELS[document["interval"]],
        "csv_query": page.params.urlencode(),
        # Graders who can tell refused items from served ones bias the false-abstention rate: say so here.
        "blindness": page.once("blindness", lambda: route_blindness(page.route)),
    }


# --------------------------------------------------------------------------- the other panels


def bisection_panel(page: Page) -> dict[str, Any]:
    state = _bisection(page)
    asked = [{"rate": rate, "accepted": accepted, "text": question_text(rate)} for rate, accepted in state.answers]
    context: dict[str, Any] = {"asked": asked, "done": state.done, "answers": page.answers}
    if state.done:
        lower, upper = state.bracket
        context |= {"r_star": state.r_star, "lower": lower, "upper": upper} | table_panel(page)
        context["recommended_proposal"] = _recommended_proposal(page, context["rows"])
    else:
        context |= {
            "question": question_text(state.next_question),
            "rate": state.next_question,
            "number": len(state.answers) + 1,
            "total": state.max_answers,
        }
    return context


def cost_panel(page: Page) -> dict[str, Any]:
    form = CostForm(page.params)
    values = form.values()
    tau = cost_threshold(values["c_w"], values["c_a"])
    context: dict[str, Any] = {"cost_form": form, "tau": tau, "c_w": values["c_w"], "c_a": values["c_a"]}
    if values.get("q") is not None and values.get("c_v") is not None:
        adjusted = citation_adjusted_cost(values["c_w"], values["c_v"], values["q"])
        context |= {
            "c_w_adjusted": adjusted,
            "tau_adjusted": cost_threshold(adjusted, values["c_a"]),
            "q": values["q"],
            "c_v": values["c_v"],
        }
    context["long_thresholds"] = _long_thresholds(page, values["c_w"], values["c_a"])
    calibration = _calibration_document(page, CalibrationQuery(window=page.query.window))
    if calibration is not None:
        context["clearing_bins"] = [
            b for b in calibration["bins"] if b["accuracy"] is not None and b["accuracy"] >= tau
        ]
        context["clearing_adjusted"] = [
            b
            for b in calibration["bins"]
            if b["accuracy"] is not None and b["accuracy"] >= context.get("tau_adjusted", math.inf)
        ]
    return context


def _long_thresholds(page: Page, c_w: float, c_a: float) -> list[dict[str, Any]] | None:
    """For a long route, what the same tau is read against under each harm model (docs/statistics.md,
    "Long answers"), the route's own model first; None for a short route."""
    settings = answer_settings(page.route)
    if not settings.is_long:
        return None
    models = [settings.harm_model] + [m for m in ("proportional", "all_or_nothing") if m != settings.harm_model]
    return [
        long_cost_threshold(c_w, c_a, harm_model=model, claims=settings.expected_claims).as_dict()
        | {"is_route": model == settings.harm_model, "support_threshold": settings.support_threshold}
        for model in models
    ]


def band_panel(page: Page) -> dict[str, Any]:
    form = BandForm(page.params)
    values = form.values()
    band = reports.band_report(
        page.route, page.query, band_lower=values["band_lower"], cutoff=values["band_cutoff"]
    ).data
    return {
        "band_form": form,
        "band": band,
        "band_segments": band.get("segments", []),
        "band_proposal": _band_proposal(page),
    }


def certified_panel(page: Page) -> dict[str, Any]:
    form = CertifyForm(page.params)
    values = form.values()
    query = CertifiedCutoffQuery(
        window=page.query.window, alpha=values["alpha"], delta=values["delta"], grid=values["grid"]
    )
    certification = page.once("certified", lambda: reports.certified_cutoff_report(page.route, query).data)
    return {"certify_form": form, "certification": certification, "certified_proposal": _certified_proposal(page)}


def planner_panel(page: Page) -> dict[str, Any]:
    document = _table_document(page)
    rows = document["rows"][1:]
    pairs = [(a["cutoff"], b["cutoff"]) for a, b in zip(rows, rows[1:], strict=False)]
    form = PlannerForm(page.params, pairs=pairs)
    values = form.values()
    confidence = page.query.confidence
    half_width = values["half_width"]
    reading = []
    for row in rows:
        far = row["false_abstention_rate"]
        p = far["value"] if far and far["value"] is not None else 0.5
        have = row["graded_refused"]
        reading.append(
            {
                "cutoff": row["cutoff"],
                "p": p,
                "assumed": far is None or far["value"] is None,
                "have": have,
                # Both read the interval the table shows (its method, weights included), never a Wald
                # figure that collapses to 0 when every graded item agrees.
                "needed": grades_for_interval_half_width(
                    p, half_width, method=document["interval"], confidence=confidence
                ),
                "now": _interval(far).half_width if have and far and far["value"] is not None else None,
            }
        )
    context: dict[str, Any] = {
        "planner_form": form,
        "reading": reading,
        "half_width": half_width,
        "confidence": confidence,
        "interval_label": INTERVAL_LABELS.get(document["interval"], document["interval"]),
    }
    chosen = (form.cleaned_data.get("compare") if form.is_valid() else None) or form.data.get("compare")
    pair = next(((a, b) for a, b in pairs if f"{a:g}-{b:g}" == chosen), None)
    if pair:
        context["separation"] = _separation(rows, pair)
    return context


def _separation(rows: list[dict[str, Any]], pair: tuple[float, float]) -> dict[str, Any]:
    lower = next(r for r in rows if r["cutoff"] == pair[0])
    upper = next(r for r in rows if r["cutoff"] == pair[1])
    band = upper["band"]
    far = lower["false_abstention_rate"]
    result: dict[str, Any] = {
        "lower": pair[0],
        "upper": pair[1],
        "have_below": lower["graded_refused"],
        "have_band": band["graded"] if band else 0,
    }
    if not far or far["value"] is None or not band or not band["graded"]:
        result["missing"] = "Grade some items below the lower cutoff and in the band first."
        return result
    p_below, p_band = far["value"], band["correct"] / band["graded"]
    refused_below, refused_band = lower["refused"], upper["refused"] - lower["refused"]
    result |= {"p_below": p_below, "p_band": p_band}
    if p_below == p_band or not refused_below or not refused_band:
        result["missing"] = "The two shares are equal so far; no sample size separates them."
        return result
    plan = grades_to_separate_cutoffs(p_below=p_below, p_band=p_band, band_to_below_ratio=refused_band / refused_below)
    return result | {"plan": plan}


def _calibration_document(page: Page, query: CalibrationQuery) -> dict[str, Any] | None:
    from console.core.errors import InvalidInput

    def compute() -> dict[str, Any] | None:
        try:
            return reports.calibration_report_for(page.route, query).data
        except InvalidInput:
            return None

    return page.once(f"calibration:{query.cache_params()}", compute)


def calibration_panel(page: Page) -> dict[str, Any]:
    form = CalibrationForm(page.params)
    values = form.values()
    query = CalibrationQuery(
        window=page.query.window, bins=values["bins"], by=values["by"] or None, points=CHART_POINTS
    )
    document = _calibration_document(page, query)
    if document is None:
        return {"calibration_form": form, "calibration": None}
    return {
        "calibration_form": form,
        "calibration": document,
        "reliability_chart": mark_safe(charts.reliability_diagram(document["bins"])),  # noqa: S308
        "risk_chart": mark_safe(charts.risk_coverage_chart(document["risk_coverage"], document["aurc"])),  # noqa: S308
    }


# --------------------------------------------------------------------------- side panels of upper apps


def side_panels_panel(page: Page) -> dict[str, Any]:
    cutoffs = sorted(c for c in page.query.cutoffs if c is not None)
    return {"side_panels": side_panels(page.route, cutoffs)}


# --------------------------------------------------------------------------- regions


REGIONS: dict[str, tuple[str, tuple[Callable[[Page], dict[str, Any]], ...]]] = {
    "op-table": ("analysis/partials/operating_table.html", (table_panel, planner_panel)),
    "bisection": ("analysis/partials/exchange_rate_questions.html", (bisection_panel,)),
    "cost": ("analysis/partials/cost_calculator.html", (cost_panel,)),
    "band": ("analysis/partials/band_simulator.html", (band_panel,)),
    "certified": ("analysis/partials/certified_cutoff.html", (certified_panel,)),
    "planner": ("analysis/partials/sample_planner.html", (planner_panel,)),
}
TAB_PANELS = {
    "decide": (table_panel, bisection_panel, cost_panel, band_panel, certified_panel, planner_panel, side_panels_panel),
    "calibration": (calibration_panel,),
}
TAB_TEMPLATES = {"decide": "analysis/partials/decide_tab.html", "calibration": "analysis/partials/calibration_tab.html"}


def region(page: Page, target: str | None) -> tuple[str | None, dict[str, Any]]:
    """The partial for an htmx target (None: the whole page) and the context it needs."""
    if target in REGIONS:
        template, builders = REGIONS[target]
    elif target == "tab-body":
        template, builders = TAB_TEMPLATES[page.tab], TAB_PANELS[page.tab]
    elif target == "page":
        template, builders = "analysis/partials/page.html", TAB_PANELS[page.tab]
    else:
        template, builders = None, TAB_PANELS[page.tab]
    context: dict[str, Any] = {
        "page": page,
        "tab_template": TAB_TEMPLATES[page.tab],
        "errors_in_table": target == "op-table",
        "settings_form": SettingsForm(
            routes=page.routes, route=page.route, query=page.query, interval_labels=INTERVAL_LABELS
        ),
        # The last answer also re-renders the table, to highlight the row it picks.
        "oob_table": target == "bisection",
        # New cutoffs change the planner's rows and pairs too.
        "oob_planner": target == "op-table",
    }
    with selectors.shared_reads():
        for build in builders:
            context |= build(page)
        if target in ("band", "cost"):
            context |= proposals_panel(page, inside=target)
    return template, context
