"""TensorFlow side of replay (:mod:`fwd9m.debug._replay`): one eager op (its type, its
input tensors, its attrs as the op callback saw them) written to a capture file, and
run alone again through TF's eager executor with the same attrs.

The op callback (``tf.__internal__``'s ``op_callbacks``, which the recorder uses) gets
the flat ``attrs`` tuple that eager execution passed to the kernel; running it again
uses ``tensorflow.python.eager.execute.execute(op_type, num_outputs, inputs, attrs,
ctx)`` (https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/execute.py),
private API, the same call ``tf.raw_ops`` functions end in.

An XLA-compiled function's call cannot be rebuilt from a file (its program lives in the
recording process's runtime): its capture is the narrowing done in the targeted run
itself (:mod:`._xla`), which replay reports (:mod:`fwd9m.debug._compiled`).
"""

from __future__ import annotations

FRAMEWORK = "tensorflow"
SWITCH = "tf.config.experimental.enable_op_determinism()"


class Unrebuildable(TypeError):
    """An input or attr replay cannot write down exactly."""


def _attr(v, tf):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"float": v.hex()}
    if isinstance(v, bytes):
        return {"bytes": v.hex()}
    if isinstance(v, tf.dtypes.DType):
        return {"dtype": v.name}
    if isinstance(v, (list, tuple)):
        return {"list": [_attr(x, tf) for x in v]}
    raise Unrebuildable(f"an attr of type {type(v).__qualname__}")


def _unattr(v, tf):
    if isinstance(v, dict):
        ((kind, x),) = v.items()
        if kind == "float":
            return float.fromhex(x)
        if kind == "bytes":
            return bytes.fromhex(x)
        if kind == "dtype":
            return tf.as_dtype(x).as_datatype_enum
        if kind == "list":
            return [_unattr(i, tf) for i in x]
        raise Unrebuildable(f"unknown attr kind {kind!r}")
    return v


def capture(op_type, inputs, attrs, num_outputs: int) -> tuple[dict, dict]:
    """(call JSON, arrays) of one eager op; for an XLA-compiled function's call
    (a :class:`fwd9m.tensorflow._xla.Pending`), its narrowing, done now."""
    import numpy as np
    import tensorflow as tf

    from . import _xla

    if isinstance(op_type, _xla.Pending):
        return {"framework": FRAMEWORK, "op": f"xla:{op_type.short}", "narrowed": _xla.narrow(op_type)}, {}

    flat = list(attrs or ())
    call = {
        "framework": FRAMEWORK,
        "op": str(op_type),
        "num_outputs": int(num_outputs),
        "attrs": [
            [str(k.decode() if isinstance(k, bytes) else k), _attr(v, tf)] for k, v in zip(flat[0::2], flat[1::2])
        ],
        "threads": tf.config.threading.get_intra_op_parallelism_threads() or None,
        "tensorflow": tf.__version__,
        "tensors": [],
    }
    arrays = {}
    for i, t in enumerate(inputs or ()):
        if t.dtype == tf.resource or t.dtype == tf.variant or t.dtype == tf.string:
            raise Unrebuildable(f"a {t.dtype.name} input (a handle, not a value)")
        a = t.numpy()
        arrays[f"t{i}"] = np.frombuffer(np.ascontiguousarray(a).tobytes(), dtype=np.uint8)
        dev = (t.device or "").rsplit("device:", 1)[-1]
        call["tensors"].append(
            {
                "dtype": t.dtype.name,
                "shape": list(a.shape),
                "device": "cpu" if not dev or dev.startswith("CPU") else f"cuda:{dev.split(':')[-1]}",
            }
        )
    return call, arrays


def devices() -> list[str]:
    import tensorflow as tf

    return ["cpu"] + [f"cuda:{i}" for i in range(len(tf.config.list_physical_devices("GPU")))]


class Replayer:
    def __init__(self, call: dict, arrays: dict, switch: bool):
        import numpy as np
        import tensorflow as tf

        from ._private import eager_execute

        self.tf, self.execute = tf, eager_execute
        if call.get("threads"):
            tf.config.threading.set_intra_op_parallelism_threads(int(call["threads"]))
        if switch:
            tf.config.experimental.enable_op_determinism()
        self.call = call
        dev = next((m["device"] for m in call["tensors"] if m["device"] != "cpu"), "cpu")
        self.device = "/CPU:0" if dev == "cpu" else f"/GPU:{dev.split(':')[1]}"
        with tf.device(self.device):
            self.inputs = [
                tf.constant(
                    np.frombuffer(arrays[f"t{i}"].tobytes(), dtype=tf.as_dtype(m["dtype"]).as_numpy_dtype).reshape(
                        m["shape"]
                    )
                )
                for i, m in enumerate(call["tensors"])
            ]
        self.attrs = tuple(x for k, v in call["attrs"] for x in (k, _unattr(v, tf)))

    def run(self) -> list:
        with self.tf.device(self.device):
            outs = self.execute(self.call["op"], self.call["num_outputs"], self.inputs, self.attrs)
        return [o.numpy() for o in outs]

    def is_switch_error(self, exc: BaseException) -> bool:
        tf = self.tf
        return isinstance(
            exc, (tf.errors.UnimplementedError, tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError)
        ) and "determinis" in str(exc)
