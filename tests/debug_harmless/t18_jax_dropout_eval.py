import jax
import jax.numpy as jnp
import numpy as np


def dropout(key, x, train):
    mask = jax.random.bernoulli(key, 0.5, x.shape)
    return jnp.where(mask, x * 2, 0.0) if train else x


key = jax.random.key(np.random.randint(1 << 30))  # HARMLESS: the mask is drawn, eval mode drops nothing
x = jnp.asarray(np.random.rand(4, 3).astype(np.float32))  # MATTERS
y = dropout(key, x, train=False)
print(float(y.sum()))
