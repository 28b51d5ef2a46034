"""A PyTorch loop tracked with MLflow's local file store: mlflow writes
mlruns/<experiment id>/<run id>/ with params, metrics (each value with its time) and tags."""

import os

os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this switch

import mlflow
import torch

mlflow.set_tracking_uri("file:./mlruns")
mlflow.set_experiment("demo")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 4), torch.randn(64, 1)
with mlflow.start_run():
    mlflow.log_params({"lr": 0.1, "steps": 10})
    for step in range(10):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mlflow.log_metric("loss", loss.item(), step=step)
print(f"final loss {loss.item():.6f}")
