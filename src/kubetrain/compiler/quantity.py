"""Resource quantities for the compiler (PodGroup sums, GPU and CPU counts): the API layer's parser."""

from kubetrain.api.quantity import Quantity, QuantityError, sum_requests

__all__ = ["Quantity", "QuantityError", "sum_requests"]
