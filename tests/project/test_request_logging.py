"""A refused request is logged as one warning line, never with a traceback."""

import logging

import pytest

from tests.factories import make_user


def _request_records(caplog) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "django.request"]


@pytest.mark.parametrize("path", ["/grading/adjudication/", "/refusals/", "/audit/"])
def test_a_403_page_is_logged_as_one_line_without_a_traceback(client, db, caplog, path):
    client.force_login(make_user("only-grades", "grader"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(path)
    assert response.status_code == 403
    assert "Not allowed" in response.content.decode()  # still the site's error page
    [record] = _request_records(caplog)
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage() == f"Forbidden: {path}"
    assert "Traceback" not in caplog.text


def test_a_403_from_the_api_is_logged_as_one_line(grader, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert grader.get("/api/v1/routes").status_code == 403
    [record] = _request_records(caplog)
    assert record.exc_info is None and record.getMessage() == "Forbidden: /api/v1/routes"
