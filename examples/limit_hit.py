# A model-written program that asks for far more memory than its terms allow.
# The address-space limit surfaces as an ordinary MemoryError, and the result
# names the limit that ended it (limit_hit: memory_bytes).
chunks = []
for i in range(64):
    chunks.append(bytearray(64 * 1024 * 1024))  # 64 MiB each
    print(f"holding {len(chunks) * 64} MiB")
return len(chunks)
