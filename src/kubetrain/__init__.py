"""kubetrain: Kubeflow Trainer-compatible training runtimes, run locally or on Kubernetes."""

__version__ = "0.1.0"

__all__ = ["__version__"]
