"""paperflows components: a plain library of reusable pieces (data, models, training, OT, merging,
generative modelling, metrics, I/O). Components never import prefect, mlflow or dvc, never read
params.yaml or environment variables: inputs are typed arguments, small frozen configs and seeds."""
