"""A different program from torch_index_put.py (for the 'different programs' message)."""
import torch

torch.manual_seed(0)
a = torch.randn(3, 3)
print((a @ a).sum().item())
