import torch

torch.seed()
scale = torch.randn(4)  # HARMLESS: filled over before use
scale.fill_(0.5)
data = torch.arange(32, dtype=torch.float32).reshape(8, 4) * scale
order = torch.randperm(8)  # MATTERS: an unseeded shuffle
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss = model(data[order][:4]).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
