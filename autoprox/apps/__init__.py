"""Layer 7: what a researcher does with proxies: ranking tables, training-free ViT search, transfer studies."""
