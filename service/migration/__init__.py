"""Changing a store's embedder online: a second index built beside the live one, reads
switched when it is complete, the old one kept for a grace period (`state`: the decisions)."""

from memorystore.service.migration.state import Action, Phase, State, Step, decide

__all__ = ["Action", "Phase", "State", "Step", "decide"]
