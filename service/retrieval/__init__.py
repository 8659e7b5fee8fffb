"""How memories are found: what is indexed, keyword terms, fusion, offline embedders and their
language centring, and re-indexing when the index settings change."""
