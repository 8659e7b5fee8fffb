"""Offline text rules shared by the service and the agent side (no mem0): scripts, sentences,
de-duplication and supersession."""
