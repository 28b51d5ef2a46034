"""Reproducible, resumable data loading for PyTorch ``DataLoader`` and ``tf.data``.

PyTorch (facts from ``torch/utils/data/dataloader.py`` and ``_utils/worker.py``,
https://github.com/pytorch/pytorch/tree/main/torch/utils/data):

- Each ``iter(loader)`` draws a base seed from ``loader.generator``, or from the
  *global* torch RNG when ``generator`` is None (so an unseeded loader also shifts the
  dropout stream). Worker ``i`` then seeds Python ``random`` and torch with
  ``base_seed + i`` and NumPy's global RNG from it, but *not* NumPy ``Generator``s or
  ``random.Random`` objects stored on the dataset: forked workers start with copies of
  the same generator and draw the same "random" augmentations. :func:`worker_init_fn`
  reseeds those per worker.
- ``shuffle=True`` builds a ``RandomSampler(generator=loader.generator)``.

For exact resume pass ``generator=torch_generator(seed)``; at an epoch boundary
restore that generator (``fwd9m.rng.register(loader, "loader")``). For a stop in the
middle of an epoch use :class:`ResumableSampler` and :class:`SampleSeeded`: every
sample's randomness is then a function of ``(seed, epoch, index)``, independent of the
number of workers, prefetching and where the run stopped.

``torchdata``'s ``StatefulDataLoader`` (torchdata 0.11.0 on PyPI, ``torch>=2``) saves the
sampler position and the workers' base seed, and the dataset's own state only if the
dataset implements ``state_dict``; it does not save the workers' Python/NumPy/torch RNG
states (read in torchdata 0.11.0 ``stateful_dataloader/stateful_dataloader.py`` and
``worker.py``, https://github.com/pytorch/data), so augmentation drawn from worker
RNGs restarts on resume. :class:`SampleSeeded` makes that moot and also works with it.

tf.data: :func:`tf_epochs` builds the pipeline of each epoch from the epoch number, so a
resumed run rebuilds epoch ``k`` exactly; inside, shuffle with
``tf.random.experimental.stateless_shuffle`` or a seeded ``shuffle(...,
reshuffle_each_iteration=False)`` and augment with ``tf.random.stateless_*`` ops whose
seed is ``tf.random.fold_in(epoch_seed, element_index)`` (stateless ops are pure
functions of their seed, so parallel ``map`` stays exact:
https://www.tensorflow.org/api_docs/python/tf/random/stateless_uniform).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

from .errors import ConfigurationError
from .seed import derive_seed

__all__ = [
    "worker_init_fn",
    "torch_generator",
    "reseed_dataset_generators",
    "SampleSeeded",
    "ResumableSampler",
    "tf_shuffle_seed",
    "tf_stateless_seed",
    "tf_epochs",
]


# ------------------------------------------------------------------------- PyTorch


def _generator_types() -> tuple[type, ...]:
    import random

    types: list[type] = [random.Random]
    if "numpy" in sys.modules:
        np = sys.modules["numpy"]
        types += [np.random.Generator, np.random.RandomState]
    if "torch" in sys.modules:
        types.append(sys.modules["torch"].Generator)
    return tuple(types)


def _generator_attrs(obj: Any) -> Iterator[tuple[str, Any]]:
    """(path, generator) for generator attributes of ``obj`` and its ``.dataset`` chain."""
    types = _generator_types()
    seen: set[int] = set()
    prefix = ""
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        for name, value in sorted(getattr(obj, "__dict__", {}).items()):
            if name != "dataset" and isinstance(value, types):
                yield prefix + name, value
        obj = getattr(obj, "dataset", None)
        prefix += "dataset."


def reseed_dataset_generators(dataset: Any, seed: int) -> list[str]:
    """Reseed every ``random.Random``, NumPy ``Generator``/``RandomState`` and
    ``torch.Generator`` attribute of ``dataset`` (and of ``dataset.dataset``...) from
    ``derive_seed(seed, attribute_path)``. Returns the attribute paths reseeded."""
    from .rng import reseed

    done = []
    for path, gen in _generator_attrs(dataset):
        reseed(gen, derive_seed(seed, "fwd9m.dataset-attr", path))
        done.append(path)
    return done


def worker_init_fn(worker_id: int) -> None:
    """``DataLoader(worker_init_fn=fwd9m.data.worker_init_fn)``: distinct, reproducible
    generators on the dataset in each worker.

    Reseeds the dataset's generator attributes (see :func:`reseed_dataset_generators`)
    from the worker's seed (``torch.utils.data.get_worker_info().seed``, which is the
    loader's base seed + ``worker_id``). PyTorch already seeds the worker's Python,
    NumPy-global and torch RNGs. A module-level function, so it pickles for the
    ``spawn`` start method. Call it from your own ``worker_init_fn`` to combine both.
    """
    import torch.utils.data

    info = torch.utils.data.get_worker_info()
    if info is None:
        raise ConfigurationError(
            "fwd9m.data.worker_init_fn must run inside a DataLoader worker (pass it as DataLoader(worker_init_fn=...))"
        )
    reseed_dataset_generators(info.dataset, info.seed)


def torch_generator(seed: int, *keys: Any) -> Any:
    """A CPU ``torch.Generator`` seeded with ``derive_seed(seed, "fwd9m.loader", *keys)``.

    Pass it as ``DataLoader(generator=...)`` so shuffling and worker seeds come from it
    and not from the global torch RNG (which dropout also uses).
    """
    import torch

    return torch.Generator().manual_seed(derive_seed(seed, "fwd9m.loader", *keys))


class SampleSeeded:
    """Wrap a map-style dataset so each sample's randomness depends only on
    ``(seed, epoch, index)``.

    Around ``dataset[index]`` the global Python, NumPy and torch RNGs (those imported)
    are seeded with ``derive_seed(seed, "fwd9m.sample", epoch, index)`` and restored
    afterwards, and the dataset's generator attributes are reseeded from it. The result
    is the same whatever the number of workers, their order, prefetching, or a resume in
    the middle of an epoch.

    The epoch comes from :meth:`set_epoch` (picked up by workers created at each
    ``iter(loader)``; with ``persistent_workers=True`` use
    ``ResumableSampler(with_epoch=True)``, whose ``(epoch, index)`` indices carry it).

    Args:
        dataset: a map-style dataset.
        seed: base seed.
        seed_globals: which global RNGs to seed per sample; drop those your
            augmentation does not use to save time.

    Cost: seeding the globals per sample, plus saving and restoring them when
    ``num_workers=0`` (then they belong to the training loop): about 0.4 ms per
    sample there, most of it NumPy's ``get_state``/``set_state`` of the legacy global
    RNG; in workers nothing is restored (``benchmarks/bench_rng.py``).
    """

    def __init__(
        self, dataset: Any, seed: int, *, seed_globals: tuple[str, ...] = ("python", "numpy", "torch")
    ) -> None:
        unknown = set(seed_globals) - {"python", "numpy", "torch"}
        if unknown:
            raise ConfigurationError(f"seed_globals: unknown {sorted(unknown)}; choose from 'python', 'numpy', 'torch'")
        self.dataset = dataset
        self.seed = int(seed)
        self.seed_globals = tuple(seed_globals)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:  # forward dataset attributes
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __getitem__(self, index: Any) -> Any:
        epoch = self.epoch
        if isinstance(index, tuple) and len(index) == 2:
            epoch, index = index
        s = derive_seed(self.seed, "fwd9m.sample", int(epoch), int(index))
        with _globals_seeded(s, self.seed_globals):
            reseed_dataset_generators(self.dataset, s)
            return self.dataset[index]


class _globals_seeded:
    """Seed Python/NumPy/torch globals (imported ones) with ``s``; restore on exit."""

    def __init__(self, s: int, which: tuple[str, ...]) -> None:
        self.s = s
        self.which = which

    def __enter__(self) -> None:
        import random

        np = sys.modules.get("numpy") if "numpy" in self.which else None
        torch = sys.modules.get("torch") if "torch" in self.which else None
        # In a DataLoader worker nothing else uses these globals between samples (each
        # sample reseeds them), so only the main process (num_workers=0) pays to restore.
        in_worker = torch is not None and torch.utils.data.get_worker_info() is not None
        self.saved: list = []
        py = "python" in self.which
        if not in_worker:
            if py:
                self.saved.append(("python", random.getstate()))
            if np is not None:
                self.saved.append(("numpy", np.random.get_state()))
            if torch is not None:
                self.saved.append(("torch", torch.get_rng_state()))
        if py:
            random.seed(self.s)
        if np is not None:
            np.random.seed(self.s & 0xFFFFFFFF)
        if torch is not None:
            torch.default_generator.manual_seed(self.s)

    def __exit__(self, *exc: Any) -> None:
        import random

        for name, st in self.saved:
            if name == "python":
                random.setstate(st)
            elif name == "numpy":
                sys.modules["numpy"].random.set_state(st)
            else:
                sys.modules["torch"].set_rng_state(st)


class ResumableSampler:
    """A shuffling sampler that can stop and resume anywhere in an epoch.

    Epoch ``e``'s order is ``torch.randperm(n)`` drawn from a generator seeded with
    ``derive_seed(seed, "fwd9m.sampler", e)``, so it depends only on ``(seed, e)``.
    Tell it how many samples the training loop has *consumed* with :meth:`advance`
    (the DataLoader prefetches ahead, so the sampler cannot count them itself);
    :meth:`state_dict` then records ``(epoch, consumed)`` and a restored sampler skips
    the consumed samples of that epoch.

    Args:
        data_source: a sized dataset or an int length.
        seed: base seed.
        shuffle: False for ``0..n-1`` in order.
        with_epoch: yield ``(epoch, index)`` tuples (for :class:`SampleSeeded` with
            persistent workers) instead of ints.

    Use: ``sampler.set_epoch(epoch)`` at the start of each epoch (it resets the
    position only when the epoch changes, so it is a no-op right after a restore).
    """

    def __init__(self, data_source: Any, *, seed: int, shuffle: bool = True, with_epoch: bool = False) -> None:
        self.n = data_source if isinstance(data_source, int) else len(data_source)
        self.seed = int(seed)
        self.shuffle = shuffle
        self.with_epoch = with_epoch
        self.epoch = 0
        self.consumed = 0

    def set_epoch(self, epoch: int) -> None:
        if int(epoch) != self.epoch:
            self.epoch = int(epoch)
            self.consumed = 0

    def advance(self, n_samples: int) -> None:
        """Record that the training loop used ``n_samples`` more samples this epoch."""
        self.consumed = min(self.n, self.consumed + int(n_samples))

    def order(self, epoch: int | None = None) -> list[int]:
        """The full index order of ``epoch`` (default: the current one)."""
        import torch

        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator()
        g.manual_seed(derive_seed(self.seed, "fwd9m.sampler", self.epoch if epoch is None else int(epoch)))
        return torch.randperm(self.n, generator=g).tolist()

    def __iter__(self) -> Iterator[Any]:
        rest = self.order()[self.consumed :]
        if self.with_epoch:
            return iter([(self.epoch, i) for i in rest])
        return iter(rest)

    def __len__(self) -> int:
        return self.n - self.consumed

    def state_dict(self) -> dict:
        return {"seed": self.seed, "epoch": self.epoch, "consumed": self.consumed, "n": self.n, "shuffle": self.shuffle}

    def load_state_dict(self, sd: dict) -> None:
        if int(sd["n"]) != self.n or int(sd["seed"]) != self.seed or bool(sd["shuffle"]) != self.shuffle:
            raise ConfigurationError(
                f"sampler state is for n={sd['n']}, seed={sd['seed']}, "
                f"shuffle={sd['shuffle']}; this sampler has n={self.n}, seed={self.seed}, "
                f"shuffle={self.shuffle}. Build the sampler as in the saved run."
            )
        self.epoch = int(sd["epoch"])
        self.consumed = int(sd["consumed"])


# ------------------------------------------------------------------------- tf.data


def tf_shuffle_seed(seed: int, epoch: int, *keys: Any) -> int:
    """A 31-bit op seed for ``ds.shuffle(buf, seed=..., reshuffle_each_iteration=False)``
    when the pipeline is rebuilt each epoch. TensorFlow reduces op seeds modulo
    ``2**31 - 1`` (``_truncate_seed``, tensorflow/python/framework/random_seed.py)."""
    return derive_seed(seed, "fwd9m.tf-shuffle", int(epoch), *keys, bits=31)


def tf_stateless_seed(seed: int, *keys: Any) -> Any:
    """A ``[2]`` int64 seed tensor for ``tf.random.stateless_*`` ops from
    ``derive_seed(seed, "fwd9m.tf-stateless", *keys)``; fold in per-element data in the
    graph with ``tf.random.fold_in(s, index)``."""
    import tensorflow as tf

    v = derive_seed(seed, "fwd9m.tf-stateless", *keys, bits=126)
    return tf.constant([v >> 63, v & (2**63 - 1)], dtype=tf.int64)


def tf_epochs(build: Callable[[Any, Any], Any], *, seed: int, epochs: int, first_epoch: Any = 0) -> Any:
    """A dataset that runs ``build(epoch, epoch_seed)`` for each epoch in turn.

    ``build`` gets ``epoch`` (int64 scalar tensor) and ``epoch_seed`` (a ``[2]`` int64
    stateless seed, ``tf.random.fold_in(tf_stateless_seed(seed), epoch)``) and returns
    that epoch's ``tf.data.Dataset``. Use with ``model.fit(ds, epochs=...,
    steps_per_epoch=...)``: Keras keeps one iterator across epochs when
    ``steps_per_epoch`` is given (keras/src/trainers/epoch_iterator.py).

    Args:
        first_epoch: int, or an int64 ``tf.Variable`` read when iteration starts (the
            Keras callback's ``epoch_variable``, set when it restores a checkpoint).
    """
    import tensorflow as tf

    base = tf_stateless_seed(seed, "epochs")
    start = first_epoch

    def one(e):
        epoch = e + tf.cast(start, tf.int64)
        return build(epoch, tf.random.fold_in(base, epoch))

    return tf.data.Dataset.range(int(epochs)).flat_map(one)
