"""The vector store on PostgreSQL + pgvector: the embedded store's behaviour, shared by replicas.

Why it exists: the embedded engine (``stores/embedded.EdgeVectorStore``) keeps a collection in one
on-disk shard that one process owns. With ``vectorStore.postgres`` every replica of the service
reads and writes the same collection in PostgreSQL, and a write is one transaction. The
embedded store is the reference: same methods, return shapes, filter language, error messages
and BM25 scores, so the service cannot tell them apart.

Layout, per collection (``schema.py``; names from ``table_names``; every identifier is quoted):

- ``memorystore_vectors_<collection>``: ``id uuid``, ``vector vector(dims)`` (unit length, as
  the engine stores cosine vectors), ``payload jsonb``, and two shadows of the payload the
  engine's filters need but SQL cannot compute: ``words`` (every string replaced by the ids of
  its words, tokenised by the engine: what ``contains`` matches) and ``times`` (every string
  the engine reads as a datetime replaced by its UTC microseconds: what datetime ranges
  compare). HNSW (``vector_cosine_ops``) and GIN (``jsonb_path_ops``) indexes.
- ``memorystore_terms_<collection>``: the BM25 postings ``(term, point_id, weight)`` from
  ``lexical.encoder(tokenizer).embed_document`` of ``text_lemmatized`` or else ``data``,
  deleted with their point. Term ``-1`` marks a point that has any term, so that N counts
  the points the engine counts.

Keyword search is the engine's BM25 in SQL: score = Σ over the query's terms t of
idf(t) × weight(doc, t) × query value(t), idf(t) = ln((N − n_t + 0.5)/(n_t + 0.5) + 1), N the
points with at least one term (the engine counts neither empty nor stopword-only texts), n_t
those holding t.

Measured against the engine (tests/integration/test_pg_store.py; qdrant-edge 0.9.0, pgvector
0.8.1, PostgreSQL 18):

- BM25: the 336 English and Chinese memories of the multilingual bench, its 274 queries over
  the whole collection and over the asker's scope, top 10 and every match (1096 searches):
  the same ids in the same order on all of them once equal scores are taken as ties, scores
  within 1.1e-7 relative. Strictly identical lists: about 55 %, because the engine orders
  equal scores arbitrarily (not even the same way for two limits); here ties go by id.
- Dense: 3000 random 64-dimensional vectors, 100 queries, top 10: 100 % the engine's hits
  within a scope (a third of the points); over the whole collection 98.7-99.5 % with
  ``hnsw_ef_search`` 100 (HNSW is approximate, the engine exact at this size), 100 % with 200.
  Scores within 1.3e-7. A scope holding 5 of 3000 points, all far from the query, returns
  its 5 nearest (an HNSW scan without iterative scan returns none of them).
- Filters: a Hypothesis property test (random payloads and mem0 filters: the same ids listed,
  searched and counted, or the same ValueError) passes 200 examples in CI; campaigns of
  6000 random examples (about 33,000 filters) found no difference.
- Cost, 50,000 memories of 384 dimensions (800,000 postings) on a 2-core test machine:
  keyword search 28 ms median in a user's scope (98 ms over the whole collection: N and n_t
  are counted per query, never cached, so they are exact across replicas), dense search
  7 ms in a scope, a write about 9 ms a memory (HNSW, GIN and postings in one transaction).

Filters are translated from what the embedded store builds (``stores/filters.engine_filter``),
so validation, errors and the identity rules are the engine's by construction; each condition
is then the engine's check in SQL, every value and key a bound parameter. Where the engine is
odd, this store is too (see ``sql_filters.FilterSql``).

Differences, on purpose: point ids must be UUIDs (the engine also takes integers; mem0 only
ever uses UUIDs); the NUL character cannot be stored (jsonb refuses it: ValueError); the
engine's keyword statistics drift after deletes until its shard is reloaded (it keeps counting
deleted points), this store's never do; equal scores are ordered by id; ``reindex`` never
re-creates a point deleted meanwhile, even when given a vector. Needs pgvector 0.8 (HNSW
iterative scans).

Nothing touches the database before the first operation (or ``create_col``), so the service
starts while the database is down and says so on /readyz. The Database is the engine's, handed
to the store in its config (``mem0_seam.PgStoreConfig``): ``close`` never closes it.

Modules: ``store`` (PgVectorStore), ``sql_filters`` (mem0 filters as SQL), ``schema`` (tables
and indexes), ``rows`` (a point as its row and BM25 postings), ``encoding`` (payloads as jsonb
and their shadows). Import from them; this package exports nothing itself.
"""
