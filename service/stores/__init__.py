"""The vector stores behind mem0: the embedded Qdrant engine, a Qdrant server and pgvector."""
