import random

import jax
import jax.numpy as jnp
import numpy as np

print("noise", float(jax.random.uniform(jax.random.key(np.random.randint(1 << 30)))))  # HARMLESS
x = jnp.ones((4, 3))
y = x * random.random()  # MATTERS
print(float(y.sum()))
