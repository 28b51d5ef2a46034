"""A small text classifier in PyTorch: word embeddings averaged per document, plus one
round of message passing on the document-word graph, each a scatter-style sum with
``index_put_(..., accumulate=True)`` over duplicate document and token ids.

The "text" is scikit-learn's digits written as words: each ink pixel becomes a token
such as ``"c5:3"`` (row c, column 5, intensity 3), so nothing is downloaded.

The broken variant (broken.py) had two mistakes that made every run different:
1. The vocabulary is built by enumerating a ``set`` of strings. String hashes are salted
   per process unless ``PYTHONHASHSEED`` is fixed
   (https://docs.python.org/3/reference/datamodel.html#object.__hash__), so the set's
   order, hence every token id, changes from run to run.
2. ``index_put_(accumulate=True)`` over many duplicate indices adds in whatever order
   the CPU threads reach them: for float32 with 2 or more threads and at least 32768
   elements the CPU kernel adds atomically in parallel, and runs serially only under
   ``torch.use_deterministic_algorithms(True)`` (``index_put_kernel`` in
   https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cpu/IndexKernel.cpp).
   ``index_add_`` would be deterministic on CPU but is not on CUDA
   (https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html).

Fixed: the vocabulary is sorted, and ``fwd9m.torch.enable_determinism`` selects the
deterministic kernels. (``fwd9m run --seed 0 broken.py`` also fixes both, unmodified:
it sets ``PYTHONHASHSEED`` before the interpreter starts and enables determinism
when torch is imported.)

Run:  python examples/torch_text/fixed.py [--out weights.npz]
"""

import argparse

import numpy as np
import torch
from sklearn.datasets import load_digits

import fwd9m.torch

fwd9m.torch.enable_determinism(seed=0)  # FIX 2: deterministic kernels (index_put_), seeds


def digits_as_text():
    digits = load_digits()
    docs = []
    for image in digits.images.astype(int):
        docs.append([f"{'abcdefgh'[r]}{c}:{image[r, c] // 4}"
                     for r in range(8) for c in range(8) if image[r, c] > 0])
    return docs, digits.target


class WordDocGraph(torch.nn.Module):
    """Bag of words plus one round of message passing on the document-word graph (as in
    TextGCN): each word gathers the documents it occurs in, each document then gathers
    its words. Both gathers are scatter-adds over duplicate indices."""

    def __init__(self, vocab_size, dim=32, classes=10):
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = torch.nn.Embedding(vocab_size, dim)
        self.classifier = torch.nn.Linear(2 * dim, classes)

    @staticmethod
    def scatter_mean(values, index, size):
        total = values.new_zeros(size, values.shape[1])
        total = total.index_put_((index,), values, accumulate=True)
        count = torch.bincount(index, minlength=size).clamp(min=1)
        return total / count[:, None]

    def forward(self, token_ids, doc_ids, n_docs):
        docs = self.scatter_mean(self.embedding(token_ids), doc_ids, n_docs)
        words = self.scatter_mean(docs[doc_ids], token_ids, self.vocab_size)
        context = self.scatter_mean(words[token_ids], doc_ids, n_docs)
        return self.classifier(torch.cat([docs, context], dim=1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="save the final weights to this .npz file")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    docs, labels = digits_as_text()
    tokens = sorted(set(t for doc in docs for t in doc))  # FIX 1: a stable order
    vocab = {token: i for i, token in enumerate(tokens)}

    token_ids = torch.tensor([vocab[t] for doc in docs for t in doc])
    doc_ids = torch.tensor([d for d, doc in enumerate(docs) for _ in doc])
    targets = torch.tensor(labels)

    model = WordDocGraph(len(vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(args.steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            model(token_ids, doc_ids, len(docs)), targets)
        loss.backward()
        optimizer.step()

    print(f"vocabulary {len(vocab)} tokens, final loss {loss.item()!r}")
    weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    for name, value in weights.items():
        print(f"{name:<20} shape={str(value.shape):<9} sum={float(value.sum())!r}")
    if args.out:
        np.savez(args.out, **weights)


if __name__ == "__main__":
    main()
