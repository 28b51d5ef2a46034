"""Flax (linen) + optax with flax.training.train_state.TrainState, NOT reproducible: the
initial parameters come from a key seeded with the clock. The script prints only its
progress, so the difference lives in the final TrainState (a pytree of arrays)."""
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.relu(nn.Dense(16)(x)))


x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
y = x.sum(axis=1, keepdims=True)
model = MLP()
params = model.init(jax.random.PRNGKey(time.time_ns() % 2**31), jnp.zeros((1, 8)))["params"]
state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.01))
del params


@jax.jit
def train_step(state, xb, yb):
    def loss_fn(p):
        return jnp.mean((state.apply_fn({"params": p}, xb) - yb) ** 2)

    grads = jax.grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads)


for epoch in range(3):
    for i in range(0, len(x), 16):
        state = train_step(state, x[i:i + 16], y[i:i + 16])
    print(f"epoch {epoch} done")
