"""Broken: the seed is a command-line option whose default is the clock
(seed = args.seed if given, else int(time.time())); run without --seed, the PRNGKey,
and so the initial weights and the noise, differ in every run."""
import argparse
import time

import jax
import jax.numpy as jnp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    key = jax.random.PRNGKey(seed)
    key, wkey = jax.random.split(key)
    w = jax.random.normal(wkey, (3,))
    x = jnp.linspace(-1, 1, 30).reshape(10, 3)
    y = x @ jnp.array([0.3, -1.0, 2.0])
    for _ in range(args.steps):
        key, nkey = jax.random.split(key)
        noisy = x + 0.01 * jax.random.normal(nkey, x.shape)
        w = w - 0.1 * jax.grad(lambda w: jnp.mean((noisy @ w - y) ** 2))(w)
    print("w", w.tolist())


if __name__ == "__main__":
    main()
