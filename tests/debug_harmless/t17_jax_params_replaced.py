import jax
import jax.numpy as jnp
import numpy as np

params = jax.random.normal(jax.random.key(np.random.randint(1 << 30)), (3, 1))  # HARMLESS: replaced
params = jnp.ones((3, 1))
x = jnp.asarray(np.random.rand(4, 3).astype(np.float32))  # MATTERS


def loss(p, x):
    return ((x @ p) ** 2).mean()


params = params - 0.1 * jax.grad(loss)(params, x)
print(float(params.sum()))
