import torch

torch.seed()
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))  # HARMLESS
torch.manual_seed(0)
model.load_state_dict(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).state_dict())
torch.seed()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.ones(8, 4)).pow(2).mean()  # MATTERS: dropout in train mode, unseeded
opt.zero_grad()
loss.backward()
opt.step()
