"""Helper for torch_helper_clock_seed.py: seeds every generator, from the clock."""
import random
import time

import numpy as np
import torch


def set_seed():
    seed = int(time.time() * 1000) % 2**32  # a new seed every run
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return seed
