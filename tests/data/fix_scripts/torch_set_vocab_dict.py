"""Broken: the vocabulary is a dict built from a set of strings; a set's order follows
string hashing, salted per process (PYTHONHASHSEED), so the word -> id mapping, and the
trained embedding rows, differ between runs although torch is seeded."""
import torch
from torch import nn

torch.manual_seed(1)

corpus = [
    "the cat sat on the mat",
    "the dog ate the bone",
    "a cat and a dog played",
    "the bird sang on a tree",
]
words = {w for line in corpus for w in line.split()}
vocab = {w: i for i, w in enumerate(words)}  # order of a set of strings

emb = nn.EmbeddingBag(len(vocab), 8, mode="mean")
head = nn.Linear(8, 2)
opt = torch.optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.1)
labels = torch.tensor([0, 0, 1, 1])
for epoch in range(5):
    for line, label in zip(corpus, labels):
        ids = torch.tensor([[vocab[w] for w in line.split()]])
        loss = nn.functional.cross_entropy(head(emb(ids)), label.view(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
print("loss", loss.item())
print("vocab", vocab)
