"""What code execution means to the rest of psych_runtime, independent of any backend."""
