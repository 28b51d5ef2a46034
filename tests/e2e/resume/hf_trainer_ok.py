"""HF transformers Trainer resuming exactly with train(resume_from_checkpoint=True): the
collator draws its input noise from torch's global generator, which Trainer saves with
each checkpoint (rng_state.pth) and restores; checkpoints at epoch ends (inside an epoch
Trainer restores it only after it has collated the first resumed batch)."""
import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import Trainer, TrainingArguments, set_seed


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, x, labels):
        return {"loss": torch.nn.functional.mse_loss(self.net(x), labels)}


class NoisyCollator:
    def __call__(self, rows):
        x = torch.stack([r["x"] for r in rows])
        noise = torch.randn(x.shape) * 0.1
        return {"x": x + noise, "labels": torch.stack([r["labels"] for r in rows])}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--resume", action="store_true")
    resume = p.parse_args().resume
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(48, 8, generator=g)
    data = [{"x": x, "labels": x[:1] * 2} for x in xs]
    args = TrainingArguments(output_dir="hf_out", num_train_epochs=2, per_device_train_batch_size=8,
                             learning_rate=1e-2, seed=42, save_strategy="epoch", logging_steps=1,
                             report_to="none", use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
    set_seed(42)
    trainer = Trainer(model=Regressor(), args=args, train_dataset=data, data_collator=NoisyCollator())
    trainer.train(resume_from_checkpoint=resume or None)
    torch.save(trainer.model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
