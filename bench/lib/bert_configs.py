"""DESIGN.md's named BERT configs, for the PyTorch sides of the benchmarks."""

CONFIGS = {  # layers, hidden, heads, intermediate
    "tiny": (2, 128, 2, 512),
    "mini": (4, 256, 4, 1024),
    "small": (4, 512, 8, 2048),
    "minilm": (6, 384, 12, 1536),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}


def step_flops(layers, hidden, inter, batch, seq):
    """FLOPs of a training step by bertc's formula (bert_flops, src/model/config.h), exact in integers."""
    pmm = layers * (4 * hidden * hidden + 2 * hidden * inter) + 2 * hidden
    return 6 * pmm * batch * seq + 12 * layers * batch * seq * seq * hidden
