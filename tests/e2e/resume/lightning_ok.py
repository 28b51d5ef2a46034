"""PyTorch Lightning resuming exactly with fit(ckpt_path="last"): a callback puts every RNG
stream in the checkpoint (fwd9m.rng.state_dict()) and restores it."""
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import fwd9m.rng


class LitRegressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        print(f"step {self.global_step} loss {loss.item():.8f}")
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class RngState(pl.Callback):
    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        checkpoint["rng"] = fwd9m.rng.state_dict()

    def on_load_checkpoint(self, trainer, pl_module, checkpoint):
        fwd9m.rng.load_state_dict(checkpoint["rng"])


def callbacks():
    return [ModelCheckpoint(dirpath="ckpt", save_last=True), RngState()]


def main():
    pl.seed_everything(42, workers=True)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    trainer = pl.Trainer(max_epochs=3, deterministic=True, accelerator="cpu", devices=1, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks())
    trainer.fit(LitRegressor(), loader, ckpt_path="last")
    torch.save(trainer.model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
