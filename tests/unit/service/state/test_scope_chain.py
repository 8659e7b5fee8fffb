"""The in-process scope chain (one replica): what the next turn's context and prev_id are."""

from __future__ import annotations

import asyncio

from memorystore.scope import EntityIds
from memorystore.service.state.scope_chain import LocalChain


def test_claims_link_each_turn_to_the_one_before_it_in_its_scope():
    chain = LocalChain()
    alice, bob = EntityIds(user_id="alice"), EntityIds(user_id="bob")

    async def run() -> list:
        return [
            await chain.claim(alice, "a1", "alice: hi"),
            await chain.claim(bob, "b1", "bob: hello"),
            await chain.claim(alice, "a2", "alice: I live in Hangzhou"),
        ]

    assert asyncio.run(run()) == [None, None, ("a1", "alice: hi")]


def test_a_deleted_scope_starts_a_new_chain():
    chain = LocalChain()
    scope = EntityIds(user_id="alice", agent_id="tutor")

    async def run() -> object:
        await chain.claim(scope, "a1", "alice: my password hint is blue")
        await chain.forget(scope)  # its memories were deleted: their text is no context
        return await chain.claim(scope, "a2", "alice: hi again")

    assert asyncio.run(run()) is None


def test_the_least_recently_written_scopes_fall_out_first():
    chain = LocalChain(limit=2)
    scopes = [EntityIds(user_id=f"u{i}") for i in range(3)]

    async def run() -> list:
        for i, scope in enumerate(scopes):
            await chain.claim(scope, f"m{i}", "x")
        return [await chain.claim(scope, "next", "y") for scope in reversed(scopes)]

    # u0 fell out when u2 was written; u2 and u1 are still remembered
    assert asyncio.run(run()) == [("m2", "x"), ("m1", "x"), None]


def test_scope_keys_are_the_same_in_every_process_and_key_order():
    """What the journal, the exports, the chain and the locks store: a persisted format."""
    assert EntityIds(user_id="a", agent_id="b").key() == '{"agent_id": "b", "user_id": "a"}'
    assert EntityIds(agent_id="b", user_id="a").key() == EntityIds(user_id="a", agent_id="b").key()
    assert EntityIds(user_id="杭州").key() == '{"user_id": "杭州"}'
