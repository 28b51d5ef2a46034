"""A small transformer block served in batches: on a CPU (PyTorch 2.13, MKL) a request gets
other bits in a batch of one than in a batch of 32 (fwd9m check --vary batch varies.py)."""

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, d=256, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.norm2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Block().eval()
    requests = torch.randn(32, 2, 256)  # 32 requests of 2 tokens
    with torch.no_grad():
        print(model(requests).sum().item())
