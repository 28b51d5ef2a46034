"""A plain JAX loop without optax: a jitted gradient, the update
(``jax.tree_util.tree_map(lambda p, g: p - lr * g, ...)``) applied outside it, eagerly;
the batches are shuffled with an unseeded NumPy permutation, so the runs differ at step 0."""

import jax
import jax.numpy as jnp
import numpy as np

params = {"w": jax.random.normal(jax.random.PRNGKey(0), (8, 4)), "b": jnp.zeros(4)}
xs = np.random.default_rng(0).normal(size=(512, 8)).astype(np.float32)
ys = xs[:, :4] * 2.0


def loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)


grad = jax.jit(jax.grad(loss))
for _epoch in range(40):
    order = np.random.permutation(len(xs))  # unseeded: differs at step 0
    for i in range(0, len(xs), 32):
        g = grad(params, xs[order[i : i + 32]], ys[order[i : i + 32]])
        params = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, g)
print(float(loss(params, xs, ys)))
