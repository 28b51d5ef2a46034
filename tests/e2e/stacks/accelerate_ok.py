"""HF accelerate, reproducible: accelerate.utils.set_seed before the model, a prepared
DataLoader (sharded across processes), one checkpoint by save_state at the end.
Run as: accelerate launch --multi_gpu --num_processes 2 accelerate_ok.py (on a machine
without CUDA this starts 2 CPU processes on gloo; `--cpu` would start only one)."""
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    accelerator = Accelerator(cpu=True)
    set_seed(42)
    x = torch.randn(64, 8)
    y = (x[:, :1] > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for epoch in range(2):
        model.train()
        for step, (xb, yb) in enumerate(loader):
            loss = nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        print(f"process {accelerator.process_index} epoch {epoch} loss {loss.item():.6f}")
    accelerator.wait_for_everyone()
    accelerator.save_state("ckpt")
    accelerator.print("done", sum(p.sum().item() for p in model.parameters()))


if __name__ == "__main__":
    main()
