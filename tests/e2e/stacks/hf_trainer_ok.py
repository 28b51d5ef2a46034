"""HF transformers Trainer, reproducible: a tiny BERT built from a config (no download),
a synthetic dataset, TrainingArguments(full_determinism=True, seed=42), 2 epochs."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments, set_seed

VOCAB, LENGTH = 50, 12


class SyntheticDataset(torch.utils.data.Dataset):
    def __init__(self, n=32):
        g = torch.Generator().manual_seed(0)
        self.input_ids = torch.randint(1, VOCAB, (n, LENGTH), generator=g)
        self.labels = (self.input_ids[:, 0] > VOCAB // 2).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.input_ids[i], "attention_mask": torch.ones(LENGTH, dtype=torch.long),
                "labels": self.labels[i]}


def main():
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=LENGTH, num_labels=2)
    args = TrainingArguments(
        output_dir="hf_out", num_train_epochs=2, per_device_train_batch_size=8,
        learning_rate=1e-3, seed=42, full_determinism=True, save_strategy="epoch",
        logging_steps=1, report_to="none", use_cpu=True, dataloader_num_workers=0,
    )
    set_seed(42)  # before the model: Trainer seeds only in __init__, after the weights exist
    model = BertForSequenceClassification(config)
    trainer = Trainer(model=model, args=args, train_dataset=SyntheticDataset())
    result = trainer.train()
    print("train loss", result.training_loss)


if __name__ == "__main__":
    main()
