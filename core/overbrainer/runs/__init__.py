"""Training runs on disk: records, ids, the project lock, listing."""
