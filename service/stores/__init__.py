"""The vector stores behind mem0: the embedded Qdrant engine, a Qdrant server and pgvector.

`protocol.VectorStore` is the contract all three implement; `filters` is the filter language
they share.
"""
