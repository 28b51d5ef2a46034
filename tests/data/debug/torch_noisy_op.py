"""Training script with a custom op whose kernel scales by the number of earlier runs
(a counter file named by FWD9M_TEST_RUN_COUNTER, outside the runs' folders): its input
is identical in both recorded runs and its output differs, for certain. A stand-in for
a nondeterministic kernel that does not depend on winning a race."""
import os

import torch
from torch import nn

torch.manual_seed(0)
_COUNTER = os.environ.get("FWD9M_TEST_RUN_COUNTER")


def _run_number() -> int:
    if not _COUNTER:
        return 0
    with open(_COUNTER, "r+") as f:
        n = int(f.read() or 0)
        f.seek(0)
        f.write(str(n + 1))
        f.truncate()
    return n


_RUN = _run_number()


@torch.library.custom_op("fwd9m_test::noisy_scale", mutates_args=())
def noisy_scale(x: torch.Tensor) -> torch.Tensor:
    return x * (1.0 + _RUN * 2.0 ** -12)


@noisy_scale.register_fake
def _(x):
    return torch.empty_like(x)


noisy_scale.register_autograd(lambda ctx, grad: grad)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(noisy_scale(torch.tanh(self.proj(x))))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 4)
y = torch.randn(64, 1)
for _step in range(3):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print(loss.item())
