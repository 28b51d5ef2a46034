"""Cost of the replica-consistency check (fwd9m.distributed.check_replicas) against
what a data-parallel step already does, in a one-rank gloo group in this process.

The check digests every parameter and buffer (fwd9m.fingerprint) and all-gathers the
digests (8 bytes per tensor plus names), so its cost is one read of the model's bytes;
the baselines are an SGD step and a copy of every parameter. Run it every N steps: the
per-step overhead is the ratio divided by N.
"""

from __future__ import annotations

import socket

from _harness import Case


def cases(quick: bool):
    import torch
    import torch.distributed as dist

    import fwd9m.distributed as fd

    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    width, depth = (512, 4) if quick else (1024, 8)
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.BatchNorm1d(width)]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    model(torch.randn(8, width)).sum().backward()
    params = [p.detach() for p in model.parameters()]
    mb = sum(p.numel() * p.element_size() for p in params) / 2**20

    def sgd_step():
        opt.step()

    def clone():
        return [p.clone() for p in params]

    def check():
        fd.check_replicas(model)

    repeat = 3 if quick else 7
    return [
        Case(
            f"check_replicas vs SGD step ({mb:.0f} MiB of parameters)",
            sgd_step,
            check,
            baseline_name="optimizer.step()",
            repeat=repeat,
            target=10.0,
            note="one check costs a few optimizer steps: check every 100 steps for <10% overhead",
        ),
        Case(
            f"check_replicas vs cloning every parameter ({mb:.0f} MiB)",
            clone,
            check,
            baseline_name="[p.clone() for p in params]",
            repeat=repeat,
            target=5.0,
            note="the check reads the parameters' bytes once, as a copy does",
        ),
    ]
