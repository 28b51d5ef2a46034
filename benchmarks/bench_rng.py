"""Cost of RNG-state checkpoints and per-sample seeding, against what they sit next to."""

from __future__ import annotations

import io

from _harness import Case


def cases(quick: bool):
    import numpy as np
    import torch

    from fwd9m import data, rng
    from fwd9m.seed import derive_seed

    torch.set_num_threads(1)
    model = torch.nn.Linear(1000, 1000)  # a small model: 1M float32 parameters, 4 MB
    loader = torch.utils.data.DataLoader(range(8), shuffle=True, generator=data.torch_generator(1))
    rng.register(loader, "bench.loader")
    rng.register(np.random.default_rng(0), "bench.aug")

    def save_model():
        torch.save(model.state_dict(), io.BytesIO())

    def save_rng():
        rng.to_bytes(rng.capture_rng_state())

    class Aug:
        def __init__(self):
            self.rng = np.random.default_rng(0)

        def __len__(self):
            return 64

        def __getitem__(self, i):  # noise augmentation of a 3x64x64 image
            return np.float32(i) + self.rng.standard_normal((3, 64, 64), dtype=np.float32)

    plain, seeded = Aug(), data.SampleSeeded(Aug(), seed=1)
    lean = data.SampleSeeded(Aug(), seed=1, seed_globals=("torch",))

    def run_plain():
        for i in range(len(plain)):
            plain[i]

    def run_seeded():
        for i in range(len(seeded)):
            seeded[i]

    def run_lean():
        for i in range(len(lean)):
            lean[i]

    keys = [("task", e, s, r) for e in range(4) for s in range(50) for r in range(2)]

    def seedseq():
        for k in keys:
            np.random.SeedSequence([7, k[1], k[2], k[3]]).generate_state(2)

    def derive():
        for k in keys:
            derive_seed(7, *k)

    rep = 3 if quick else 7
    return [
        Case(
            "rng: capture+serialise all sources",
            save_model,
            save_rng,
            baseline_name="torch.save(4 MB state_dict)",
            target=1.0,
            repeat=rep,
            note="an RNG checkpoint (~0.5 ms) costs less than saving a small model",
        ),
        Case(
            "rng: SampleSeeded (all globals)",
            run_plain,
            run_seeded,
            baseline_name="3x64x64 noise augmentation",
            target=4.0,
            repeat=rep,
            note="num_workers=0: seeds and restores python/numpy/torch globals per sample, "
            "~0.3 ms (mostly numpy get/set_state; measured 2.1-2.8x); in workers "
            "nothing is restored",
        ),
        Case(
            "rng: SampleSeeded (seed_globals=torch)",
            run_plain,
            run_lean,
            baseline_name="3x64x64 noise augmentation",
            target=2.0,
            repeat=rep,
            note="only torch's global and the dataset's own generators, ~0.1 ms (measured 1.3-1.5x)",
        ),
        Case(
            "seed: derive_seed (BLAKE2b)",
            seedseq,
            derive,
            baseline_name="numpy SeedSequence",
            target=1.0,
            repeat=rep,
            note="typed-key hashing vs numpy's own seed mixing",
        ),
    ]
