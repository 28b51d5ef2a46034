"""A JAX/optax loop with dropout whose resume is exact: every 3 steps an orbax checkpoint
holds the parameters, the optimizer state, the step AND the dropout key."""
import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp

p = argparse.ArgumentParser()
p.add_argument("--resume", action="store_true")
p.add_argument("--steps", type=int, default=8)
args = p.parse_args()

data = np.random.default_rng(0)
x_all = data.normal(size=(64, 8)).astype(np.float32)
y_all = data.normal(size=(64, 1)).astype(np.float32)
init = jax.random.split(jax.random.key(0))
params = {"w1": jax.random.normal(init[0], (8, 16)) * 0.3, "w2": jax.random.normal(init[1], (16, 1)) * 0.3}
tx = optax.adam(1e-2)
opt_state = tx.init(params)
key = jax.random.key(1)  # the dropout key


def loss_fn(params, key, x, y):
    h = jax.nn.relu(x @ params["w1"])
    keep = jax.random.bernoulli(key, 0.5, h.shape)
    h = jnp.where(keep, h / 0.5, 0.0)
    return jnp.mean((h @ params["w2"] - y) ** 2)


@jax.jit
def train_step(params, opt_state, key, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, key, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


ckpt_dir = os.path.abspath("ckpt")
step = 0
if args.resume and os.path.isdir(ckpt_dir) and os.listdir(ckpt_dir):
    last = max(int(n) for n in os.listdir(ckpt_dir) if n.isdigit())
    target = {"params": params, "opt_state": opt_state, "key": jax.random.key_data(key), "step": 0}
    restored = ocp.StandardCheckpointer().restore(os.path.join(ckpt_dir, str(last)), target)
    params, opt_state, step = restored["params"], restored["opt_state"], int(restored["step"])
    key = jax.random.wrap_key_data(restored["key"])
    print(f"resumed from step {step}")

while step < args.steps:
    i = step % 8
    key, sub = jax.random.split(key)
    params, opt_state, loss = train_step(params, opt_state, sub, x_all[i * 8 : i * 8 + 8], y_all[i * 8 : i * 8 + 8])
    step += 1
    print(f"step {step} loss {float(loss):.8f}")
    if step % 3 == 0:
        state = {"params": params, "opt_state": opt_state, "key": jax.random.key_data(key), "step": step}
        with ocp.StandardCheckpointer() as ckptr:
            ckptr.save(os.path.join(ckpt_dir, str(step)), state)
np.savez("final.npz", **{k: np.asarray(v) for k, v in params.items()})
