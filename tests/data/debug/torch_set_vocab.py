"""Builds token ids by iterating a set of strings: the order (and so every id) changes
with the per-process string-hash salt unless PYTHONHASHSEED is fixed."""
import torch

torch.manual_seed(0)
words = "the cat sat on the mat with a hat and a bat".split()
vocab = {w: i for i, w in enumerate(set(words))}  # noqa: FWD402 (order depends on PYTHONHASHSEED)
ids = torch.tensor([vocab[w] for w in words])
emb = torch.nn.Embedding(len(vocab), 4)
print(emb(ids).sum().item())
