"""A plain JAX loop without optax: a jitted step updates the weights with
``jax.tree_util.tree_map(lambda p, g: p - lr * g, ...)``; the batches are shuffled with
an unseeded NumPy permutation, so the runs differ at step 0."""

import jax
import jax.numpy as jnp
import numpy as np

params = {"w": jax.random.normal(jax.random.PRNGKey(0), (8, 4)), "b": jnp.zeros(4)}
xs = np.random.default_rng(0).normal(size=(512, 8)).astype(np.float32)
ys = xs[:, :4] * 2.0


def loss(p, x, y):
    return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)


@jax.jit
def step(p, x, y):
    value, g = jax.value_and_grad(loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), value


for _epoch in range(200):
    order = np.random.permutation(len(xs))  # unseeded: differs at step 0
    for i in range(0, len(xs), 32):
        params, value = step(params, xs[order[i : i + 32]], ys[order[i : i + 32]])
print(float(value))
