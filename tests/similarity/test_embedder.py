"""The built-in embedder: fitted per route, versioned, re-embedding in the background."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditEvent
from console.ledger.models import Decision
from console.similarity.models import EmbedderModel, EmbedderState, EmbedderVersion, QuestionVector, RouteEmbedding
from console.similarity.services import builtin
from tests import factories

pytestmark = pytest.mark.django_db

TOPICS = [
    "How do I reset my VPN password on the laptop",
    "Printer on floor three shows a paper jam error",
    "Request a new monitor for my desk",
    "Outlook calendar does not sync with my phone",
    "Wifi in the meeting room keeps dropping",
    "How to install the accounting software on a Mac",
]


def _questions(copies: int) -> list[str]:
    # Near-duplicates of each topic: the same wording with small changes, as people ask again.
    tails = ["", " please", " today?", " again", " urgently", " - help", " asap", " thanks"]
    return [f"{topic}{tails[i % len(tails)]}" for i in range(copies) for topic in TOPICS]


def _ingest(questions, route="it-support") -> list[int]:
    return factories.ingest([factories.record(route=route, question=q) for q in questions])


def test_a_route_without_vectors_gets_built_in_ones_and_near_duplicates_are_neighbours(reviewer):
    ids = _ingest(_questions(5))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=factories.make_route().pk)
    assert version.number == 1 and version.state == EmbedderState.BUILDING  # the object as created
    version.refresh_from_db()
    assert version.state == EmbedderState.CURRENT
    assert RouteEmbedding.objects.get().source == "builtin"
    assert QuestionVector.objects.filter(embedder=version).count() == len(ids)
    for position in range(len(TOPICS)):
        results = reviewer.get(f"/api/v1/decisions/{ids[position]}/similar?k=4").json()
        questions = [r["question"] for r in results["results"]]
        assert all(q.startswith(TOPICS[position]) for q in questions), questions
        assert results["vectors"] == {
            "source": "builtin",
            "dimension": 256,
            "embedder_version": 1,
            "decision_has_vector": True,
        }


def test_new_decisions_get_vectors_from_the_current_version_and_a_refit_reembeds_everything(route):
    first = _ingest(_questions(3))
    route_id = factories.make_route().pk
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    later = _ingest(["Laptop battery drains overnight", "Laptop battery drains overnight again"])
    assert builtin.vectors_embed(decision_ids=later) == 2
    assert set(QuestionVector.objects.filter(decision_id__in=later).values_list("embedder_id", flat=True)) == {v1.pk}
    v2 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    v1.refresh_from_db()
    v2.refresh_from_db()
    assert (v1.state, v2.state, v2.number) == (EmbedderState.RETIRED, EmbedderState.CURRENT, 2)
    # every decision has exactly one vector, made by version 2; version 1's are gone
    rows = list(QuestionVector.objects.values_list("decision_id", "embedder_id"))
    assert sorted(d for d, _ in rows) == sorted(first + later)
    assert {e for _, e in rows} == {v2.pk}
    actions = list(
        AuditEvent.objects.filter(action__in=["embedder_fitted", "embedder_promoted"]).values_list("action", flat=True)
    )
    assert actions == ["embedder_fitted", "embedder_promoted", "embedder_fitted", "embedder_promoted"]


def test_a_retired_version_keeps_its_history_but_not_its_model(route):
    _ingest(_questions(3))
    route_id = factories.make_route().pk
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    v2 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    v1.refresh_from_db()
    v2.refresh_from_db()
    assert (v1.state, v1.number, v1.fitted_on) == (EmbedderState.RETIRED, 1, v2.fitted_on)
    # Tens of megabytes on a real route, never loaded again: its partition is gone, nothing of it stays.
    assert list(EmbedderModel.objects.values_list("version_id", flat=True)) == [v2.pk]
    assert len(bytes(EmbedderModel.objects.get(version=v2).data)) > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT relid::text FROM pg_partition_tree('similarity_embeddermodel') WHERE isleaf")
        leaves = {name for (name,) in cursor.fetchall()}
    # Of this test's two versions (a test that committed may have left others' partitions behind).
    ours = {f"similarity_embeddermodel_v{v.pk}" for v in (v1, v2)}
    assert leaves & ours == {f"similarity_embeddermodel_v{v2.pk}"}


def test_a_route_fits_once_it_holds_enough_questions_after_ingest(route, settings, django_capture_on_commit_callbacks):
    settings.SIMILARITY_MIN_FIT_QUESTIONS = 12
    with django_capture_on_commit_callbacks(execute=True):
        _ingest(_questions(1))  # 6 questions: not enough yet
    assert not EmbedderVersion.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        ids = _ingest(_questions(2)[6:])
    version = EmbedderVersion.objects.get()
    assert version.state == EmbedderState.CURRENT
    assert QuestionVector.objects.filter(embedder=version).count() == 12
    assert QuestionVector.objects.filter(decision_id__in=ids).count() == 6


def test_a_fit_job_queued_behind_a_fit_that_caught_up_does_not_refit_the_route(route):
    from console.similarity import tasks

    # Every ingest batch of a due route queues a fit; the ones that run after the first find it done.
    _ingest(_questions(4))
    assert tasks.embedder_fit(route.pk) == 1
    assert tasks.embedder_fit(route.pk) is None
    assert list(EmbedderVersion.objects.values_list("number", "state")) == [(1, EmbedderState.CURRENT)]
    _ingest(_questions(4))  # the route has doubled since version 1: due again
    assert tasks.embedder_fit(route.pk) == 2


def test_a_route_past_the_settled_size_refits_on_doubling_only_once_its_version_has_aged(route, settings):
    from console.similarity import tasks

    # A version fitted on a route of the settled size or more: doubling alone gives another sample of
    # the same size, so the refit waits until the version has been current for the settled days.
    settings.SIMILARITY_MIN_FIT_QUESTIONS = 6
    settings.SIMILARITY_REFIT_SETTLED_QUESTIONS = 6
    settings.SIMILARITY_REFIT_SETTLED_DAYS = 7
    _ingest(_questions(1))
    assert tasks.embedder_fit(route.pk) == 1
    _ingest(_questions(1))  # doubled: 12 questions against the version's 6
    assert tasks.embedder_fit(route.pk) is None
    current = EmbedderVersion.objects.get(state=EmbedderState.CURRENT)
    current.current_since = timezone.now() - timedelta(days=6, hours=23)
    current.save(update_fields=["current_since"])
    assert tasks.embedder_fit(route.pk) is None
    current.current_since = timezone.now() - timedelta(days=7, minutes=1)
    current.save(update_fields=["current_since"])
    assert tasks.embedder_fit(route.pk) == 2
    # Below the settled size the doubling alone is enough, however young the version is.
    settings.SIMILARITY_REFIT_SETTLED_QUESTIONS = 1_000
    _ingest(_questions(2))
    assert tasks.embedder_fit(route.pk) == 3


def test_the_refit_check_after_each_batch_reads_the_route_counters_not_its_decisions(route):
    # Counting a route's decisions after every ingest batch read an index entry, and right after a
    # burst a heap page, per decision the route ever logged.
    route_id = Decision.objects.get(pk=_ingest(_questions(2))[0]).route_id
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    ids = _ingest(_questions(1))
    with CaptureQueriesContext(connection) as queries:
        builtin.vectors_embed(decision_ids=ids)
    assert QuestionVector.objects.filter(decision_id__in=ids).count() == len(ids)
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and '"ledger_decision"' in q["sql"]]
    assert counts == []


def test_a_route_on_the_built_in_embedder_refuses_sent_vectors_naming_the_item(integrator):
    _ingest(_questions(1))
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=factories.make_route().pk)
    response = integrator.post(
        "/api/v1/decisions",
        {"decisions": [factories.record(), factories.record(question_embedding=[0.5] * 256)]},
        format="json",
    )
    assert response.status_code == 400
    detail = response.json()["error"]["details"][0]
    assert (detail["index"], detail["field"]) == (1, "question_embedding")
    assert "built-in embedder" in detail["message"]


def test_a_route_with_sent_vectors_is_never_fitted(integrator):
    integrator.post(
        "/api/v1/decisions", {"decisions": [factories.record(question_embedding=[1.0, 0.0])]}, format="json"
    )
    _ingest(_questions(2))
    assert builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=factories.make_route().pk) is None
    assert not EmbedderVersion.objects.exists()


def test_the_hourly_sweep_embeds_decisions_whose_job_was_lost_and_recomputes_gaps(
    route, django_capture_on_commit_callbacks
):
    from console.similarity import tasks
    from console.similarity.models import GapRun

    _ingest(_questions(3))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    lost = _ingest(["Screen flickers after the update", "Screen flickers after the update again"])
    assert not QuestionVector.objects.filter(decision_id__in=lost).exists()  # no after-ingest job ran
    with django_capture_on_commit_callbacks(execute=True):
        tasks.gaps_refresh()
    assert QuestionVector.objects.filter(decision_id__in=lost, embedder=version).count() == 2
    assert GapRun.objects.filter(route=route).count() == 1


def test_similar_refusals_read_the_current_version_and_say_when_a_question_has_no_vector_yet(reviewer):
    ids = _ingest(_questions(3))
    route_id = factories.make_route().pk
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route_id)  # version 2 replaces version 1
    body = reviewer.get(f"/api/v1/decisions/{ids[0]}/similar?k=2").json()
    assert body["vectors"]["embedder_version"] == 2 and body["vectors"]["decision_has_vector"] is True
    assert all(r["question"].startswith(TOPICS[0]) for r in body["results"])
    (later,) = _ingest(["Laptop battery drains overnight"])  # not embedded yet: its job has not run
    body = reviewer.get(f"/api/v1/decisions/{later}/similar").json()
    assert body["vectors"]["decision_has_vector"] is False and body["results"] == []


def test_a_stored_model_keeps_its_components_in_12_bits_and_embeds_as_the_fitted_one():
    import io

    import joblib
    import numpy as np

    from console.similarity import embedder

    questions = _questions(4)
    model = embedder.fit(questions)
    components = model.named_steps["svd"].components_
    stored = embedder.dumps(model)
    assert stored.startswith(embedder.MAGIC)
    assert model.named_steps["svd"].components_ is components  # the model in hand is left as it was
    loaded = embedder.loads(stored)
    assert loaded.named_steps["svd"].components_.dtype == np.float32
    assert np.array_equal(loaded.named_steps["svd"].components_, components)
    assert np.array_equal(embedder.transform(loaded, questions), embedder.transform(model, questions))
    # Each component takes at most 2 x 2047 + 1 values, its largest number exactly one of them.
    for row in components:
        steps = row / (np.abs(row).max() / 2047)
        assert np.allclose(steps, np.rint(steps), atol=1e-3)
    # Models stored before, in float16 and before that in float32, still load as they were stored.
    for dtype in (np.float16, np.float32):
        model.named_steps["svd"].components_ = components.astype(dtype)
        buffer = io.BytesIO()
        joblib.dump(model, buffer)
        old = embedder.loads(buffer.getvalue()).named_steps["svd"].components_
        assert old.dtype == np.float32 and np.array_equal(old, components.astype(dtype).astype(np.float32))


def test_12_bit_components_are_near_the_fitted_ones_and_smaller_than_half_precision():
    import numpy as np

    from console.similarity import embedder

    rng = np.random.default_rng(7)
    components = rng.normal(size=(64, 3000)).astype(np.float32) * rng.uniform(0.01, 1, size=(64, 1)).astype(np.float32)
    components[3] = 0  # a component with nothing in it keeps nothing
    packed = embedder._pack(components)
    unpacked = embedder._unpack(memoryview(packed))
    largest = np.abs(components).max(axis=1, keepdims=True)
    assert np.all(np.abs(unpacked - components) <= largest / 2047 / 2 * 1.0001)
    assert not unpacked[3].any()
    assert len(packed) < components.size * 2 * 0.8  # float16 would take 2 bytes a number


def test_a_job_for_decisions_a_refit_embedded_already_embeds_nothing_again(route, monkeypatch):
    ids = _ingest(_questions(3))
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=factories.make_route().pk)
    embedded = []
    real = builtin.embedder.transform
    monkeypatch.setattr(
        builtin.embedder, "transform", lambda model, qs, **kw: embedded.append(qs) or real(model, qs, **kw)
    )
    assert builtin.vectors_embed(decision_ids=ids) == 0  # the job queued before the refit finished
    assert embedded == []
    later = _ingest(["Laptop battery drains overnight"])
    assert builtin.vectors_embed(decision_ids=ids + later) == 1
    assert embedded == [["Laptop battery drains overnight"]]


def _recording(monkeypatch) -> tuple[list[list[str]], list[int]]:
    """The questions each embedding call was given, and the versions whose model was loaded."""
    embedded, loaded = [], []
    transform, model_load = builtin.embedder.transform, builtin._model_load
    monkeypatch.setattr(
        builtin.embedder, "transform", lambda model, qs, **kw: embedded.append(qs) or transform(model, qs, **kw)
    )
    monkeypatch.setattr(builtin, "_model_load", lambda version: loaded.append(version.pk) or model_load(version))
    return embedded, loaded


def test_a_job_embeds_the_batches_queued_behind_it_whose_jobs_then_embed_nothing(route, other_route, monkeypatch):
    _ingest(_questions(3))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    batches = []
    for n in range(3):
        batches.append(_ingest([f"Laptop battery drains overnight, case {n}", f"Docking station {n} is not found"]))
        _ingest([f"Parental leave question {n}"], route="hr-policy")  # another route's, in between: never taken
    embedded, loaded = _recording(monkeypatch)
    assert builtin.vectors_embed(decision_ids=batches[0]) == 6
    assert builtin.vectors_embed(decision_ids=batches[1]) == 0
    assert builtin.vectors_embed(decision_ids=batches[2]) == 0
    assert embedded == [
        [
            q
            for n in range(3)
            for q in (f"Laptop battery drains overnight, case {n}", f"Docking station {n} is not found")
        ]
    ]
    assert loaded == [version.pk]  # the jobs with nothing left to do never load the model
    every = [pk for batch in batches for pk in batch]
    assert sorted(
        QuestionVector.objects.filter(embedder=version, decision_id__in=every).values_list("decision_id", flat=True)
    ) == sorted(every)


def test_a_job_takes_later_decisions_only_up_to_its_room_and_each_decision_is_embedded_once(route, monkeypatch):
    _ingest(_questions(3))
    builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    monkeypatch.setattr(builtin, "_EMBED_CHUNK", 3)
    questions = [f"Badge {n} does not open the door" for n in range(8)]
    batches = [_ingest(questions[i : i + 2]) for i in range(0, 8, 2)]
    embedded, _ = _recording(monkeypatch)
    stored = [builtin.vectors_embed(decision_ids=batch) for batch in batches]
    # The first job: its own two and one of the second batch; the second: the other one and the third batch.
    assert stored == [3, 3, 0, 2]
    assert [q for call in embedded for q in call] == questions
    assert QuestionVector.objects.filter(decision_id__in=[pk for b in batches for pk in b]).count() == 8


def test_vectors_embedded_together_equal_those_embedded_one_question_at_a_time(route):
    import numpy as np

    from console.similarity import embedder

    _ingest(_questions(3))
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    questions = [f"Screen {n} flickers after the update" for n in range(5)] + ["Wifi keeps dropping in room 4"]
    ids = _ingest(questions)
    builtin.vectors_embed(decision_ids=ids[:1])  # takes the five after it as well
    model = builtin._model_load(version)
    stored = dict(QuestionVector.objects.filter(decision_id__in=ids).values_list("decision_id", "vector"))
    for pk, question in zip(ids, questions, strict=True):
        alone = embedder.transform(model, [question])[0]
        # Stored in half precision: equal to the vector made alone within a half's rounding.
        assert np.allclose(np.asarray(stored[pk], dtype=np.float32), alone, atol=1e-3, rtol=0)


def test_a_batch_stored_during_a_refit_is_embedded_once_by_its_job_with_the_version_being_built(route, monkeypatch):
    _ingest(_questions(3))
    v1 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    arrived, stored_meanwhile = [], []
    index_create = builtin.index_create

    def ingest_while_refitting(**kwargs):
        # After the refit's last read, before it is promoted: a batch arrives and its job runs.
        arrived.extend(_ingest(["Laptop battery drains overnight", "Docking station is not found"]))
        stored_meanwhile.append(builtin.vectors_embed(decision_ids=arrived))
        index_create(**kwargs)

    monkeypatch.setattr(builtin, "index_create", ingest_while_refitting)
    embedded, _ = _recording(monkeypatch)
    v2 = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    assert stored_meanwhile == [2]
    questions = [q for call in embedded for q in call]
    # Embedded once each, not once for each version.
    assert [questions.count(q) for q in ("Laptop battery drains overnight", "Docking station is not found")] == [1, 1]
    rows = set(QuestionVector.objects.filter(decision_id__in=arrived).values_list("decision_id", "embedder_id"))
    # The job embedded the batch with version 2, past its frontier; version 1 retired with its vectors.
    assert rows == {(arrived[0], v2.pk), (arrived[1], v2.pk)} and v1.pk != v2.pk
    assert v2.reembeds_until < min(arrived)


def test_a_refits_work_is_fixed_when_it_starts_however_fast_the_route_receives_decisions(route, monkeypatch):
    # Every embedding call of the refit sees a new decision arrive, as on a route that never stops
    # receiving traffic. Embedding "until none is left" chased the stream for as long as it lasted,
    # holding the route's fit lock; passes that each took what arrived meanwhile grew whenever they
    # ran slower than the stream.
    _ingest(_questions(3))
    monkeypatch.setattr(builtin, "_EMBED_CHUNK", 4)
    arrived: list[int] = []
    embedded: list[int] = []
    streaming = [True]
    store = builtin._embed_and_store

    def storing_while_the_stream_goes_on(version, model, rows, **options):
        embedded.extend(pk for pk, *_ in rows)
        stored = store(version, model, rows, **options)
        if streaming[0]:
            arrived.extend(_ingest([f"Question number {len(arrived)} from the stream"]))
        return stored

    monkeypatch.setattr(builtin, "_embed_and_store", storing_while_the_stream_goes_on)
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    version.refresh_from_db()
    assert version.state == EmbedderState.CURRENT
    # The 18 decisions there were when the version was made, in five calls of at most 4, and no more.
    first = sorted(set(Decision.objects.filter(route=route).values_list("pk", flat=True)) - set(arrived))
    assert embedded == first and len(arrived) == 5 and version.reembeds_until == first[-1]
    # What arrived meanwhile is its after-ingest jobs': each embedded once, with the new version.
    streaming[0] = False
    assert builtin.vectors_embed(decision_ids=arrived) == 5
    assert embedded[len(first) :] == arrived
    assert QuestionVector.objects.filter(embedder=version).count() == len(first) + len(arrived)


def test_a_batch_committed_below_the_frontier_after_the_refit_read_past_it_still_gets_its_vector(route, monkeypatch):
    # Ids come from a sequence and batches commit in any order: the pass can read a range before a
    # batch with ids in it commits. Here the pass misses the frontier's own decision, as if so.
    _ingest(_questions(3))
    between = builtin._embed_between
    monkeypatch.setattr(
        builtin,
        "_embed_between",
        lambda version, model, *, after, until, missing_only=False: between(
            version, model, after=after, until=until if missing_only else until - 1, missing_only=missing_only
        ),
    )
    version = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    assert QuestionVector.objects.filter(embedder=version).count() == Decision.objects.filter(route=route).count()


def test_a_job_embeds_past_a_running_refits_frontier_with_its_version_and_with_the_current_one_once_it_died(route):
    import psycopg

    _ingest(_questions(3))
    current = builtin.embedder_fit(actor=factories.TEST_ACTOR, route_id=route.pk)
    before = _ingest(["Printer queue is stuck", "Monitor stays black after login"])
    building = EmbedderVersion.objects.create(
        route=route,
        number=2,
        dimension=current.dimension,
        components=current.components,
        fitted_on=18,
        route_questions=18,
        reembeds_until=max(before),
    )
    assert building.state == EmbedderState.BUILDING
    builtin.space_partition_create(building.space_key)
    EmbedderModel.objects.create(version=building, data=EmbedderModel.objects.get(version=current).data)
    after = _ingest(["Laptop battery drains overnight", "Docking station shows no picture"])
    # A refit holds the route's fit lock in its own session for as long as it re-embeds.
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as refit:
        refit.execute("SELECT pg_advisory_lock(%s, %s)", [builtin._FIT_LOCK, route.pk])
        # Up to the frontier the decisions are the refit's; past it, the job's, with the refit's version.
        assert builtin.vectors_embed(decision_ids=before + after) == 2
        assert set(
            QuestionVector.objects.filter(decision_id__in=before + after).values_list("decision_id", "embedder_id")
        ) == {
            (after[0], building.pk),
            (after[1], building.pk),
        }
    # The session ended without the refit finishing: its version is still building, and nobody
    # will embed these decisions for the current version if the jobs keep leaving them to it.
    assert builtin.vectors_embed(decision_ids=before + after) == 4
    assert set(
        QuestionVector.objects.filter(embedder=current, decision_id__in=before + after).values_list(
            "decision_id", flat=True
        )
    ) == set(before + after)


def test_unpacked_components_are_exactly_the_dequantized_levels_they_were_packed_from():
    import numpy as np

    from console.similarity import embedder

    rng = np.random.default_rng(11)
    components = rng.normal(size=(32, 5000)).astype(np.float32) * rng.uniform(1e-4, 3, size=(32, 1)).astype(np.float32)
    levels, scale = embedder._quantized(components)
    unpacked = embedder._unpack(memoryview(embedder._pack(components)))
    assert unpacked.dtype == np.float32 and unpacked.shape == (32, 5000)
    # Bit for bit: vectors made with a model loaded again must match those made before.
    assert np.array_equal(unpacked.view(np.uint32), embedder._dequantized(levels, scale).view(np.uint32))


def test_questions_transformed_in_slices_get_exactly_the_vectors_of_one_call(monkeypatch):
    import numpy as np

    from console.similarity import embedder

    questions = _questions(6)
    model = embedder.fit(questions)
    whole = embedder.transform(model, questions)
    monkeypatch.setattr(embedder, "TRANSFORM_SLICE", 7)  # slices of 7, the last one shorter
    sliced = embedder.transform(model, questions)
    assert len(questions) % 7 and sliced.shape == whole.shape == (len(questions), embedder.DIMENSION)
    assert np.array_equal(sliced.view(np.uint32), whole.view(np.uint32))
