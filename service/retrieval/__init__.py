"""How memories are found: what is indexed, keyword terms, fusion, the offline embedders'
language centring, and re-indexing when the index settings change."""
