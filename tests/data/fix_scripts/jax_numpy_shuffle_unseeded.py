"""Broken: a JAX loop seeds its PRNGKey, but shuffles the mini-batches with the global
NumPy RNG (np.random.permutation), never seeded, so the batch order and the trained
weights differ between runs."""
import jax
import jax.numpy as jnp
import numpy as np

key = jax.random.PRNGKey(0)
w = jax.random.normal(key, (2,))
xs = np.linspace(-1, 1, 128, dtype=np.float32).reshape(64, 2)
ys = xs @ np.array([1.5, -0.5], dtype=np.float32)


@jax.jit
def update(w, x, y):
    grad = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.1 * grad


for epoch in range(3):
    order = np.random.permutation(len(xs))  # unseeded
    for start in range(0, len(xs), 16):
        b = order[start : start + 16]
        w = update(w, xs[b], ys[b])
    print("epoch", epoch, "w", np.asarray(w).tolist())
