"""TensorFlow side of the probe child (:mod:`fwd9m.probe._child`).

The switch is ``tf.config.experimental.enable_op_determinism()``
(https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism);
an op without a deterministic kernel then raises ``UnimplementedError`` (or
``InvalidArgumentError``, ``FailedPreconditionError`` for Timestamp) naming determinism. Threads:
``tf.config.threading.set_intra_op_parallelism_threads``.
"""

from __future__ import annotations

from typing import Any

_tf: Any = None


def child_env(switch: bool, threads: int) -> dict[str, str]:
    return {"TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": str(threads)}


def setup(device: str, switch: bool, threads: int) -> list[str]:
    global _tf
    import tensorflow as tf

    _tf = tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    if switch:
        tf.config.experimental.enable_op_determinism()
    gpus = tf.config.list_physical_devices("GPU")
    return ["cpu"] + [f"cuda:{i}" for i in range(len(gpus))]


def _tf_device(device: str) -> str:
    return "/CPU:0" if device == "cpu" else f"/GPU:{device.split(':', 1)[1]}"


def namespace(device: str) -> dict:
    tf = _tf

    def grad(fn, wrt):
        xs = wrt if isinstance(wrt, tuple) else (wrt,)
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = fn()
        gy = tf.random.stateless_normal(tf.shape(y), seed=[12, 34], dtype=y.dtype)
        got = tape.gradient(y, xs, output_gradients=gy)
        return tuple(got) if isinstance(wrt, tuple) else got[0]

    return {"tf": tf, "grad": grad, "device": device}


def convert(arrays: dict, device: str) -> dict:
    with _tf.device(_tf_device(device)):
        return {n: _tf.identity(_tf.constant(a)) for n, a in arrays.items()}


def placement(device: str):
    return _tf.device(_tf_device(device))


def to_numpy(value) -> list:
    tf = _tf
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in to_numpy(v)]
    if isinstance(value, tf.IndexedSlices):
        value = tf.convert_to_tensor(value)
    return [value.numpy()]


def wait(value, device: str) -> None:
    """A GPU op's time ends when its result is read back (that copy is timed too); CPU
    eager ops have finished when they return."""
    if device != "cpu":
        to_numpy(value)


def is_switch_error(exc: BaseException) -> bool:
    tf = _tf
    return isinstance(
        exc, (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError)
    ) and "determinis" in str(exc)
