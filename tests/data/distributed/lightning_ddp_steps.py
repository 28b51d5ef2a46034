"""Lightning DDP on 2 CPU processes (Lightning starts the second itself); with PERTURB=1
rank 1's batches differ from step 3 on."""
import os
import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)

    def training_step(self, batch, i):
        x, = batch
        if os.environ.get("PERTURB") and self.global_rank == 1 and self.global_step >= 3:
            x = x + 1e-3
        return self.net(x).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    pl.seed_everything(0)
    data = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                         enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)
    trainer.fit(M(), data)
