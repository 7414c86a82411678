"""TVM: token-supervised value models for tree search in math reasoning: the figures (paperflows.plots.figure, components.io.save_figure / save_csv)."""
