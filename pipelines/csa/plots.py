"""CSA: canonical similarity analysis for data-efficient multimodal alignment: the figures (paperflows.plots.figure, components.io.save_figure / save_csv)."""
