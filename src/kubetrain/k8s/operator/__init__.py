"""The TrainJob operator: informers, a work queue, the reconciler, leader election, health and metrics.

Public surface: :class:`Operator` and :class:`OperatorSettings`; everything else is an implementation module.
"""

from kubetrain.k8s.operator.manager import Operator, run_operator
from kubetrain.k8s.operator.settings import OperatorSettings

__all__ = ["Operator", "OperatorSettings", "run_operator"]
