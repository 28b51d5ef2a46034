"""PyTorch Lightning, reproducible: seed_everything + Trainer(deterministic=True), with
CSVLogger and TensorBoardLogger, the default ModelCheckpoint and the progress bar on."""
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitRegressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    pl.seed_everything(42, workers=True)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = LitRegressor()
    trainer = pl.Trainer(
        max_epochs=2, deterministic=True, accelerator="cpu", devices=1,
        logger=[CSVLogger("logs"), TensorBoardLogger("logs")],
        enable_progress_bar=True, log_every_n_steps=1,
    )
    trainer.fit(model, loader)
    print("final loss", float(trainer.callback_metrics["train_loss"]))


if __name__ == "__main__":
    main()
