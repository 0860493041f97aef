"""Passage text compressed with a dictionary (console/ledger/compression.py): the ledger's job trains
a zstd dictionary on stored passages, ingest compresses new passages with it, every reader reads
them back (and the passages deflated with a preset of passage text before), and nobody changes or
deletes a dictionary."""

from __future__ import annotations

import hashlib
import importlib
import io
import itertools
import random
import threading
import zlib
from types import SimpleNamespace

import psycopg
import pytest
import zstandard
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from audit.models import Action, AuditEvent
from console.core.db_roles import as_owner
from console.ledger import compression
from console.ledger.compression import (
    DICTIONARY_MARKER,
    DICTIONARY_MAX_BYTES,
    MARKER,
    TRAINED_MARKER,
    TRAINED_MAX_BYTES,
    PresetDictionary,
    compress_text,
    decompress_head,
    decompress_text,
    dictionaries_forget,
    head_sql,
    is_trained,
    newest_dictionary,
    utf8_length_sql,
)
from console.ledger.models import Passage, PassageDictionary
from console.ledger.services import DICTIONARY_HELD_OUT, passage_dictionary_build
from console.verification.models import SpanCheck
from console.verification.services import decisions_verify
from tests.audit.attack import owner_cursor
from tests.factories import TEST_ACTOR, ingest, make_route, make_token, record
from tests.ledger.test_archive import _rows
from tests.ledger.test_passage_storage import LONG

# An IT-support vocabulary: random sentences of it deflate about as well as knowledge-base prose.
WORDS = (
    "account access admin alert allow app approval backup browser cache calendar certificate change "
    "check client cloud computer config connect credential data delete device disk display domain "
    "download driver email enable encrypt error file firewall folder group hardware help install key "
    "keyboard laptop license login mail manager message mobile monitor network office open password "
    "phone policy portal printer profile proxy queue reboot remote request reset restore router screen "
    "secure server service session settings share software storage support sync system team ticket "
    "token update upgrade upload user vpn window wireless the a to of and in for on with your is be can"
).split()
CLAIM = "Open Settings and choose Reset."


def _text(rng: random.Random, length: int = 500) -> str:
    words, size = [], 0
    while size < length:
        words.append(rng.choice(WORDS))
        size += len(words[-1]) + 1
    return " ".join(words)[: length - 1].capitalize() + "."


def _ingest_texts(texts: list[str], prefix: str) -> list[int]:
    """One decision per five texts, each text a passage of its own."""
    records = []
    for start in range(0, len(texts), 5):
        passages = [
            {"id": f"kb/{prefix}/{start + rank - 1}", "text": text, "rank": rank}
            for rank, text in enumerate(texts[start : start + 5], start=1)
        ]
        records.append(record(claim=CLAIM, passages=passages))
    return ingest(records)


def _stored(external_id: str) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute("SELECT text FROM ledger_passage WHERE external_id = %s", [external_id])
        return bytes(cursor.fetchone()[0])


def _dictionary(seed: int = 1) -> PassageDictionary:
    """Enough stored text for a dictionary, and the dictionary the job builds from it; then this
    process reads the newest dictionary again, as it would once its cached answer expires."""
    rng = random.Random(seed)
    _ingest_texts([_text(rng) for _ in range(DICTIONARY_HELD_OUT + 100)], f"sample-{seed}")
    # Where transactions commit, ingest has queued the build already (jobs run inline in tests).
    dictionary = passage_dictionary_build(actor=TEST_ACTOR) or PassageDictionary.objects.order_by("-id").first()
    assert dictionary is not None
    dictionaries_forget()
    return dictionary


def _text_dictionary(seed: int = 100) -> PassageDictionary:
    """A dictionary of passage text, as the build made them before zstd (deflate's preset): the newest
    dictionary from now on, so ingest deflates with it as it did then."""
    data = "".join(_text(random.Random(n)) for n in range(seed, seed + 70)).encode()[-DICTIONARY_MAX_BYTES:]
    dictionary = PassageDictionary.objects.create(
        data=data, sha256=hashlib.sha256(data).hexdigest(), sample_passages=70, sample_bytes=len(data)
    )
    dictionaries_forget()
    return dictionary


def _trained_dictionary(seed: int = 200) -> PassageDictionary:
    """A trained dictionary stored as the build stores one, whatever the dictionaries before it:
    the newest from now on."""
    sample = [_text(random.Random(n)).encode() for n in range(seed, seed + 300)]
    data = zstandard.train_dictionary(DICTIONARY_MAX_BYTES, sample).as_bytes()
    dictionary = PassageDictionary.objects.create(
        data=data, sha256=hashlib.sha256(data).hexdigest(), sample_passages=300, sample_bytes=sum(map(len, sample))
    )
    dictionaries_forget()
    return dictionary


def test_every_form_round_trips_and_the_dictionary_forms_are_the_smallest(route):
    trained, of_text = _dictionary(), _text_dictionary()
    assert is_trained(bytes(trained.data)) and not is_trained(bytes(of_text.data))
    presets = {
        TRAINED_MARKER: PresetDictionary(trained.pk, bytes(trained.data)),
        DICTIONARY_MARKER: PresetDictionary(of_text.pk, bytes(of_text.data)),
    }
    prose = _text(random.Random(7))
    texts = ["", "a", "ß", "🔐" * 2, "x" * 10_000, LONG, prose, "".join(chr(c) for c in range(0x20, 0x3000, 7))]
    for text in texts:
        for form in (compress_text(text), *(compress_text(text, preset) for preset in presets.values())):
            assert decompress_text(form) == text
            assert len(form) <= len(text.encode())
    plain = compress_text(prose)
    assert plain[0] == MARKER
    for marker, preset in presets.items():
        with_dictionary = compress_text(prose, preset)
        assert with_dictionary[0] == marker and int.from_bytes(with_dictionary[1:3], "big") == preset.id
        # Nothing in a preset is used up by a text: the next one compresses the same way.
        assert compress_text(prose, preset) == with_dictionary
        # A lone passage of 500 characters: about 275 bytes deflated alone, under 200 with a dictionary.
        assert len(with_dictionary) < 0.75 * len(plain)
        # Texts too short to gain stay as their UTF-8 bytes, with or without a dictionary.
        assert compress_text("ß", preset) == "ß".encode() and compress_text("", preset) == b""
    # Each form is the standard stream its header says: a deflater given the preset afresh, and a
    # zstd compressor given the trained dictionary, make the same bytes.
    fresh = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=bytes(of_text.data))
    assert compress_text(prose, presets[DICTIONARY_MARKER])[7:] == fresh.compress(prose.encode()) + fresh.flush()
    zstd = zstandard.ZstdCompressor(
        level=3,
        dict_data=zstandard.ZstdCompressionDict(bytes(trained.data)),
        write_checksum=False,
        write_content_size=False,
        write_dict_id=False,
    )
    assert compress_text(prose, presets[TRAINED_MARKER])[7:] == zstd.compress(prose.encode())


def test_a_dictionary_that_is_not_trained_cannot_read_a_zstd_value(route):
    trained, of_text = _dictionary(), _text_dictionary()
    stored = compress_text(LONG * 2, PresetDictionary(trained.pk, bytes(trained.data)))
    with pytest.raises(ValueError, match="not trained"):
        decompress_text(stored[:1] + of_text.pk.to_bytes(2, "big") + stored[3:])


def test_a_damaged_dictionary_value_or_an_unknown_dictionary_is_an_error(route):
    dictionary = _dictionary()
    stored = compress_text(LONG * 2, PresetDictionary(dictionary.pk, bytes(dictionary.data)))
    wrong_length = stored[:3] + (len(LONG.encode()) * 2 - 1).to_bytes(4, "big") + stored[7:]
    with pytest.raises(ValueError, match="damaged"):
        decompress_text(wrong_length)
    unknown = stored[:1] + (dictionary.pk + 1000).to_bytes(2, "big") + stored[3:]
    with pytest.raises(ValueError, match="does not exist"):
        decompress_text(unknown)


def test_the_build_needs_enough_text_and_stores_a_dictionary_only_when_it_gains(route):
    rng = random.Random(3)
    _ingest_texts([_text(rng) for _ in range(DICTIONARY_HELD_OUT)], "few")
    assert passage_dictionary_build(actor=TEST_ACTOR) is None  # nothing beside the held-out passages

    _ingest_texts([_text(rng) for _ in range(100)], "more")
    dictionary = passage_dictionary_build(actor=TEST_ACTOR)
    assert dictionary is not None and is_trained(bytes(dictionary.data))
    assert DICTIONARY_MAX_BYTES / 2 < len(dictionary.data) <= TRAINED_MAX_BYTES
    assert dictionary.sha256 == hashlib.sha256(bytes(dictionary.data)).hexdigest()
    # Trained on every older passage, each text once; never on the held-out ones it is judged on.
    older = [p.text.encode() for p in Passage.objects.order_by("-id")[DICTIONARY_HELD_OUT:]]
    assert dictionary.sample_passages == len(set(older)) == 100
    assert dictionary.sample_bytes == sum(map(len, set(older)))

    event = AuditEvent.objects.get(action=Action.PASSAGE_DICTIONARY_CREATED)
    assert event.object_id == str(dictionary.pk) and event.payload["sha256"] == {"old": None, "new": dictionary.sha256}
    held_out = event.payload["held_out"]
    assert held_out["stored_bytes_after"] < 0.75 * held_out["stored_bytes_before"]

    # The same text again gains nothing over the dictionary built from it: nothing is stored.
    assert passage_dictionary_build(actor=TEST_ACTOR) is None
    assert PassageDictionary.objects.count() == 1


def _varied_text(rng: random.Random, vocabulary: list[str], length: int = 500) -> str:
    """Text over a large vocabulary, its words drawn with Zipf-like weights as prose's are."""
    words, size = [], 0
    while size < length:
        words.append(rng.choices(vocabulary, cum_weights=_ZIPF[: len(vocabulary)])[0])
        size += len(words[-1]) + 1
    return " ".join(words)[: length - 1] + "."


_ZIPF = list(itertools.accumulate(1 / rank for rank in range(1, 4001)))


def test_with_enough_text_the_build_trains_a_dictionary_past_32_kib_that_stores_passages_in_fewer_bytes(route):
    rng = random.Random(41)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(4000)]
    texts = [_varied_text(rng, vocabulary) for _ in range(DICTIONARY_HELD_OUT + 1300)]
    _ingest_texts(texts, "varied")

    dictionary = passage_dictionary_build(actor=TEST_ACTOR)
    assert dictionary is not None and is_trained(bytes(dictionary.data))
    assert DICTIONARY_MAX_BYTES < len(dictionary.data) <= TRAINED_MAX_BYTES

    # Against a dictionary of 32 KiB, the most before, trained on the same sample: the newest
    # passages (held out of both) take fewer bytes.
    held_out = texts[-DICTIONARY_HELD_OUT:]
    sample = [text.encode() for text in texts[:-DICTIONARY_HELD_OUT]]
    small = PresetDictionary(0, zstandard.train_dictionary(DICTIONARY_MAX_BYTES, sample).as_bytes())
    large = PresetDictionary(0, bytes(dictionary.data))
    with_small = sum(len(compress_text(text, small)) for text in held_out)
    with_large = sum(len(compress_text(text, large)) for text in held_out)
    assert with_large < 0.97 * with_small


@pytest.mark.django_db(transaction=True)
def test_the_database_takes_a_trained_dictionary_of_256_kib_and_no_more():
    data = compression.TRAINED_MAGIC + bytes(TRAINED_MAX_BYTES - 4)
    PassageDictionary.objects.create(
        data=data, sha256=hashlib.sha256(data).hexdigest(), sample_passages=1, sample_bytes=1
    )
    data += b"\0"
    with pytest.raises(DatabaseError, match="passage_dictionary_max_bytes"), transaction.atomic():
        PassageDictionary.objects.create(
            data=data, sha256=hashlib.sha256(data).hexdigest(), sample_passages=1, sample_bytes=1
        )


def test_threads_share_one_digested_dictionary_and_each_round_trips_its_passages(route):
    dictionary = _trained_dictionary()
    preset = newest_dictionary()  # read here: the threads' own connections cannot see the test's rows
    assert preset is not None and preset.id == dictionary.pk
    texts = [_text(random.Random(n)) for n in range(400, 480)]
    stored: dict[int, list[bytes]] = {}
    start = threading.Barrier(8)

    def work(thread: int) -> None:
        start.wait()
        stored[thread] = [compress_text(text, preset) for text in texts]
        assert [decompress_text(value) for value in stored[thread]] == texts

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(stored) == 8 and all(values == stored[0] for values in stored.values())
    assert all(value[0] == TRAINED_MARKER for value in stored[0])
    # One digested copy for the process, whichever thread made it.
    assert list(compression._digested) == [dictionary.pk]


def test_ingest_compresses_new_passages_with_the_newest_dictionary_and_older_rows_still_read(route, reviewer):
    before = _text(random.Random(11))
    _ingest_texts([before], "before")
    assert _stored("kb/before/0")[0] == MARKER
    dictionary = _dictionary()

    after = _text(random.Random(12))
    [decision_id] = _ingest_texts([after, LONG], "after")
    stored = _stored("kb/after/0")
    assert stored[0] == TRAINED_MARKER and int.from_bytes(stored[1:3], "big") == dictionary.pk
    assert len(stored) < 0.75 * len(compress_text(after))
    assert _stored("kb/before/0")[0] == MARKER  # rows stored before keep their form

    texts = dict(Passage.objects.filter(external_id__startswith="kb/").values_list("external_id", "text"))
    assert texts["kb/before/0"] == before and texts["kb/after/0"] == after and texts["kb/after/1"] == LONG
    body = reviewer.get(f"/api/v1/decisions/{decision_id}").json()
    assert [p["text"] for p in body["passages"]] == [after, LONG]


def test_the_verifier_checks_spans_in_passages_stored_with_a_dictionary(route):
    _dictionary()
    text = _text(random.Random(13)) + " " + CLAIM
    [decision_id] = _ingest_texts([text], "verify")
    assert _stored("kb/verify/0")[0] == TRAINED_MARKER
    dictionaries_forget()  # the verifier's process has not seen the dictionary yet

    result = decisions_verify(actor=TEST_ACTOR, decision_ids=[decision_id])
    assert result.verified == [decision_id]
    [check] = SpanCheck.objects.filter(decision_id=decision_id)
    assert check.supported and check.match_ranges == [[len(text) - len(CLAIM), len(text)]]


def test_sql_reads_the_length_and_the_head_of_every_form(route):
    dictionary = _dictionary()
    preset = PresetDictionary(dictionary.pk, bytes(dictionary.data))
    emoji = "🔐é" * 200
    texts = {"kb/raw": "Kurz: ß", "kb/plain": LONG * 3, "kb/dictionary": _text(random.Random(5), 2000) + emoji}
    _ingest_texts(list(texts.values()), "sql")
    stored = {name: _stored(f"kb/sql/{n}") for n, name in enumerate(texts)}
    with connection.cursor() as cursor:  # LONG * 3 as ingest stored it before the dictionary
        cursor.execute("UPDATE ledger_passage SET text = %s WHERE external_id = 'kb/sql/1'", [compress_text(LONG * 3)])
    assert [_stored(f"kb/sql/{n}")[0] for n in range(3)] == [ord("K"), MARKER, TRAINED_MARKER]
    assert stored["kb/dictionary"] == compress_text(texts["kb/dictionary"], preset)
    # A passage deflated with a preset of passage text, as ingest stored them before zstd.
    texts["kb/preset"] = _text(random.Random(6), 2000) + emoji
    text_preset = _text_dictionary()
    _ingest_texts([texts["kb/preset"]], "sql-preset")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE ledger_passage SET external_id = 'kb/sql/3' WHERE external_id = 'kb/sql-preset/0'")
    assert _stored("kb/sql/3")[:3] == bytes((DICTIONARY_MARKER,)) + text_preset.pk.to_bytes(2, "big")

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT external_id, {utf8_length_sql('text')}, {head_sql('text', 2100)} FROM ledger_passage "
            "WHERE external_id LIKE 'kb/sql/%%' ORDER BY external_id"
        )
        rows = {name: (length, decompress_head(head, 2100)) for name, length, head in cursor.fetchall()}
    assert rows == {f"kb/sql/{n}": (len(text.encode()), text[:2100]) for n, text in enumerate(texts.values())}


@pytest.mark.parametrize("chars", [40, 2000])
def test_a_head_prefix_inflates_to_the_first_characters_even_of_the_least_compressible_text(route, chars):
    """The prefix `head_sql` cuts holds the first characters however the stream codes them: random
    4-byte characters (long literal codes), and pieces of the dictionary far back (long distances).
    A value in the zstd form is read whole (head_sql cuts nothing from it)."""
    dictionary = _text_dictionary()
    data = bytes(dictionary.data).decode(errors="ignore")
    rng = random.Random(17)
    preset = PresetDictionary(dictionary.pk, bytes(dictionary.data))
    hard = "".join(chr(rng.randrange(0x10000, 0x10FFFF)) for _ in range(4 * chars))
    far = "".join(data[(start := rng.randrange(0, 2000)) : start + rng.randrange(3, 12)] for _ in range(chars))
    prefix_bytes = 7 + 8 * chars + 1024  # what head_sql cuts from a deflated value
    for text in (hard, far):
        stored = compress_text(text, preset)
        assert stored[0] == DICTIONARY_MARKER
        assert decompress_head(stored[:prefix_bytes], chars) == text[:chars]
    trained = _trained_dictionary()
    stored = compress_text(far, PresetDictionary(trained.pk, bytes(trained.data)))
    assert stored[0] == TRAINED_MARKER and decompress_head(stored, chars) == far[:chars]


def test_reading_passages_costs_one_query_per_dictionary_this_process_has_not_seen(route, django_assert_num_queries):
    first = _dictionary(seed=1)
    _ingest_texts([_text(random.Random(n)) for n in range(20, 30)], "first")
    # A second dictionary, of passage text as builds made them before zstd, then ten more passages with it.
    second = _text_dictionary()
    _ingest_texts([_text(random.Random(n)) for n in range(30, 40)], "second")
    forms = {int.from_bytes(_stored(f"kb/{p}/{n}")[1:3], "big") for p in ("first", "second") for n in range(10)}
    assert forms == {first.pk, second.pk}

    dictionaries_forget()
    listed = Passage.objects.filter(external_id__regex=r"^kb/(first|second)/")
    with django_assert_num_queries(3):  # the passages, then each dictionary once
        assert len([p.text for p in listed]) == 20
    with django_assert_num_queries(1):
        assert len([p.text for p in listed.all()]) == 20


def test_the_newest_dictionary_is_read_again_only_after_a_while(route, django_assert_num_queries, monkeypatch):
    assert newest_dictionary() is None
    with django_assert_num_queries(0):
        assert newest_dictionary() is None
    dictionary = _dictionary()
    assert newest_dictionary() == PresetDictionary(dictionary.pk, bytes(dictionary.data))
    with django_assert_num_queries(0):
        newest_dictionary()
    later = compression.time.monotonic() + 61
    monkeypatch.setattr(compression.time, "monotonic", lambda: later)
    with django_assert_num_queries(1):  # its bytes are remembered: only the newest id is read
        assert newest_dictionary().id == dictionary.pk


def test_ingest_queues_the_build_once_enough_text_is_stored_without_a_dictionary(
    route, django_capture_on_commit_callbacks
):
    rng = random.Random(19)
    with django_capture_on_commit_callbacks(execute=True):
        _ingest_texts([_text(rng) for _ in range(20)], "little")
    assert not PassageDictionary.objects.exists()  # 10,000 characters: not worth asking yet

    with django_capture_on_commit_callbacks(execute=True):
        _ingest_texts([_text(rng) for _ in range(DICTIONARY_HELD_OUT + 100)], "enough")
    [dictionary] = PassageDictionary.objects.all()
    dictionaries_forget()
    _ingest_texts([_text(rng)], "next")
    assert _stored("kb/next/0")[:3] == bytes((TRAINED_MARKER,)) + dictionary.pk.to_bytes(2, "big")


@pytest.mark.django_db(transaction=True)
def test_a_dictionary_is_never_changed_or_deleted():
    make_route("it-support")
    dictionary = _dictionary()
    _ingest_texts([_text(random.Random(23))], "uses")
    assert _stored("kb/uses/0")[0] == TRAINED_MARKER
    # The app's role may only add and read rows; the owner (who migrates) hits the trigger.
    with pytest.raises(DatabaseError, match="permission denied"), transaction.atomic():
        PassageDictionary.objects.filter(pk=dictionary.pk).update(sample_bytes=1)
    with pytest.raises(DatabaseError, match="permission denied"), transaction.atomic():
        PassageDictionary.objects.filter(pk=dictionary.pk).delete()
    for sql in ("UPDATE ledger_passagedictionary SET data = ''", "DELETE FROM ledger_passagedictionary"):
        with pytest.raises(psycopg.Error, match="never change"), owner_cursor() as cursor:
            cursor.execute(sql)
    assert bytes(PassageDictionary.objects.get().data) == bytes(dictionary.data)
    dictionaries_forget()
    assert Passage.objects.get(external_id="kb/uses/0").text == _text(random.Random(23))


@pytest.mark.django_db(transaction=True)
def test_the_archive_writes_dictionary_compressed_passages_as_readable_text(tmp_path):
    make_route("it-support")
    _dictionary()
    text = _text(random.Random(29))
    ingest([record(occurred_at="2026-10-03T08:00:00Z", passages=[{"id": "kb/october", "text": text, "rank": 1}])])
    ingest([record(occurred_at="2026-11-02T08:00:00Z")])
    assert _stored("kb/october")[0] == TRAINED_MARKER
    dictionaries_forget()

    call_command("archive_month", "2026-10", "--to", str(tmp_path / "oct"), stdout=io.StringIO())

    rows = {row["external_id"]: row for row in _rows(tmp_path / "oct" / "ledger_passage.csv.gz")}
    assert rows["kb/october"]["text"] == text
    assert not Passage.objects.filter(external_id="kb/october").exists()
    assert PassageDictionary.objects.count() == 1  # dictionaries stay: other passages may name them


@pytest.mark.django_db(transaction=True)
def test_the_migration_backwards_deflates_dictionary_passages_again_without_one():
    migration = importlib.import_module("console.ledger.migrations.0014_passage_dictionary")
    make_route("it-support")
    _text_dictionary()
    texts = [_text(random.Random(n)) for n in range(31, 34)]
    _ingest_texts(texts, "back")
    assert {_stored(f"kb/back/{n}")[0] for n in range(3)} == {DICTIONARY_MARKER}

    with as_owner(), transaction.atomic():
        migration._without_dictionaries(None, SimpleNamespace(connection=connection))
        assert [_stored(f"kb/back/{n}") for n in range(3)] == [compress_text(text) for text in texts]
        transaction.set_rollback(True)


@pytest.mark.django_db(transaction=True)
def test_the_zstd_migration_backwards_deflates_zstd_passages_again_and_leaves_the_others():
    migration = importlib.import_module("console.ledger.migrations.0022_passage_text_zstd")
    make_route("it-support")
    _text_dictionary()
    _ingest_texts([_text(random.Random(41))], "preset")
    _trained_dictionary()
    texts = [_text(random.Random(n)) for n in range(42, 45)]
    _ingest_texts(texts, "zstd")
    preset_form = _stored("kb/preset/0")
    assert preset_form[0] == DICTIONARY_MARKER and {_stored(f"kb/zstd/{n}")[0] for n in range(3)} == {TRAINED_MARKER}

    with as_owner(), transaction.atomic():
        migration._without_trained(None, SimpleNamespace(connection=connection))
        assert [_stored(f"kb/zstd/{n}") for n in range(3)] == [compress_text(text) for text in texts]
        assert _stored("kb/preset/0") == preset_form
        transaction.set_rollback(True)


def test_the_decision_lookup_reads_a_dictionary_once_per_process_whatever_its_passages(
    route, reviewer, django_assert_num_queries
):
    _dictionary()
    rng = random.Random(37)
    [few] = _ingest_texts([_text(rng)], "few")
    [many] = ingest([record(passages=[{"id": f"kb/many/{n}", "text": _text(rng), "rank": n + 1} for n in range(40)])])
    assert _stored("kb/many/39")[0] == TRAINED_MARKER
    dictionaries_forget()
    # The lookup's 10 queries (tests/ledger/test_lookup_api.py), and the dictionary on the first read.
    for decision_id, queries in ((many, 11), (few, 10), (many, 10)):
        reviewer.credentials(HTTP_AUTHORIZATION=f"Token {make_token(reviewer.user)}")
        with django_assert_num_queries(queries):
            assert reviewer.get(f"/api/v1/decisions/{decision_id}").status_code == 200
