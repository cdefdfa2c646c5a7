"""Coverage-guided fuzzing of every decoder that reads outside input (atheris)."""
