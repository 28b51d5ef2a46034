"""2-replica tf.distribute.MirroredStrategy Keras training on 2 logical CPU devices,
for tests/test_distributed_launch.py.

--enable   call fwd9m.enable_determinism(seed=0) first (otherwise nothing is seeded)
--sync-bn  BatchNormalization(synchronized=True) (otherwise each replica keeps its own
           moving statistics, which the replica check reports)
--drift    after training, shift one replica's copy of the first kernel and report what
           fwd9m.distributed.check_replicas finds (the planted drift)
Prints the replica checks and a digest of the final weights; keeps the model global.
"""

import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import numpy as np  # noqa: E402

import fwd9m  # noqa: E402
import fwd9m.distributed as fd  # noqa: E402
from fwd9m.fingerprint import digest  # noqa: E402

if "--enable" in sys.argv:
    fwd9m.enable_determinism(seed=0)
import keras  # noqa: E402

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
x = np.random.RandomState(0).rand(128, 8).astype("float32")
y = (x.sum(1, keepdims=True) > 4).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(128, seed=1).batch(32)
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dropout(0.3),
                              keras.layers.BatchNormalization(synchronized="--sync-bn" in sys.argv),
                              keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
check = fd.keras_callback(every=2, on_mismatch="record")
model.fit(ds, epochs=2, verbose=0, callbacks=[check])
print(f"replicas: {strategy.num_replicas_in_sync}; checks during fit: {check.monitor.checks}, "
      f"first divergence: {check.monitor.first}")
print("weights", f"{digest(np.concatenate([w.ravel() for w in model.get_weights()])):016x}")
if "--drift" in sys.argv:
    kernel = model.layers[0].kernel.value  # the MirroredVariable behind the Keras variable
    kernel.values[1].assign_add(tf.fill(kernel.shape, 1e-3))  # replica 1 only
    print(fd.check_replicas(model, step=8).render())
