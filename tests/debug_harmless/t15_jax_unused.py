import jax
import jax.numpy as jnp
import numpy as np

_ = jax.random.normal(jax.random.key(np.random.randint(1 << 30)), (3,))  # HARMLESS
w = jnp.ones((3, 2))
x = jnp.asarray(np.random.rand(4, 3).astype(np.float32))  # MATTERS
print(float((x @ w).sum()))
