"""The AgentScope middleware factory agents use to reach their tenant's memory service
(built in the agent-middleware issue)."""
