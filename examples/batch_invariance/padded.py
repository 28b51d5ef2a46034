"""varies.py made batch invariant: every batch is padded to 32 requests, so every matmul
has one shape and one summation order (fwd9m check --vary batch padded.py: exit 0)."""

import torch
from varies import Block

FIXED = 32


class Padded(torch.nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        pad = x.new_zeros(FIXED - len(x), *x.shape[1:])
        return self.block(torch.cat([x, pad]))[: len(x)]


torch.manual_seed(0)
model = Padded(Block()).eval()
requests = torch.randn(32, 2, 256)
with torch.no_grad():
    print(model(requests).sum().item())
