import torch

# The test suite runs on 2-core machines; one thread per test process is faster than oversubscribing.
torch.set_num_threads(1)
