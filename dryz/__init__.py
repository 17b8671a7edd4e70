"""dryz: audit llama.cpp's DRY sampler against independent oracles."""

__version__ = "0.1.0"
