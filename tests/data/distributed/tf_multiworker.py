"""MultiWorkerMirroredStrategy across local processes (one per TF_CONFIG task, loopback
ports) with a custom training loop, for tests/test_distributed_launch.py.

Each process: fwd9m.enable_determinism(seed=0), its rank from fwd9m.distributed.rank_info()
(TF_CONFIG), a tf.data pipeline with a shuffle seed shared by every worker, sharded by
the strategy; gradients all-reduced across workers. Prints its rank and a digest of the
final weights (identical on every worker while the replicas stay in sync). Keras 3's
Model.fit is not used: under MultiWorkerMirroredStrategy it fails here converting a
PerReplica value (Keras 3.15.1, TF 2.21).
"""

import numpy as np
import tensorflow as tf

import fwd9m
import fwd9m.distributed as fd
from fwd9m.fingerprint import digest

info = fd.rank_info()
fwd9m.enable_determinism(seed=0)
strategy = tf.distribute.MultiWorkerMirroredStrategy()
x = np.random.RandomState(0).rand(128, 8).astype("float32")
y = x.sum(1, keepdims=True) + 0.1 * np.random.RandomState(1).randn(128, 1).astype("float32")
shuffle_seed = fd.seeder(0, info=info).seed("shuffle", shared=True, bits=31)  # same on every worker
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(128, seed=shuffle_seed).batch(32)
dist_ds = strategy.experimental_distribute_dataset(ds)
with strategy.scope():
    w = tf.Variable(tf.random.normal([8, 1], seed=1), aggregation=tf.VariableAggregation.MEAN)
    b = tf.Variable(tf.zeros([1]), aggregation=tf.VariableAggregation.MEAN)


@tf.function
def step(xb, yb):
    def replica_fn(xr, yr):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(xr, w) + b - yr))
        grads = tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.MEAN, tape.gradient(loss, [w, b]))
        w.assign_sub(0.05 * grads[0])
        b.assign_sub(0.05 * grads[1])
        return loss

    return strategy.run(replica_fn, args=(xb, yb))


for _epoch in range(2):
    for xb, yb in dist_ds:
        step(xb, yb)
weights = np.concatenate([w.numpy().ravel(), b.numpy().ravel()])
print(f"rank {info.rank} of {info.world_size} ({info.role}); replicas {strategy.num_replicas_in_sync}; "
      f"weights {digest(weights):016x}", flush=True)
