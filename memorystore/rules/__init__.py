"""Offline text rules shared by the service and the agent side (no mem0): scripts, sentences,
the user's statements, de-duplication and supersession, with their word lists as data files
(`lexicons/`)."""
