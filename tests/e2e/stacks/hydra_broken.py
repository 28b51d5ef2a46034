"""Broken: the model is initialised unseeded. A Hydra app as its users write it: config from hydra_conf/, results logged (Hydra logs to
stdout and to outputs/<date>/<time>/hydra_ok.log), the model saved in Hydra's run folder."""

import logging

import hydra
import torch
from omegaconf import DictConfig

log = logging.getLogger(__name__)


@hydra.main(version_base=None, config_path="hydra_conf", config_name="config")
def main(cfg: DictConfig) -> None:
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    for step in range(cfg.steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.6f", step, loss.item())
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
