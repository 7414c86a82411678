"""Datasets: offline procedural generators (shapes, scenes, toy densities, moving digits) and readers of the
official formats a user can point a pipeline at (MNIST IDX, NYUv2, PC15k, QM9, recommendation sequences)."""
