"""The inline SVG plots are pure functions: well-formed, readable, and faithful to the numbers."""

import xml.etree.ElementTree as ET

import pytest

from console.analysis.charts import nice_ticks, reliability_diagram, risk_coverage_chart, tradeoff_chart

SVG = "{http://www.w3.org/2000/svg}"


def cell(value, low, high):
    return {"value": value, "low": low, "high": high}


CURVE = [
    {"cutoff": 0.0, "correct_withheld_per_1000": cell(0, 0, 0), "wrong_served_per_1000": cell(290, 262, 320)},
    {"cutoff": 0.5, "correct_withheld_per_1000": cell(15, 10, 21), "wrong_served_per_1000": cell(216, 190, 240)},
    {"cutoff": 0.9, "correct_withheld_per_1000": cell(176, 150, 200), "wrong_served_per_1000": cell(51, 40, 64)},
    {"cutoff": 1.0, "correct_withheld_per_1000": None, "wrong_served_per_1000": cell(0, 0, 0)},
]


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title").text
    return root


def points(element: ET.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, pair.split(","))) for pair in element.get("points").split()]


def test_the_tradeoff_chart_draws_both_lines_with_bands_inside_the_canvas():
    root = parse(tradeoff_chart(CURVE, marked=[0.5, 0.9]))
    width, height = map(float, root.get("viewBox").split()[2:])
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 2 and len(root.findall(f"{SVG}polygon")) == 2
    for line in lines:
        assert all(0 <= x <= width and 0 <= y <= height for x, y in points(line))
    # The wrong-served line falls from left to right: its y (downwards in SVG) grows.
    wrong = next(line for line in lines if line.get("stroke") == "#b42318")
    ys = [y for _, y in points(wrong)]
    assert ys == sorted(ys)
    marked = [c for c in root.findall(f"{SVG}circle") if c.get("r") == "4"]
    assert len(marked) == 4  # two marked cutoffs on each line
    assert "cutoff 0.5: 216.0 wrong served" in root.find(f"{SVG}desc").text


def test_a_missing_estimate_is_left_out_of_its_line_not_drawn_as_zero():
    root = parse(tradeoff_chart(CURVE))
    withheld = next(line for line in root.findall(f"{SVG}polyline") if line.get("stroke") == "#2f5bd3")
    assert len(points(withheld)) == 3


def test_cutoffs_without_graded_data_break_the_line_instead_of_bridging_it():
    # As on a route graded only at the extremes: data at 0, 0.1 and 0.9, none in between.
    curve = [
        {"cutoff": 0.0, "wrong_served_per_1000": cell(300, 280, 320), "correct_withheld_per_1000": cell(0, 0, 0)},
        {"cutoff": 0.1, "wrong_served_per_1000": cell(290, 270, 310), "correct_withheld_per_1000": cell(5, 1, 9)},
        {"cutoff": 0.5, "wrong_served_per_1000": None, "correct_withheld_per_1000": None},
        {"cutoff": 0.7, "wrong_served_per_1000": None, "correct_withheld_per_1000": None},
        {"cutoff": 0.9, "wrong_served_per_1000": cell(20, 5, 40), "correct_withheld_per_1000": cell(596.7, 550, 640)},
    ]
    root = parse(tradeoff_chart(curve))
    plot_x = {}
    for line in root.findall(f"{SVG}polyline"):
        plot_x.setdefault(line.get("stroke"), []).append([x for x, _ in points(line)])
    # One two-point segment per series (0 to 0.1); nothing reaches across to 0.9.
    assert all(len(segments) == 1 and len(segments[0]) == 2 for segments in plot_x.values())
    # The lone estimate at 0.9 is still shown as a point, with its value on hover.
    titles = [c.find(f"{SVG}title").text for c in root.findall(f"{SVG}circle")]
    assert "cutoff 0.9: 596.7 (550.0–640.0) correct withheld per 1,000" in titles
    assert len(titles) == 6


def test_every_point_of_the_risk_coverage_curve_has_a_hover_value():
    root = parse(risk_coverage_chart([{"coverage": 0.5, "risk": 0.1}, {"coverage": 1.0, "risk": 0.2}], 0.1))
    titles = [c.find(f"{SVG}title").text for c in root.findall(f"{SVG}circle")]
    assert titles == ["coverage 50.0%: risk 10.0%", "coverage 100.0%: risk 20.0%"]


def test_the_recommended_cutoff_is_marked_and_labelled():
    svg = tradeoff_chart(CURVE, marked=[0.5], recommended=0.5)
    assert "recommended 0.5" in svg and 'stroke-dasharray="4 4"' in svg


def test_an_empty_table_still_draws_axes():
    root = parse(tradeoff_chart([]))
    assert root.find(f"{SVG}desc").text == "No graded data yet."


def test_the_reliability_diagram_has_one_bar_per_filled_bin_and_the_diagonal():
    bins = [
        {"low": 0.0, "high": 0.5, "count": 0, "mean_score": None, "accuracy": None},
        {"low": 0.5, "high": 1.0, "count": 40, "mean_score": 0.8, "accuracy": 0.75},
    ]
    root = parse(reliability_diagram(bins))
    assert len(root.findall(f"{SVG}rect")) == 1 and len(root.findall(f"{SVG}circle")) == 1
    assert "0.5–1: 75% correct of 40" in root.find(f"{SVG}desc").text


def test_the_risk_coverage_curve_is_a_step_function_ending_at_full_coverage():
    curve = [
        {"cutoff": 0.9, "coverage": 0.25, "risk": 0.0},
        {"cutoff": 0.5, "coverage": 0.5, "risk": 0.1},
        {"cutoff": 0.1, "coverage": 1.0, "risk": 0.3},
    ]
    root = parse(risk_coverage_chart(curve, aurc=0.175))
    line = points(root.find(f"{SVG}polyline"))
    assert len(line) == 6 and line[-1][0] == max(x for x, _ in line)
    assert all(a[1] == b[1] for a, b in zip(line[::2], line[1::2], strict=True))  # flat steps
    assert "AURC 0.1750" in ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize(
    "low, high, expected",
    [
        (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (0, 310, [0, 100, 200, 300]),
        (0, 0.07, [0, 0.02, 0.04, 0.06]),
    ],
)
def test_ticks_are_round_numbers(low, high, expected):
    assert nice_ticks(low, high) == pytest.approx(expected)
