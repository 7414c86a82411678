"""Pyramid Flow's figures: pixel FD against exact training FLOPs (with its DVC plot data), and the samples
as a PNG grid and an animated GIF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from components.io import atomic_path, save_csv, save_figure
from paperflows.plots import figure
from paperflows.rows import mean
from pipelines.pyramid_flow.params import NO_JUMP

MARKERS = {NO_JUMP: "o", "block": "o", "iid": "s", "none": "x"}


def groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    """Rows by ``(method, variant, step)``, in table order."""
    out: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["method"], r["variant"], int(r["step"])), []).append(r)
    return out


def variant_name(method: str, variant: str) -> str:
    return method if variant in (NO_JUMP, "block") else f"{method}, jump={variant}"


def quality_vs_flops(evals: list[dict[str, Any]], png: Path, csv: Path) -> None:
    """Mean pixel FD of every scored snapshot against its training GFLOPs, one line per method."""
    points = [
        {
            "method": m,
            "variant": v,
            "step": s,
            "train_gflops": mean([r["train_flops"] for r in g]) / 1e9,
            "fd_pixels": mean([r["fd_pixels"] for r in g]),
        }
        for (m, v, s), g in sorted(groups(evals).items())
    ]
    save_csv(points, csv)
    fig, ax = figure(6, 4)
    lines = list(dict.fromkeys((p["method"], p["variant"]) for p in points))
    colours = {m: f"C{i}" for i, m in enumerate(dict.fromkeys(m for m, _ in lines))}
    for method, variant in lines:
        pts = [p for p in points if (p["method"], p["variant"]) == (method, variant)]
        ax.plot(
            [p["train_gflops"] for p in pts],
            [p["fd_pixels"] for p in pts],
            marker=MARKERS[variant],
            color=colours[method],
            linestyle="-" if variant in (NO_JUMP, "block") else "none",
            label=variant_name(method, variant),
        )
    ax.set_xlabel("training GFLOPs (exact count)")
    ax.set_ylabel("pixel FD (PCA of real frames), lower is better")
    ax.legend(fontsize=8)
    save_figure(fig, png)


def sample_media(rows: list[tuple[str, Tensor]], png: Path, gif: Path, scale: int = 4, pad: int = 2) -> None:
    """``rows`` of ``(name, clips [n, T, H, W])``: a PNG with one strip per row (clips side by side, frames
    left to right) and a GIF playing the frames of every clip of every row (upscaled ``scale`` x)."""
    from PIL import Image

    n, t, size = rows[0][1].shape[0], rows[0][1].shape[1], rows[0][1].shape[-1]
    fig, axes = figure(1.0 + 0.5 * n * t, 0.8 * len(rows), nrows=len(rows))
    for ax, (name, clips) in zip(axes if len(rows) > 1 else [axes], rows, strict=True):
        gap = torch.ones(clips.shape[-2], 2)  # a white bar between clips
        strip = torch.cat([part for clip in clips for part in (torch.cat(list(clip), dim=1), gap)][:-1], dim=1)
        ax.imshow(strip.numpy(), cmap="gray", vmin=0, vmax=1)
        ax.set_yticks([])
        ax.set_xticks([])
        ax.set_ylabel(name, rotation=0, ha="right", fontsize=7)
    save_figure(fig, png)
    frames = []
    for f in range(t):
        canvas = torch.ones(len(rows) * (size + pad), n * (size + pad))
        for r, (_, clips) in enumerate(rows):
            for c in range(min(n, clips.shape[0])):
                canvas[r * (size + pad) : r * (size + pad) + size, c * (size + pad) : c * (size + pad) + size] = clips[
                    c, f
                ]
        img = Image.fromarray((canvas.numpy() * 255).round().astype("uint8"), mode="L")
        frames.append(img.resize((img.width * scale, img.height * scale), Image.NEAREST))
    with atomic_path(gif) as tmp:
        frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:], duration=400, loop=0)
