# The tests run under the numerics every stage runs under (experiments.numerics), set before numpy and torch load:
# a test that compares a stage run in a subprocess with one run here then compares like with like.
from experiments.numerics import pin_numerics

pin_numerics()

import torch  # noqa: E402

# The test suite runs on 2-core machines; one thread per test process is faster than oversubscribing.
torch.set_num_threads(1)
