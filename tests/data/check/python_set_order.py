"""The result depends on the iteration order of a set of strings, which follows the
strings' hashes: different in every interpreter unless PYTHONHASHSEED is fixed."""
words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"}
total = 0.0
for w in words:
    total = total * 1.1 + len(w) / 7
print("first word:", next(iter(words)))
print(f"total: {total!r}")
