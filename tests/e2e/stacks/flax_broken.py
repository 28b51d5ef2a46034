"""Flax (linen) + optax, NOT reproducible: everything JAX is keyed, but the epoch shuffle
uses NumPy's global generator, which nothing seeds (np.random.permutation)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.relu(nn.Dense(16)(x))
        x = nn.Dropout(0.2, deterministic=not train)(x)
        return nn.Dense(1)(x)


data_rng = np.random.default_rng(0)
x = data_rng.normal(size=(64, 8)).astype(np.float32)
y = x.sum(axis=1, keepdims=True)

model = MLP()
key = jax.random.PRNGKey(0)
key, init_key = jax.random.split(key)
params = model.init(init_key, jnp.zeros((1, 8)), train=False)["params"]
tx = optax.adam(1e-2)
opt_state = tx.init(params)


@jax.jit
def train_step(params, opt_state, xb, yb, dropout_key):
    def loss_fn(p):
        pred = model.apply({"params": p}, xb, train=True, rngs={"dropout": dropout_key})
        return jnp.mean((pred - yb) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


for epoch in range(3):
    order = np.random.permutation(len(x))
    for i in range(0, len(x), 16):
        idx = order[i:i + 16]
        key, dropout_key = jax.random.split(key)
        params, opt_state, loss = train_step(params, opt_state, x[idx], y[idx], dropout_key)
    print(f"epoch {epoch} loss {float(loss):.7f}")
with open("params.msgpack", "wb") as f:
    f.write(serialization.to_bytes(params))
