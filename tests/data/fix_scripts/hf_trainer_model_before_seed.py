"""Broken: a tiny BERT classifier built from a config (no download) before the HF
Trainer exists; the Trainer seeds (args.seed) only when it is made, after the model's
weights were drawn unseeded, so the fine-tuned weights differ between runs.
Offline: HF_HUB_OFFLINE=1."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class ToyDataset(torch.utils.data.Dataset):
    def __init__(self, n=64):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, 100, (n, 12), generator=g)
        self.labels = (self.ids[:, 0] > 50).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long), "labels": self.labels[i]}


def main():
    config = BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, num_labels=2,
    )
    model = BertForSequenceClassification(config)  # weights drawn unseeded
    args = TrainingArguments(
        output_dir="hf_out", max_steps=6, per_device_train_batch_size=16, learning_rate=1e-3,
        report_to=[], save_strategy="no", logging_steps=2, use_cpu=True, seed=42,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=ToyDataset())
    trainer.train()
    print("classifier sum", model.classifier.weight.sum().item())


if __name__ == "__main__":
    main()
