"""A plain-JAX MLP with dropout on scikit-learn's digits, trained with explicit PRNG keys.

The broken variant (broken.py) had two mistakes:
1. The mini-batch order comes from ``np.random.default_rng()`` without a seed, which
   takes fresh entropy from the operating system in every process
   (https://numpy.org/doc/stable/reference/random/generator.html#numpy.random.default_rng),
   so every run trains on a different sequence of batches.
2. One key is used for the initial weights and again for dropout at every step. JAX
   keys are not stateful: the same key gives the same numbers
   (https://docs.jax.dev/en/latest/random-numbers.html), so the dropout mask is the
   same at every step and correlated with the initial weights. This does not make runs
   differ, it makes them wrong; ``fwd9m lint`` finds it.

Fixed: one seed, and one key per use: split once into an initialisation key and a
dropout key, and fold the step number into the dropout key; the batch order comes from
a generator seeded with ``fwd9m.derive_seed(seed, "batches")``.

Run:  python examples/jax_keys/fixed.py [--out weights.npz]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits

import fwd9m

SEED = 0


def init_params(key, sizes=(64, 32, 10)):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (n_in, n_out)) * jnp.sqrt(2.0 / n_in),
                       "b": jnp.zeros(n_out)})
    return params


def loss_fn(params, x, y, key, rate=0.2):
    h = jax.nn.relu(x @ params[0]["w"] + params[0]["b"])
    keep = jax.random.bernoulli(key, 1.0 - rate, h.shape)
    h = jnp.where(keep, h / (1.0 - rate), 0.0)
    logits = h @ params[1]["w"] + params[1]["b"]
    return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])


@jax.jit
def train_step(params, x, y, key, lr=0.1):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y, key)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="save the final weights to this .npz file")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    digits = load_digits()
    x = jnp.asarray(digits.data / 16.0, dtype=jnp.float32)
    y = jnp.asarray(digits.target)

    init_key, dropout_key = jax.random.split(jax.random.key(SEED))  # FIX 2: a key per use
    params = init_params(init_key)
    batches = np.random.default_rng(fwd9m.derive_seed(SEED, "batches"))  # FIX 1: seeded
    for step in range(args.steps):
        idx = batches.choice(len(y), 128, replace=False)
        step_key = jax.random.fold_in(dropout_key, step)
        params, loss = train_step(params, x[idx], y[idx], step_key)

    print(f"final loss {float(loss)!r}")
    weights = {f"layer{i}.{k}": np.asarray(v) for i, p in enumerate(params) for k, v in p.items()}
    for name, value in weights.items():
        print(f"{name:<10} shape={str(value.shape):<9} sum={float(value.sum())!r}")
    if args.out:
        np.savez(args.out, **weights)


if __name__ == "__main__":
    main()
