"""PreferDiff: preference-based diffusion for sequential recommendation: the figures (paperflows.plots.figure, components.io.save_figure / save_csv)."""
