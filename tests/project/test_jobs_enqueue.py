import pytest

from console.celery import app
from console.core import jobs
from console.core.jobs import enqueue


class RecordingTask:
    name = "tests.recording"

    def __init__(self, fail: bool = False):
        self.calls = []
        self.shown = []
        self.fail = fail

    def apply_async(self, args, kwargs, argsrepr=None, kwargsrepr=None):
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.calls.append((args, kwargs))
        self.shown.append((argsrepr, kwargsrepr))


@pytest.fixture
def broker_url():
    previous = app.conf.broker_url, app.conf.task_always_eager
    app.conf.task_always_eager = False

    def use(url):
        app.conf.broker_url = url

    yield use
    app.conf.broker_url, app.conf.task_always_eager = previous
    jobs.broker_recovered()


def test_a_job_is_queued_only_after_the_transaction_commits(
    db, broker_url, embedded_broker, django_capture_on_commit_callbacks
):
    broker_url(embedded_broker)
    task = RecordingTask()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(task, 1, 2)
        assert task.calls == []
    assert task.calls == [((1, 2), {})]


def test_a_missing_embedded_broker_skips_publishing_at_once(
    db, broker_url, tmp_path, django_capture_on_commit_callbacks
):
    broker_url(f"redis+socket://{tmp_path}/absent.sock")
    task = RecordingTask()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(task, 7)
    assert task.calls == []


def test_a_failing_publish_does_not_fail_the_request(
    db, broker_url, embedded_broker, django_capture_on_commit_callbacks
):
    broker_url(embedded_broker)
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(RecordingTask(fail=True), 7)  # logs and returns


def test_after_a_failed_publish_jobs_are_left_to_the_sweepers_for_a_while(
    db, broker_url, embedded_broker, django_capture_on_commit_callbacks
):
    broker_url(embedded_broker)
    later = RecordingTask()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(RecordingTask(fail=True), 1)
        enqueue(later, 2)
    assert later.calls == []
    jobs.broker_recovered()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(later, 3)
    assert later.calls == [((3,), {})]


def test_eager_mode_runs_jobs_even_after_a_failed_publish(
    db, broker_url, embedded_broker, django_capture_on_commit_callbacks
):
    broker_url(embedded_broker)
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(RecordingTask(fail=True), 1)
    app.conf.task_always_eager = True
    task = RecordingTask()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(task, 2)
    assert task.calls == [((2,), {})]


def test_a_job_of_many_ids_is_shown_by_its_first_ids_and_their_count(
    db, broker_url, embedded_broker, django_capture_on_commit_callbacks
):
    """Celery would summarise the arguments itself, walking a long list element by element on the
    request's thread; the job passes a short summary of its own, which still says what it holds."""
    broker_url(embedded_broker)
    task = RecordingTask()
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(task, list(range(1, 501)), route_id=7)
    assert task.calls == [((list(range(1, 501)),), {"route_id": 7})]  # the job gets every id
    [(shown_args, shown_kwargs)] = task.shown
    assert shown_args == "([1, 2, 3, 4, 5, 6, 7, 8, ... 500 in all],)"
    assert shown_kwargs == "{'route_id': 7}"
    with django_capture_on_commit_callbacks(execute=True):
        enqueue(task, [4, 5])
    assert task.shown[-1] == ("([4, 5],)", "{}")
