"""DESIGN.md's named BERT configs, for the PyTorch sides of the benchmarks."""

CONFIGS = {  # layers, hidden, heads, intermediate
    "tiny": (2, 128, 2, 512),
    "mini": (4, 256, 4, 1024),
    "small": (4, 512, 8, 2048),
    "minilm": (6, 384, 12, 1536),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}
