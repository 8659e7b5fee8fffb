"""mem0 underneath the service: the engine, its write pipeline, mem0's config and its seam."""
