"""What happens to memories over time: the session journal, session-end consolidation and the
model's judgement of outdated memories."""
