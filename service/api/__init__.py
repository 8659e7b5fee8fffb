"""The HTTP API: request and response schemas, one router per concern, their dependencies."""
