"""tf.distribute.MirroredStrategy over 2 logical CPUs, NOT reproducible: nothing sets a
global or an op seed, so the model's initial weights and the tf.data shuffle order
change from run to run."""
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
GLOBAL_BATCH = 16
x = tf.random.stateless_normal((64, 8), seed=[1, 2])
y = tf.reduce_sum(x, axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64).batch(GLOBAL_BATCH)
dist_dataset = strategy.experimental_distribute_dataset(dataset)

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input(shape=(8,)), tf.keras.layers.Dense(16, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.05)


@tf.function
def train_step(inputs):
    def step_fn(batch):
        xb, yb = batch
        with tf.GradientTape() as tape:
            per_example = tf.reduce_mean(tf.square(model(xb, training=True) - yb), axis=1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return strategy.run(step_fn, args=(inputs,))


for epoch in range(2):
    for batch in dist_dataset:
        per_replica = train_step(batch)
    for replica, loss in enumerate(strategy.experimental_local_results(per_replica)):
        print(f"epoch {epoch} replica {replica} loss {float(loss):.7f}")
model.save_weights("mirrored.weights.h5")
