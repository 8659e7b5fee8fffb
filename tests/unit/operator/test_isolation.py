"""Which stores would admit the same agent pods: the pure overlap check behind the warning."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memorystore.operator.isolation import (
    admitted_selectors,
    compatible,
    overlap_message,
    overlaps,
)
from memorystore.spec import MemoryStoreSpec


def spec(labels: dict[str, str] | None = None) -> MemoryStoreSpec:
    return MemoryStoreSpec.model_validate({"allowedAgentPods": {"matchLabels": labels or {}}})


def test_default_stores_never_overlap():
    others = {"globex": spec(), "initech": spec()}
    assert overlaps("acme", spec(), others) == []


def test_the_readme_mistake_two_stores_admitting_app_agent_is_reported():
    found = overlaps("acme", spec({"app": "agent"}), {"globex": spec({"app": "agent"})})
    assert [o.store for o in found] == ["globex"]
    message = overlap_message("acme", found)
    assert "globex" in message and "app=agent" in message
    assert "memorystore.dev/client" in message and "namespace" in message


def test_an_extra_selector_that_could_match_another_stores_agents_is_reported():
    # globex admits tier=agents: a pod labelled for acme that also carries tier=agents
    # would reach both services.
    found = overlaps("acme", spec(), {"globex": spec({"tier": "agents"})})
    assert [o.store for o in found] == ["globex"]
    assert found[0].labels == {"memorystore.dev/client": "acme", "tier": "agents"}


def test_an_extra_selector_pinned_to_another_store_label_value_does_not_overlap():
    pinned = spec({"memorystore.dev/client": "globex", "tier": "agents"})
    assert overlaps("acme", spec(), {"globex": pinned}) == []


def test_the_store_itself_is_never_its_own_overlap():
    assert overlaps("acme", spec({"app": "x"}), {"acme": spec({"app": "x"})}) == []


labels = st.dictionaries(
    st.sampled_from(["app", "tier", "memorystore.dev/client"]),
    st.sampled_from(["a", "b", "acme", "globex"]),
    max_size=3,
)


@given(labels, labels)
def test_compatible_means_one_pod_can_carry_both(a, b):
    # the smallest pod that could match both is their union; it matches both iff compatible
    union = {**a, **b}
    matches_both = all(union.get(k) == v for k, v in a.items()) and all(
        union.get(k) == v for k, v in b.items()
    )
    assert compatible(a, b) == matches_both == compatible(b, a)


@given(labels, labels)
def test_overlap_is_symmetric(a, b):
    one = bool(overlaps("acme", spec(a), {"globex": spec(b)}))
    other = bool(overlaps("globex", spec(b), {"acme": spec(a)}))
    assert one == other


def test_admitted_selectors_put_the_unique_label_first():
    assert admitted_selectors("acme", spec({"b": "1", "a": "2"})) == [
        {"memorystore.dev/client": "acme"},
        {"a": "2", "b": "1"},
    ]
