"""Broken: a Flax/optax training loop whose PRNGKey comes from the clock
(jax.random.PRNGKey(int(time.time()))): the parameters' initialization and the dropout
keys differ in every run."""
import time

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.relu(nn.Dense(16)(x))
        x = nn.Dropout(0.2, deterministic=not train)(x)
        return nn.Dense(1)(x)


def main():
    key = jax.random.PRNGKey(int(time.time()))
    key, init_key, data_key = jax.random.split(key, 3)
    x = jax.random.normal(data_key, (64, 3))
    y = x.sum(axis=1, keepdims=True)
    model = MLP()
    params = model.init(init_key, x, train=False)
    tx = optax.adam(1e-2)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, key):
        def loss_fn(p):
            pred = model.apply(p, x, train=True, rngs={"dropout": key})
            return jnp.mean((pred - y) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    for i in range(10):
        key, sub = jax.random.split(key)
        params, opt_state, loss = step(params, opt_state, sub)
    print("loss", float(loss))


if __name__ == "__main__":
    main()
