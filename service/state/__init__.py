"""What the service keeps beside the vectors, on SQLite or a shared PostgreSQL: its small
tables (idempotency records, stored exports), the scope chain, mem0's history on PostgreSQL."""
