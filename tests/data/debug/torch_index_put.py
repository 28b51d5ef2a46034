"""Training script whose model scatters with index_put_(accumulate=True) over many
duplicate indices: nondeterministic on CPU with more than one intra-op thread."""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(2)


class Pool(nn.Module):
    """Sums rows into 8 buckets by a fixed, heavily duplicated index."""

    def __init__(self, n):
        super().__init__()
        self.register_buffer("index", torch.arange(n) % 8)

    def forward(self, x):
        out = torch.zeros(8, x.shape[1])
        out.index_put_((self.index,), x, accumulate=True)  # noqa: FWD703 (the bug under test)
        return out / x.shape[0]


class Net(nn.Module):
    def __init__(self, n=400000):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.pool = Pool(n)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.pool(self.proj(x)))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(400000, 4)
y = torch.randn(8, 1)
for _step in range(2):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print(loss.item())
