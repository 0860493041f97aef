"""Answering the analysis page's exchange-rate questions in a browser."""


def answer_exchange_rate_questions(page, answers) -> None:
    """Click each answer once the previous one is on the page: a click on a question still being
    replaced would answer the old question again (its buttons carry the answers so far)."""
    for given, answer in enumerate(answers, start=1):
        page.click(f"#bisection form.question button:has-text('{answer}')")
        page.wait_for_function("n => document.querySelectorAll('#bisection ol.answers li').length === n", arg=given)
