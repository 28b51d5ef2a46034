"""Stable-Baselines3 PPO on CartPole, seeded as its docs say, with the logger's table on
stdout (verbose=1: time/fps, time/time_elapsed) and the model saved as a zip archive."""

import torch
from stable_baselines3 import PPO

torch.set_num_threads(1)
model = PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, n_epochs=2, seed=0, verbose=1, device="cpu")
model.learn(total_timesteps=512)
model.save("ppo_cartpole")
