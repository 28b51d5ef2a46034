"""A tiny transformers Trainer run (a 1-layer BertConfig model, no download): it prints
its timings as quoted strings ({'train_runtime': '0.1976', ...}) and writes them into
trainer_state.json; everything else it prints and writes is reproducible."""
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

torch.manual_seed(0)
config = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8,
                    max_position_embeddings=16)


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"input_ids": torch.randint(0, 50, (8,), generator=g), "labels": torch.tensor(i % 2)}


args = TrainingArguments(output_dir="out", num_train_epochs=1, per_device_train_batch_size=4, logging_steps=1,
                         save_strategy="epoch", eval_strategy="epoch", report_to=[], seed=0, use_cpu=True,
                         disable_tqdm=True)
Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Data(), eval_dataset=Data()).train()
