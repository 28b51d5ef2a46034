import jax
import jax.numpy as jnp
import numpy as np

print("seed check", float(jax.random.normal(jax.random.key(np.random.randint(1 << 30)), ())))  # HARMLESS


@jax.jit
def step(w, x):
    return w - 0.1 * jax.grad(lambda w: ((x @ w) ** 2).mean())(w)


w = jnp.ones((3, 1))
x = jnp.asarray(np.random.rand(4, 3).astype(np.float32))  # MATTERS
w = step(w, x)
print(float(w.sum()))
