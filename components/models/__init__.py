"""Neural network modules with small frozen configs: velocity networks, transformers (ViT, DiT, point
transformer), LoRA and ToRA adapters, SAM-style decoders and packaged pretrained encoders."""
